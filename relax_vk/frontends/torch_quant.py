"""Quantized PyTorch graphs as PyTorch's own tools write them, converted for TVM's importer.

Two families of ops reach ``torch.export``:

* **pt2e** (``prepare_pt2e`` / ``convert_pt2e`` with a quantizer such as XNNPACKQuantizer):
  ``quantized_decomposed::quantize_per_tensor`` / ``dequantize_per_tensor`` (``.default``: scale
  and zero point numbers; ``.tensor``: tensors), ``quantize_per_channel`` /
  ``dequantize_per_channel``, the dynamic form's ``choose_qparams.tensor``, and the per-token and
  per-group ops of 8-bit-activation / 4-bit-weight models (``choose_qparams_per_token_asymmetric``,
  ``quantize_per_token``, ``dequantize_per_token``, ``dequantize_per_channel_group``).
* **torchao's configs** (``quantize_(model, config)``): ``torchao::dequantize_affine`` of integer
  weights in blocks (``IntxWeightOnlyConfig``), ``choose_qparams_affine`` + ``quantize_affine`` of
  the activations (``Int8DynamicActivationIntxWeightConfig``, ExecuTorch's "8da4w"), and the plain
  ``mm(x, t(q).to(float32)) * scale`` that ``Int8WeightOnlyConfig`` exports to.

TVM's importer knows none of them. Here each computes what PyTorch's reference implementation
(``torch/ao/quantization/fx/_decomposed.py``, ``torchao.quantization.quant_primitives``) computes:
``quantize`` is ``clamp(round(x * (1 / scale)) + zero_point, qmin, qmax)`` with rounding half to
even, ``dequantize`` is ``(q - zero_point) * scale``. As in the ONNX front door
(:mod:`relax_vk.frontends.onnx_quant`), a quantized *activation* travels between kernels as float32
holding the integers (WGSL can neither hold nor store 8-bit values); a quantize whose result leaves
the graph or reaches anything but a dequantize is cast to its integer dtype.

Integer *weights* stay integers:

* the weight of a ``linear`` (``aten.linear``, kept whole in quantized graphs) that a dequantize of
  constants produces, per tensor, per output channel or per group along its inputs, 2 to 8 bits,
  becomes one kernel that reads the packed codes as it multiplies
  (:class:`~relax_vk.frontends.blockwise.BlockwiseFormat`): the device keeps the packed bytes and a
  scale (and, when not the midpoint, a zero point) per block, and no float copy of the weight
  exists;
* any other dequantize of constants per tensor or per channel (a conv's weight) is TVM's
  ``relax.dequantize`` of the integer constant, which the artifact keeps as integers and
  :mod:`relax_vk.passes.layout.quantized_weights` packs at compile time (a conv then reads the
  integers itself); blocked ones are float ops over the integer constant.

Not converted (an :class:`~relax_vk.core.errors.UnsupportedError` naming the node):
``choose_qparams_symmetric``, ``choose_qparams_affine`` mapping types other than ASYMMETRIC and
SYMMETRIC; float8 ops and torchao's float-zero-point variants are not in the table (TVM's
importer then names them as ops it cannot convert).
"""

from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from ..core.errors import UnsupportedError
from .blockwise import emit_blockwise_linear

#: op names (``node.target.__name__``) that dequantize: a quantize read only by these stays float
DEQUANTIZE_OPS = ("dequantize_per_tensor.default", "dequantize_per_tensor.tensor",
                  "dequantize_per_channel.default", "dequantize_per_token.default", "dequantize_per_channel_group.default",
                  "dequantize_affine.default")  # fmt: skip
#: integer dtypes a quantize may produce
QUANTIZED_DTYPES = ("int8", "uint8", "int16", "uint16", "int32")


def _name(node) -> str:
    return getattr(node.target, "__name__", str(node.target))


def _where(node) -> str:
    return f"{_name(node).split('.')[0]} (node {node.name})"


def _dtype(torch_dtype, node) -> str:
    name = str(torch_dtype).replace("torch.", "")
    if name not in QUANTIZED_DTYPES:
        raise UnsupportedError(f"{_where(node)}: quantized dtype {name} is not supported ({', '.join(QUANTIZED_DTYPES)})")
    return name


def _known(importer, arg) -> Optional[np.ndarray]:
    """The value of ``arg`` when it is known at import: a number, or a placeholder that stands for
    a parameter, buffer or constant; else None."""
    if isinstance(arg, (bool, int, float)):
        return np.asarray(arg)
    if getattr(arg, "op", None) == "placeholder":
        value = getattr(importer, "_relax_vk_values", {}).get(arg.name)
        if value is not None:
            return value.detach().cpu().numpy()
    return None


def _float(importer, arg, shape: Optional[Sequence[int]] = None):
    """``arg`` as a float32 Relax expression (a constant when known), reshaped to ``shape``."""
    from tvm import relax

    bb = importer.block_builder
    value = _known(importer, arg)
    if value is not None:
        value = value.astype(np.float32)
        return relax.const(value.reshape(shape) if shape is not None else value)
    expr = importer.env[arg]
    if str(expr.ty.dtype) != "float32":
        expr = bb.emit(relax.op.astype(expr, "float32"))
    if shape is not None:
        expr = bb.emit(relax.op.reshape(expr, shape))
    return expr


def _axis_shape(rank: int, axis: int) -> Tuple[int, ...]:
    """The shape that broadcasts one value per index of ``axis`` over a rank-``rank`` tensor."""
    shape = [1] * rank
    shape[axis] = -1
    return tuple(shape)


def _emit_quantize(importer, node, x, scale, zero_point, qmin: int, qmax: int, dtype: str, inverse=None):
    """``clamp(round(x * inverse) + zero_point, qmin, qmax)``: float32 integers, or ``dtype`` when
    something other than a dequantize reads the result. ``inverse`` defaults to ``1 / scale``."""
    from tvm import relax

    bb = importer.block_builder
    if inverse is None:
        inverse = bb.emit(relax.op.divide(relax.const(1.0, "float32"), scale))
    q = bb.emit(relax.op.round(bb.emit(relax.op.multiply(x, inverse))))
    q = bb.emit(relax.op.clip(bb.emit(relax.op.add(q, zero_point)), qmin, qmax))
    if all(_name(user) in DEQUANTIZE_OPS for user in node.users):
        return q
    return bb.emit(relax.op.astype(q, dtype))


def _numbers(importer, node, scale_arg, zp_arg, shape=None):
    """``(scale, zero point, 1 / scale)`` as float32 Relax expressions; the inverse is a constant
    rounded once from the exact quotient when the scale is known (PyTorch's ``1.0 / scale``)."""
    from tvm import relax

    scale = _float(importer, scale_arg, shape)
    zero_point = _float(importer, zp_arg, shape) if zp_arg is not None else relax.const(0.0, "float32")
    known = _known(importer, scale_arg)
    inverse = None
    if known is not None:
        inv = (1.0 / known.astype(np.float64)).astype(np.float32)
        inverse = relax.const(inv.reshape(shape) if shape is not None else inv)
    return scale, zero_point, inverse


def _quantize_per_tensor(node, importer):
    """``quantize_per_tensor`` (numbers or ``[1]`` tensors) and ``quantize_per_token`` (``[..., 1]``
    tensors, one per row): the parameters broadcast as they are."""
    x, scale, zp, qmin, qmax, dtype = node.args[:6]
    s, z, inv = _numbers(importer, node, scale, zp)
    return _emit_quantize(importer, node, _float(importer, x), s, z, int(qmin), int(qmax), _dtype(dtype, node), inv)


def _quantize_per_channel(node, importer):
    x, scales, zps, axis, qmin, qmax, dtype = node.args[:7]
    x_expr = _float(importer, x)
    rank = len(x_expr.ty.shape.values)
    axis = int(axis) % rank
    shape = _axis_shape(rank, axis)
    s, z, inv = _numbers(importer, node, scales, zps, shape)
    return _emit_quantize(importer, node, x_expr, s, z, int(qmin), int(qmax), _dtype(dtype, node), inv)


def _dequantize_constant(importer, node, data: np.ndarray, scale: np.ndarray, zp: Optional[np.ndarray], axis: int):
    """TVM's ``relax.dequantize`` of an integer constant (per tensor or along ``axis``)."""
    from tvm import relax

    zp = np.zeros(1, np.int32) if zp is None else np.asarray(zp)
    info = np.iinfo(data.dtype)
    zp_dtype = data.dtype if zp.size and info.min <= zp.min() and zp.max() <= info.max else np.int32
    scale = np.asarray(scale, np.float32).reshape(-1)
    zp = zp.astype(zp_dtype).reshape(-1)
    return importer.block_builder.emit(relax.op.dequantize(relax.const(data), relax.const(scale), relax.const(zp), axis=axis, out_dtype="float32"))


def _emit_dequantize(importer, q_arg, scale, zero_point):
    from tvm import relax

    bb = importer.block_builder
    return bb.emit(relax.op.multiply(bb.emit(relax.op.subtract(_float(importer, q_arg), zero_point)), scale))


def _dequantize_per_tensor(node, importer):
    q, scale, zp = node.args[:3]
    data, s, z = _known(importer, q), _known(importer, scale), _known(importer, zp)
    if data is not None and data.dtype.kind in "iu" and s is not None and z is not None:
        return _dequantize_constant(importer, node, data, s, z, axis=-1)
    s_expr, z_expr, _ = _numbers(importer, node, scale, zp)
    return _emit_dequantize(importer, q, s_expr, z_expr)


def _dequantize_per_channel(node, importer):
    q, scales, zps, axis = node.args[:4]
    data, s, z = _known(importer, q), _known(importer, scales), None if zps is None else _known(importer, zps)
    if data is not None and data.dtype.kind in "iu" and s is not None and (zps is None or z is not None):
        return _dequantize_constant(importer, node, data, s, z, int(axis) % data.ndim)
    q_expr = _float(importer, q)
    rank = len(q_expr.ty.shape.values)
    s_expr, z_expr, _ = _numbers(importer, node, scales, zps, _axis_shape(rank, int(axis) % rank))
    return _emit_dequantize(importer, q, s_expr, z_expr)


def _dequantize_per_token(node, importer):
    q, scales, zps = node.args[:3]
    s_expr, z_expr, _ = _numbers(importer, node, scales, zps)
    return _emit_dequantize(importer, q, s_expr, z_expr)


def _range_with_zero(bb, data, axis=None):
    """``(min(data, 0), max(data, 0))`` over ``axis`` (all axes: None), dimensions kept (relax_vk's
    kernels reduce into at least one output element)."""
    from tvm import relax

    zero = relax.const(0.0, "float32")
    lo = bb.emit(relax.op.minimum(bb.emit(relax.op.min(data, axis=axis, keepdims=True)), zero))
    hi = bb.emit(relax.op.maximum(bb.emit(relax.op.max(data, axis=axis, keepdims=True)), zero))
    return lo, hi


def _asymmetric(bb, lo, hi, qmin: int, qmax: int, eps: float):
    """PyTorch's asymmetric parameters of a range ``lo <= 0 <= hi``: ``scale = max((hi - lo) /
    (qmax - qmin), eps)``, ``zero_point = clamp(qmin - round(lo / scale), qmin, qmax)``."""
    from tvm import relax

    span = bb.emit(relax.op.divide(bb.emit(relax.op.subtract(hi, lo)), relax.const(float(qmax - qmin), "float32")))
    scale = bb.emit(relax.op.maximum(span, relax.const(np.float32(eps))))
    zp = bb.emit(relax.op.subtract(relax.const(float(qmin), "float32"), bb.emit(relax.op.round(bb.emit(relax.op.divide(lo, scale))))))
    return scale, bb.emit(relax.op.clip(zp, qmin, qmax))


def _choose_qparams(node, importer):
    """``choose_qparams.tensor`` (the dynamic form's per-tensor parameters, :func:`_asymmetric`);
    both ``[1]`` float32 (PyTorch: float64 and int64)."""
    from tvm import relax

    bb = importer.block_builder
    x, qmin, qmax, eps = node.args[:4]
    scale, zp = _asymmetric(bb, *_range_with_zero(bb, _float(importer, x)), int(qmin), int(qmax), float(eps))
    return bb.emit(relax.Tuple([bb.emit(relax.op.reshape(scale, (1,))), bb.emit(relax.op.reshape(zp, (1,)))]))


def _choose_qparams_per_token(node, importer):
    """``choose_qparams_per_token_asymmetric`` (XNNPACK's rule, int8): per row of the last axis,
    ``scale = clamp((max+ - min-) / 255, eps)`` and the zero point that errs least at either end."""
    from tvm import relax

    bb = importer.block_builder
    zero = relax.const(0.0, "float32")
    lo, hi = _range_with_zero(bb, _float(importer, node.args[0]), axis=-1)
    scale = bb.emit(relax.op.divide(bb.emit(relax.op.subtract(hi, lo)), relax.const(255.0, "float32")))
    scale = bb.emit(relax.op.maximum(scale, relax.const(np.finfo(np.float32).eps, "float32")))
    d_lo, d_hi = bb.emit(relax.op.divide(lo, scale)), bb.emit(relax.op.divide(hi, scale))
    from_min = bb.emit(relax.op.subtract(relax.const(-128.0, "float32"), d_lo))
    from_max = bb.emit(relax.op.subtract(relax.const(127.0, "float32"), d_hi))
    errs = bb.emit(relax.op.add(bb.emit(relax.op.add(relax.const(-128.0, "float32"), d_lo)), bb.emit(relax.op.add(relax.const(127.0, "float32"), d_hi))))
    zp = bb.emit(relax.op.where(bb.emit(relax.op.greater(errs, zero)), from_min, from_max))
    zp = bb.emit(relax.op.round(bb.emit(relax.op.clip(zp, -128, 127))))
    return bb.emit(relax.Tuple([scale, zp]))


# ---------------------------------------------------------------- weights
def _grid(values: np.ndarray, rows: int, groups: int) -> Optional[np.ndarray]:
    """One parameter per tensor, per row or per (row, group) as a ``[rows, groups]`` array."""
    v = np.asarray(values).reshape(-1)
    if v.size == 1:
        return np.full((rows, groups), v[0], v.dtype)
    if v.size == rows:
        return np.repeat(v[:, None], groups, axis=1)
    if v.size == rows * groups:
        return v.reshape(rows, groups)
    return None


def _blocks(importer, node) -> Optional[Tuple[np.ndarray, np.ndarray, Optional[np.ndarray], int]]:
    """``(codes [rows, cols], scales [rows, groups], zero points [rows, groups] or None, group)``
    of a dequantize of constants whose parameters vary only along axis 0 and in groups along axis 1
    of a 2-D integer tensor, else None."""
    name, args = _name(node), node.args
    known = lambda a: None if a is None else _known(importer, a)  # noqa: E731
    data = known(args[0])
    if data is None or data.ndim != 2 or data.dtype.kind not in "iu":
        return None
    rows, cols = data.shape
    group = cols
    if name in ("dequantize_per_tensor.default", "dequantize_per_tensor.tensor"):
        scale_arg, zp_arg = args[1], args[2]
    elif name == "dequantize_per_channel.default":
        scale_arg, zp_arg = args[1], args[2]
        if int(args[3]) % 2 != 0:
            return None
    elif name == "dequantize_per_channel_group.default":
        scale_arg, zp_arg = args[1], args[2]
        group = min(int(args[6]) if len(args) > 6 else 128, cols)
    elif name == "dequantize_affine.default":
        block = [int(b) for b in args[1]]
        scale_arg, zp_arg = args[2], args[3]
        if len(block) != 2 or block[0] != 1 or cols % block[1]:
            return None
        group = block[1]
    else:
        return None
    scale, zp = known(scale_arg), known(zp_arg)
    if scale is None or (zp_arg is not None and zp is None) or cols % group:
        return None
    scales = _grid(scale.astype(np.float32), rows, cols // group)
    zps = None if zp is None else _grid(zp.astype(np.float64), rows, cols // group)
    if scales is None or (zp is not None and zps is None):
        return None
    return data, scales, zps, group


def fused_linear(importer, node):
    """``aten.linear`` whose weight is a dequantize of constants (per tensor, per output channel or
    per group along the inputs): one blockwise kernel over the packed codes (module docstring), or
    None when the weight is not such a dequantize."""
    from tvm import relax

    weight = node.args[1]
    if getattr(weight, "op", None) != "call_function" or _name(weight) not in DEQUANTIZE_OPS:
        return None
    found = _blocks(importer, weight)
    if found is None:
        return None
    y = emit_blockwise_linear(importer.block_builder, _float(importer, node.args[0]), *found)
    bias = node.args[2] if len(node.args) > 2 else None
    if y is not None and bias is not None:
        y = importer.block_builder.emit(relax.op.add(y, _float(importer, bias)))
    return y


def _linear(node, importer):
    fused = fused_linear(importer, node)
    return fused if fused is not None else importer._linear(node)


_CASTS = ("_to_copy.default", "to.dtype")
_TRANSPOSES = ("t.default", "permute.default", "transpose.int")


def _integer_matrix(importer, node) -> Optional[np.ndarray]:
    """``[N, K]`` integer codes when ``node`` (the right operand of ``x @ W``, ``W`` ``[K, N]``) is
    a float cast of an integer constant or of its transpose (torchao's ``Int8WeightOnlyConfig``:
    ``mm(x, t(q).to(float32)) * scale``), else None."""
    if getattr(node, "op", None) != "call_function" or _name(node) not in _CASTS or not node.args:
        return None
    source, transposed = node.args[0], False
    if getattr(source, "op", None) == "call_function" and _name(source) in _TRANSPOSES:
        dims = [int(d) for d in source.args[1]] if _name(source) == "permute.default" else None
        if dims is not None and dims != [1, 0]:
            return None
        source, transposed = source.args[0], True
    data = _known(importer, source)
    if data is None or data.ndim != 2 or data.dtype.kind not in "iu":
        return None
    return data if transposed else np.ascontiguousarray(data.T)


def _mm(node, importer):
    """``mm`` / ``matmul`` of a float cast of an integer weight: the blockwise kernel over its codes
    (scale 1, zero point 0; the model's own scale multiplies after), else TVM's matmul."""
    from tvm import relax

    codes = _integer_matrix(importer, node.args[1])
    if codes is not None:
        ones = np.ones((codes.shape[0], 1), np.float32)
        y = emit_blockwise_linear(importer.block_builder, _float(importer, node.args[0]), codes, ones, None, codes.shape[1])
        if y is not None:
            return y
    return importer.block_builder.emit(relax.op.matmul(importer.env[node.args[0]], importer.env[node.args[1]]))


def _blocking(node, shape, block) -> Tuple[list, list, list]:
    """``(split shape, parameter shape, reduced axes)`` of a tensor of ``shape`` in blocks of
    ``block`` (torchao's ``_get_reduction_params``): an axis of block 1 stays (it may be a run-time
    dim), one of its whole length is reduced, any other splits into ``(length / block, block)``
    with the block reduced."""
    if len(block) != len(shape):
        raise UnsupportedError(f"{_where(node)}: block {list(block)} does not match rank {len(shape)}")
    split, kept, axes = [], [], []
    for size, b in zip(shape, block):
        if b == 1:
            split.append(size), kept.append(size)
            continue
        if not isinstance(size, int) or size % b:
            raise UnsupportedError(f"{_where(node)}: block {list(block)} does not tile shape {list(shape)}")
        if b != size:
            split.append(size // b), kept.append(size // b)
        axes.append(len(split))
        split.append(b), kept.append(1)
    return split, kept, axes


def _static_shape(expr) -> list:
    """The shape of a tensor expression: ints where static, the dims' expressions where not."""
    from tvm import tirx

    return [int(v) if isinstance(v, tirx.IntImm) else v for v in expr.ty.shape.values]


def _blocked_args(node, importer):
    """``(input, block, scale arg, zero point arg)`` of a blocked (de)quantize: torchao's
    ``*_affine`` (block sizes given) or ``dequantize_per_channel_group`` (2-D, groups along the
    last axis)."""
    q = node.args[0]
    shape = _static_shape(importer.env[q])
    if _name(node) in ("dequantize_affine.default", "quantize_affine.default"):
        return q, shape, [int(b) for b in node.args[1]], node.args[2], node.args[3]
    group = int(node.args[6]) if len(node.args) > 6 else 128
    return q, shape, [1, min(group, shape[-1])], node.args[1], node.args[2]


def _qrange(node, dtype, qmin, qmax) -> Tuple[str, int, int]:
    """``(dtype, qmin, qmax)``: the quantized dtype's name and range, the dtype's own bounds where
    the op leaves them out."""
    name = _dtype(dtype, node)
    info = np.iinfo(name)
    return name, int(info.min) if qmin is None else int(qmin), int(info.max) if qmax is None else int(qmax)


def _blocked_operands(node, importer):
    """``(input split into its blocks, scale, zero point, input shape)`` of a blocked (de)quantize
    (:func:`_blocked_args`, :func:`_blocking`): float32, the parameters in the blocks' shape."""
    from tvm import relax

    bb = importer.block_builder
    x, shape, block, scale_arg, zp_arg = _blocked_args(node, importer)
    split, kept, _ = _blocking(node, shape, block)
    data = bb.emit(relax.op.reshape(_float(importer, x), split))
    zp = _float(importer, zp_arg, kept) if zp_arg is not None else relax.const(0.0, "float32")
    return data, _float(importer, scale_arg, kept), zp, shape


def _dequantize_blocked(node, importer):
    """``dequantize_per_channel_group`` / ``torchao::dequantize_affine`` of any blocking:
    ``(q - zero_point) * scale`` with each parameter repeated over its block (float ops; a linear's
    weight never gets here when :func:`fused_linear` takes it)."""
    from tvm import relax

    bb = importer.block_builder
    data, scale, zp, shape = _blocked_operands(node, importer)
    out = bb.emit(relax.op.multiply(bb.emit(relax.op.subtract(data, zp)), scale))
    return bb.emit(relax.op.reshape(out, shape))


def _quantize_affine(node, importer):
    """``torchao::quantize_affine``: ``clamp(round(x * (1 / scale)) + zero_point, qmin, qmax)``
    per block (the inverse a float32 division, as torchao computes it)."""
    from tvm import relax

    args = list(node.args) + [None] * 7
    dtype, qmin, qmax = _qrange(node, *args[4:7])
    data, scale, zp, shape = _blocked_operands(node, importer)
    q = _emit_quantize(importer, node, data, scale, zp, qmin, qmax, dtype)
    return importer.block_builder.emit(relax.op.reshape(q, shape))


def _choose_qparams_affine(node, importer):
    """``torchao::choose_qparams_affine`` (the dynamic activations of
    ``Int8DynamicActivationIntxWeightConfig``), per block over ``lo = min(min, 0)``, ``hi =
    max(max, 0)``: ASYMMETRIC :func:`_asymmetric`; SYMMETRIC ``scale = max(max(-lo, hi) / ((qmax -
    qmin) / 2), eps)``, ``zero_point = (qmax + qmin + 1) // 2``. Both float32 in the blocks'
    parameter shape (which the (de)quantize reading them reshape to)."""
    from tvm import relax

    bb = importer.block_builder
    args = list(node.args) + [None] * 9
    x, mapping, block, dtype, qmin, qmax, eps = args[:7]
    if mapping not in ("ASYMMETRIC", "SYMMETRIC"):
        raise UnsupportedError(f"{_where(node)}: mapping type {mapping} is not supported (ASYMMETRIC, SYMMETRIC)")
    _, qmin, qmax = _qrange(node, dtype, qmin, qmax)
    eps = float(np.finfo(np.float32).tiny) if eps is None else float(eps)
    split, _, axes = _blocking(node, _static_shape(importer.env[x]), [int(b) for b in block])
    lo, hi = _range_with_zero(bb, bb.emit(relax.op.reshape(_float(importer, x), split)), axes)
    if mapping == "ASYMMETRIC":
        return bb.emit(relax.Tuple(list(_asymmetric(bb, lo, hi, qmin, qmax, eps))))
    peak = bb.emit(relax.op.maximum(bb.emit(relax.op.negative(lo)), hi))
    scale = bb.emit(relax.op.maximum(bb.emit(relax.op.divide(peak, relax.const((qmax - qmin) / 2.0, "float32"))), relax.const(np.float32(eps))))
    zp = bb.emit(relax.op.full_like(scale, relax.const(float(int((qmax + qmin + 1) / 2)), "float32")))
    return bb.emit(relax.Tuple([scale, zp]))


def _refuse(reason: str) -> Callable:
    def convert(node, importer):
        raise UnsupportedError(f"{_where(node)}: {reason}")

    return convert


#: converters by ``node.target.__name__`` (the importer's custom map)
CONVERTERS: Dict[str, Callable] = {
    "quantize_per_tensor.default": _quantize_per_tensor,
    "quantize_per_tensor.tensor": _quantize_per_tensor,
    "dequantize_per_tensor.default": _dequantize_per_tensor,
    "dequantize_per_tensor.tensor": _dequantize_per_tensor,
    "quantize_per_channel.default": _quantize_per_channel,
    "dequantize_per_channel.default": _dequantize_per_channel,
    "choose_qparams.tensor": _choose_qparams,
    "choose_qparams_per_token_asymmetric.default": _choose_qparams_per_token,
    "quantize_per_token.default": _quantize_per_tensor,
    "dequantize_per_token.default": _dequantize_per_token,
    "dequantize_per_channel_group.default": _dequantize_blocked,
    "linear.default": _linear,
    "mm.default": _mm,
    "dequantize_affine.default": _dequantize_blocked,
    "choose_qparams_symmetric.tensor": _refuse("symmetric dynamic quantization parameters are not supported"),
    "quantize_affine.default": _quantize_affine,
    "choose_qparams_affine.default": _choose_qparams_affine,
}


#: float ops the table takes over to read integer weights (their presence makes no graph quantized)
FLOAT_OPS = ("linear.default", "mm.default")


def is_quantized(exported) -> bool:
    """Whether ``exported``'s graph calls any of the quantized ops this module converts."""
    return any(node.op == "call_function" and _name(node) in CONVERTERS and _name(node) not in FLOAT_OPS for node in exported.graph.nodes)


def converted_here(op_key: str) -> bool:
    """Whether an op of PyTorch's decomposition table (``"torchao.dequantize_affine.default"``) is
    one this module converts, so that it must not be decomposed first."""
    return op_key.split(".", 1)[-1] in CONVERTERS and op_key.split(".", 1)[0] in ("quantized_decomposed", "torchao")
