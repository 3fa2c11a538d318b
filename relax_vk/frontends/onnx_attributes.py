"""ONNX attributes TVM's converters ignore: each read here as onnxruntime reads it, or refused by node.

TVM 0.27's converters drop some attributes without a word, and the model then runs with the wrong
numbers or the wrong output shape:

* ``ConvTranspose``'s ``output_shape`` (the output came out at the pads' shape: ``[3, 3, 11, 18]``
  where onnxruntime gives ``[12, 17]``): turned into the pads ONNX derives from it
  (:func:`conv_transpose_attrs`); a shape that needs negative padding is refused;
* ``Resize``'s ``antialias`` (a linear 2x3x9x11 -> 4x5 downscale 1.29 off, the dynamo exporter's
  ``F.interpolate(..., antialias=True)`` 1.43 off): resampled by the stretched filter onnxruntime
  uses, as two constant matrices (:func:`antialiased_resize`), for static 4-D inputs with half-pixel
  coordinates; other antialiased resizes are refused;
* ``Resize``'s ``keep_aspect_ratio_policy`` other than ``stretch`` (the output took ``sizes`` as
  given): refused;
* ``Resize``'s ``axes`` (opset 18; TVM's converter failed with an internal error): ``scales`` or
  ``sizes`` for the last two axes of a 4-D input are read as the full four
  (:func:`resize_inputs`); other axes are refused;
* ``Pow`` of a float by an integer exponent (TVM's converter failed on the mixed dtypes): the
  exponent is cast to the base's dtype (:func:`convert_pow`);
* ``IsInf``'s ``detect_positive`` / ``detect_negative`` (both infinities were reported whatever
  they said): compared with the infinities they ask for (:func:`convert_isinf`);
* ``LayerNormalization``'s ``Mean`` and ``InvStdDev`` outputs (TVM's converter gave each as the
  scalar 0, which a graph reading them computed on): computed over the normalized axes
  (:func:`convert_layer_norm`);
* ``Dropout``'s ``mask`` (float32 where ONNX has bool): all true, as inference keeps every value
  (:func:`convert_dropout`);
* ``Cast`` of floats to int32 (torch's ``.int()``): TVM wraps the value through int64 modulo
  2**32, which a Vulkan shader (32-bit integers) cannot hold; the value is truncated directly,
  non-finite values to 0 as TVM's (:func:`convert_cast`);
* ``EyeLike`` with a ``dtype`` other than its input's and ``OneHot`` with its depth as a
  one-element tensor (both valid ONNX; TVM's converters refused them), and ``OneHot`` of float
  values (TVM's result was float64): read as ONNX says (:func:`convert_eye_like`,
  :func:`convert_one_hot`);
* ``BatchNormalization`` with ``training_mode=1`` (normalized with the running statistics, which
  it must update instead), ``RoiAlign`` with ``mode="max"`` (onnxruntime's definition of the max
  is not the samples' max), ``Pow`` of integers (TVM: "power only applies to float") and
  ``NonMaxSuppression`` (TVM's build stops inside): refused by node (:func:`refuse_node`).
"""

from __future__ import annotations

from typing import List, Optional

import numpy as np

from ..core.errors import UnsupportedError
from .errors import onnx_node


def _static_shape(x) -> Optional[List[int]]:
    from tvm import tirx

    shape = getattr(getattr(x, "ty", None), "shape", None)
    if shape is None or not hasattr(shape, "values") or not all(isinstance(d, tirx.IntImm) for d in shape.values):
        return None
    return [int(d) for d in shape.values]


def _ints(value) -> List[int]:
    return [int(v) for v in value]


def conv_transpose_attrs(inputs, attrs) -> dict:
    """``attrs`` of a ``ConvTranspose`` with ``output_shape`` replaced by the pads that give it (ONNX:
    ``total = stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1 - output_shape``,
    split as ``auto_pad`` says); ``attrs`` itself when it has none."""
    if "output_shape" not in attrs:
        return attrs
    where = onnx_node(attrs, "ConvTranspose")
    x, w = _static_shape(inputs[0]), _static_shape(inputs[1])
    if x is None or w is None:
        raise UnsupportedError(f"{where}: output_shape with run-time input sizes or weights is not supported")
    spatial = len(x) - 2
    out = _ints(attrs["output_shape"])[-spatial:]
    strides = _ints(attrs.get("strides", [1] * spatial))
    dilations = _ints(attrs.get("dilations", [1] * spatial))
    extra = _ints(attrs.get("output_padding", [0] * spatial))
    kernel = _ints(attrs.get("kernel_shape", w[2:]))
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    begin, end = [], []
    for axis in range(spatial):
        total = strides[axis] * (x[2 + axis] - 1) + extra[axis] + (kernel[axis] - 1) * dilations[axis] + 1 - out[axis]
        if total < 0:
            raise UnsupportedError(f"{where}: output_shape {out} is larger than the transposed conv's full output along axis {2 + axis} "
                                   f"({out[axis] + total}): negative padding is not supported")  # fmt: skip
        small, large = total // 2, total - total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else large)
        end.append(large if auto_pad == "SAME_UPPER" else small)
    rewritten = {k: v for k, v in attrs.items() if k != "output_shape"}
    rewritten["pads"] = begin + end
    rewritten["auto_pad"] = b"NOTSET"
    return rewritten


def _policy(attrs) -> str:
    policy = attrs.get("keep_aspect_ratio_policy", b"stretch")
    return policy.decode() if isinstance(policy, bytes) else str(policy)


def resize_inputs(bb, inputs, attrs) -> list:
    """``Resize``'s inputs with ``axes`` read out (``scales``/``sizes`` for all four axes of a 4-D
    input) and its other attributes TVM ignores refused (module docstring)."""
    from tvm import relax
    from tvm.ir import GenericConst

    where = onnx_node(attrs, "Resize")
    if _policy(attrs) != "stretch":
        raise UnsupportedError(f"{where}: keep_aspect_ratio_policy {_policy(attrs)!r} is not supported (stretch is)")
    if "axes" not in attrs:
        return inputs
    x = inputs[0]
    shape = getattr(getattr(x, "ty", None), "shape", None)
    rank = len(shape.values) if shape is not None and hasattr(shape, "values") else None
    axes = [a + rank if a < 0 else a for a in _ints(attrs["axes"])] if rank else None
    if rank != 4 or sorted(axes) != [2, 3]:
        raise UnsupportedError(f"{where}: axes {_ints(attrs['axes'])} of a rank-{rank} input: the two spatial axes of an NCHW input are supported")
    out = list(inputs) + [None] * (4 - len(inputs))
    order = np.argsort(axes)  # (the values as axes 2 and 3)
    if out[2] is not None and isinstance(out[2], GenericConst) and out[2].value.numpy().size:
        scales = out[2].value.numpy().reshape(-1)[order]
        out[2] = relax.const(np.concatenate([[1.0, 1.0], scales]).astype("float32"))
    elif out[3] is not None and isinstance(out[3], GenericConst):
        static = _static_shape(x)
        if static is None:
            raise UnsupportedError(f"{where}: sizes for axes {axes} of an input of run-time batch or channels is not supported")
        sizes = out[3].value.numpy().reshape(-1)[order]
        out[3] = relax.const(np.array(static[:2] + [int(s) for s in sizes], "int64"))
    else:
        raise UnsupportedError(f"{where}: axes {axes} with scales or sizes computed at run time is not supported")
    return out


def antialiased_resize(bb, inputs, attrs):
    """``Resize`` with ``antialias=1``: None where antialiasing changes nothing (nearest), else the
    resampling as ``Wh @ x @ Ww^T`` with onnxruntime's stretched-filter weights (static 4-D input,
    half-pixel coordinates, scales or sizes constant); anything else refused by node."""
    from tvm import relax
    from tvm.ir import GenericConst

    from .antialias import antialiased_weights

    mode = attrs.get("mode", b"nearest").decode()
    if not int(attrs.get("antialias", 0)) or mode == "nearest":
        return None
    where = onnx_node(attrs, "Resize")
    x = inputs[0]
    shape = _static_shape(x)
    coordinates = attrs.get("coordinate_transformation_mode", b"half_pixel").decode()
    if shape is None or len(shape) != 4 or coordinates not in ("half_pixel", "pytorch_half_pixel") or int(attrs.get("exclude_outside", 0)):
        raise UnsupportedError(f"{where}: antialias with {coordinates} coordinates of a {shape or 'run-time'} input: static 4-D "
                               "inputs with half_pixel coordinates are supported")  # fmt: skip
    scales = inputs[2] if len(inputs) > 2 else None
    sizes = inputs[3] if len(inputs) > 3 else None
    if isinstance(scales, GenericConst) and scales.value.numpy().size:
        factors = [float(s) for s in scales.value.numpy().reshape(-1)]
        out = [int(np.floor(n * f)) for n, f in zip(shape, factors)]
    elif isinstance(sizes, GenericConst):
        out = [int(s) for s in sizes.value.numpy().reshape(-1)]
        factors = [o / n for o, n in zip(out, shape)]
    else:
        raise UnsupportedError(f"{where}: antialias with scales or sizes computed at run time is not supported")
    if out[:2] != shape[:2] or (coordinates == "pytorch_half_pixel" and min(out[2:]) == 1):
        raise UnsupportedError(f"{where}: antialias resizing {shape} to {out}: the two spatial axes of an NCHW input, to sizes above 1, are supported")
    taps, a = (2, None) if mode == "linear" else (4, float(attrs.get("cubic_coeff_a", -0.75)))
    (h, w), (oh, ow) = shape[2:], out[2:]
    rows = relax.const(antialiased_weights(h, oh, taps, 1.0 / factors[2], a, clamp=True))  # [oh, h]
    cols = relax.const(antialiased_weights(w, ow, taps, 1.0 / factors[3], a, clamp=True).T.copy())  # [w, ow]
    y = bb.emit(relax.op.matmul(x, cols))
    return relax.op.matmul(rows, y)


def convert_pow(bb, inputs, attrs):
    """``Pow`` of a float by an integer exponent: the exponent in the base's dtype (None: TVM's
    converter, for matching dtypes)."""
    from tvm import relax

    refuse_node(bb, inputs, attrs, "Pow")
    base, exponent = inputs[0], inputs[1]
    dt = lambda e: str(getattr(getattr(e, "ty", None), "dtype", ""))  # noqa: E731
    if dt(base) == dt(exponent) or not dt(base).startswith(("float", "bfloat")):
        return None
    return relax.op.power(base, bb.normalize(relax.op.astype(exponent, dt(base))))


def convert_isinf(bb, inputs, attrs):
    """``IsInf`` with ``detect_positive`` or ``detect_negative`` 0: equality with the infinities
    asked for (None: both asked for, TVM's converter)."""
    from tvm import relax

    positive, negative = int(attrs.get("detect_positive", 1)), int(attrs.get("detect_negative", 1))
    if positive and negative:
        return None
    x = inputs[0]
    dtype = str(x.ty.dtype)
    found = relax.op.zeros(x.ty.shape, "bool") if not (positive or negative) else None
    for sign, wanted in ((1.0, positive), (-1.0, negative)):
        if wanted:
            found = bb.normalize(relax.op.equal(x, relax.const(sign * np.inf, dtype)))
    return found


def convert_layer_norm(bb, inputs, attrs):
    """``LayerNormalization`` whose ``Mean`` / ``InvStdDev`` outputs the graph names: the normalized
    output as TVM converts it, and the statistics over axes ``axis..rank-1`` (kept as 1s), in
    float32 as ``stash_type`` 1 asks (None: only ``Y`` named, TVM's converter)."""
    from tvm import relax

    if int(attrs.get("tvm_custom", {}).get("num_outputs", 1)) < 2:
        return None
    x, scale = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
    rank = x.ty.ndim
    axis = int(attrs.get("axis", -1)) % rank
    axes = list(range(axis, rank))
    eps = float(attrs.get("epsilon", 1e-5))
    if bias is None:  # (a constant where it can be, as TVM's converter makes it: a zeros op is a kernel of its own)
        shape = _static_shape(scale)
        bias = relax.const(np.zeros(shape, str(scale.ty.dtype))) if shape is not None else relax.op.zeros_like(scale)
    y = bb.normalize(relax.op.nn.layer_norm(x, scale, bias, axes, eps))
    xf = bb.normalize(relax.op.astype(x, "float32")) if str(x.ty.dtype) != "float32" else x
    mean = bb.normalize(relax.op.mean(xf, axes, keepdims=True))
    centred = bb.normalize(relax.op.subtract(xf, mean))
    variance = bb.normalize(relax.op.mean(relax.op.multiply(centred, centred), axes, keepdims=True))
    inv_std = bb.normalize(relax.op.rsqrt(relax.op.add(variance, relax.const(eps, "float32"))))
    return relax.Tuple([y, mean, inv_std])


def convert_dropout(bb, inputs, attrs):
    """``Dropout`` whose ``mask`` the graph names: the data as it is and a mask of trues (None:
    only the output named, TVM's converter)."""
    from tvm import relax

    if int(attrs.get("tvm_custom", {}).get("num_outputs", 1)) < 2:
        return None
    x = inputs[0]
    return relax.Tuple([x, relax.op.ones(x.ty.shape, "bool")])


def convert_cast(bb, inputs, attrs):
    """``Cast`` of a float tensor to int32: non-finite values to 0 (as TVM's converter), the others
    truncated (None: any other cast, TVM's converter)."""
    from tvm import relax

    x = inputs[0]
    src = str(getattr(getattr(x, "ty", None), "dtype", ""))
    to = {6: "int32"}.get(int(attrs.get("to", 0)))  # (uint32: TVM's wrap of negative values, onnxruntime's)
    if to is None or not isinstance(getattr(x, "ty", None), relax.TensorType) or src not in ("float32", "float16"):
        return None
    finite = bb.normalize(relax.op.where(relax.op.isfinite(x), x, relax.const(0.0, src)))
    return relax.op.astype(finite, to)


def refuse_node(bb, inputs, attrs, op: str):
    """The forms of the module docstring that relax_vk refuses, by node (None: the others)."""
    where = onnx_node(attrs, op)
    if op == "BatchNormalization" and int(attrs.get("training_mode", 0)):
        raise UnsupportedError(f"{where}: training_mode=1 (batch statistics, running statistics updated) is not supported; export the model in eval mode")
    if op == "RoiAlign" and attrs.get("mode", b"avg") in (b"max", "max"):
        raise UnsupportedError(f"{where}: mode='max' is not supported (onnxruntime's max is not the samples' max); mode='avg' is")
    if op == "NonMaxSuppression":
        raise UnsupportedError(f"{where}: NonMaxSuppression (a data-dependent number of boxes) is not supported; run it on the host after the model")
    if op == "Pow" and not str(getattr(getattr(inputs[0], "ty", None), "dtype", "float")).startswith(("float", "bfloat")):
        raise UnsupportedError(f"{where}: Pow of {inputs[0].ty.dtype} values is not supported; of floats it is")
    return None


def convert_eye_like(bb, inputs, attrs):
    """``EyeLike`` in its ``dtype`` attribute's type (None: no attribute, TVM's converter). TVM's
    legalization of ``eye_like`` makes the input's dtype whatever its attribute says, so the ones
    and zeros are cast (exact in every dtype)."""
    from onnx import helper
    from tvm import relax

    if "dtype" not in attrs:
        return None
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(int(attrs["dtype"]))).name
    return relax.op.astype(bb.normalize(relax.op.eye_like(inputs[0], int(attrs.get("k", 0)))), dtype)


def convert_one_hot(bb, inputs, attrs):
    """``OneHot`` of a constant depth, a scalar or a one-element tensor (``[5]``; TVM's converter
    takes a scalar): TVM's converter on the scalar, its result in the values' dtype (TVM's is
    float64 for float values); None: any other depth."""
    from tvm import relax
    from tvm.ir import GenericConst
    from tvm.relax.frontend.onnx import onnx_frontend

    depth = inputs[1]
    if not (isinstance(depth, GenericConst) and depth.value.numpy().size == 1 and isinstance(inputs[2], GenericConst)):
        return None
    scalar = relax.const(depth.value.numpy().reshape(()))
    hot = onnx_frontend.OneHot._impl_v11(bb, [inputs[0], scalar, *inputs[2:]], attrs, ({}, {}))  # (graph nodes, params: the values are constants)
    return relax.op.astype(bb.normalize(hot), str(inputs[2].ty.dtype))  # (TVM's prim values of Python floats are float64)
