"""PyTorch front door: ``torch.export``, PyTorch's core-ATen decompositions, then TVM's
``from_exported_program`` with relax_vk's converters for what TVM gets wrong or decomposes badly.

Converters relax_vk adds (each found by the differential fuzzer):

* ``replication_pad2d`` / ``reflection_pad2d`` stay pads (``relax.op.nn.pad`` in ``replicate`` /
  ``reflect`` mode) instead of PyTorch's decomposition into ``arange``/``clamp``/``index`` gathers
  with int64 index tensors: the pad stays one packed op the layout stage keeps in textures;
* ``upsample_nearest2d``: PyTorch's nearest mode is ``src = floor(dst * in / out)``
  (``asymmetric`` + ``floor``); TVM maps it to ``half_pixel`` + ``round``, which picks other rows
  whenever the ratio is not an integer (wrong numbers, no error);
* ``upsample_bilinear2d`` / ``upsample_bicubic2d`` by scale factors: TVM's converter also failed on
  a run-time size, which takes integer scales here;
* every upsample by scale factors (nearest too): PyTorch samples at the given scale (``src = (dst +
  0.5) / scale - 0.5``, nearest ``floor(dst / scale)``) and TVM's resize at the ratio of the sizes,
  which differ where ``in * scale`` is not an integer (7 rows x 1.5: 10 rows, sampled at 1/1.5
  against 7/10; 11 columns x 1.3, nearest: one column picked one off; wrong numbers, no error), so
  such a scale is refused by name (:func:`_output_size`);
* ``_upsample_bilinear2d_aa`` / ``_upsample_bicubic2d_aa`` (``antialias=True``): TVM's converter
  dropped the antialiasing, which changes a downsample (a 2x shrink came out 0.71 off), and had
  none for bicubic; here PyTorch's own weights are two constant matrices (:func:`_upsample_antialiased`);
* ``grid_sampler_2d``: TVM's ``grid_sample`` takes the grid as ``[N, 2, H, W]`` and PyTorch gives
  ``[N, H, W, 2]``; TVM's converter passed it as it is (an output of the wrong shape); here it is
  permuted first;
* ``adaptive_max_pool2d`` (TVM has no converter): a max pool when the input divides evenly, relax_vk's
  adaptive pool otherwise (at a run-time size, over the largest windows the export's range allows).
  Its indices output is not computed (zeros), as TVM does for ``max_pool2d_with_indices``;
* ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` (``aten.lstm.input``, ``gru.input``, ``rnn_tanh.input``,
  ``rnn_relu.input``; TVM unrolls one layer over a fixed length): the recurrence kernels of
  :mod:`relax_vk.frontends.recurrent`, every layer and direction. ``torch.export`` itself unrolls
  these modules over the example's length, so :func:`from_torch` exports each as one
  ``relax_vk::recurrent`` op (:func:`~relax_vk.frontends.recurrent.exportable_recurrent_layers`)
  and the sequence length can be a ``Dim``;
* ``amax`` / ``amin`` (TVM has no converter; PyTorch keeps them at run-time sizes): ``max`` /
  ``min`` reductions;
* ``add`` / ``sub`` / ``mul`` / ``div`` of a tensor and a run-time size (``x.sum(1) / x.shape[1]``;
  TVM's binary ops refused the int64 size against the tensor): one elementwise kernel taking the
  size's dims as scalar arguments (:func:`_with_sizes`); any other call is TVM's converter's;
* ``im2col`` / ``col2im`` (``F.unfold`` / ``F.fold``; PyTorch decomposes them into ``arange``
  index gathers that TVM's ``index_tensor`` cannot broadcast): one gather kernel after a pad, and a
  sum over the windows covering each output pixel (:func:`_im2col`, :func:`_col2im`);
* ``var`` / ``std`` / ``var_mean`` with a correction (``var_mean``: TVM has no converter; its
  ``var`` and ``std`` need the reduced sizes static): the population variance scaled by ``n / (n -
  correction)`` in a kernel, so ``n`` may be a run-time size (:func:`_variance`);
* ``slice.Tensor`` of a run-time size within the smallest size the export allows (``x[:, :1]``):
  in bounds, so of exact length (:func:`_slice`); a model whose run-time shapes TVM's importer
  still loses is refused naming the op (:func:`~relax_vk.frontends.errors.first_lost_shape`);
* ``elu`` with its ``scale`` and ``input_scale`` (``nn.SELU``, ``nn.CELU``), ``avg_pool2d`` with
  ``divisor_override``, ``add`` / ``sub`` / ``mul`` / ``div`` whose result PyTorch promotes from an
  integer tensor to float (``i * 0.5``, ``i / 3``): TVM's converters dropped the scale and the
  override and computed in the integer dtype, with no error; ``max_pool2d_with_indices`` whose
  indices the model reads is refused (TVM gives them as zeros);
* ``max.dim`` / ``min.dim`` (``x.max(dim)``, values and indices): TVM converts them to
  ``relax.op.topk``, which no relax_vk (or TVM GPU) pipeline lowers (an internal error at VM
  code generation); here they are a ``max``/``min`` reduction and an ``argmax``/``argmin`` (dropped
  when the indices are unused, as they usually are).

Half-precision models (float16/bfloat16 parameters or inputs; TVM's frontend mixes float32 conv
outputs with float16 biases and fails) are imported as their float32 copy with the float16
signature kept: inputs are cast up and outputs down at the edges, so the computation is float32.
An op TVM cannot convert (a ``torch.library`` custom op, an unsupported ATen op) is an
:class:`~relax_vk.core.errors.UnsupportedError` naming the op and the node that calls it.
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Sequence

import tvm
import tvm_ffi
from tvm import relax, tirx

from ..core.dims import bind_multiples
from ..core.errors import UnsupportedError
from ..core.extras import require
from ..core.provenance import record_model_ops
from .antialias import antialiased_weights
from .errors import ModelLoadError, first_lost_shape, refuse_fixed_reshapes
from .open_slices import exact_open_slices
from .resize_picks import check_nearest_picks
from .size_tensors import sized_elementwise, take_at_size
from .torch_quant import CONVERTERS as QUANTIZED

#: ATen ops relax_vk converts itself, so PyTorch must not decompose them first
KEEP = ("aten.replication_pad2d.default", "aten.reflection_pad2d.default", "aten.upsample_nearest2d.default", "aten.upsample_nearest2d.vec",
        "aten.upsample_bilinear2d.default", "aten.upsample_bilinear2d.vec", "aten.upsample_bicubic2d.default", "aten.upsample_bicubic2d.vec",
        "aten.lstm.input", "aten.gru.input", "aten.rnn_tanh.input", "aten.rnn_relu.input", "aten.im2col.default", "aten.col2im.default",
        "aten.pad.default")  # fmt: skip


def _pad_width(pads: Sequence[int], ndim: int) -> list:
    """Relax's pad width (a before/after pair per axis, first axis first) of PyTorch's ``pads``
    (pairs from the last axis back)."""
    width = [0] * (2 * ndim)
    for i in range(len(pads) // 2):
        axis = ndim - 1 - i
        width[2 * axis], width[2 * axis + 1] = pads[2 * i], pads[2 * i + 1]
    return width


def _pad_converter(mode: str):
    def convert(node, importer) -> relax.Var:
        x = importer.env[node.args[0]]
        width = _pad_width([int(p) for p in node.args[1]], x.ty.ndim)
        return importer.block_builder.emit(relax.op.nn.pad(x, width, mode, 0.0))

    return convert


def _pad(node, importer) -> relax.Var:
    """``aten.pad`` (``F.pad``) in any of its modes: Relax's pad, which keeps run-time sizes
    (PyTorch decomposes a circular pad into slice scatters at offsets computed from the size,
    which TVM's converter cannot take). The pads run from the last axis back, a pair an axis."""
    x = importer.env[node.args[0]]
    pads = [int(p) for p in node.args[1]]
    mode = node.args[2] if len(node.args) > 2 else node.kwargs.get("mode", "constant")
    value = node.args[3] if len(node.args) > 3 else node.kwargs.get("value", None)
    if mode not in ("constant", "reflect", "replicate", "circular") or len(pads) % 2 or len(pads) > 2 * x.ty.ndim:
        raise UnsupportedError(f"pad (node {node.name}): mode {mode!r} with pads {pads} of a rank-{x.ty.ndim} tensor is not supported")
    if mode != "constant" and any(p < 0 for p in pads):
        raise UnsupportedError(f"pad (node {node.name}): negative pads {pads} in mode {mode!r} are not supported")
    return importer.block_builder.emit(relax.op.nn.pad(x, _pad_width(pads, x.ty.ndim), mode, 0.0 if value is None else float(value)))


def _nearest_rows_agree(size: int, scale: float) -> bool:
    """Whether nearest resizing of ``size`` rows by ``scale`` picks the same rows at PyTorch's
    ``floor(dst * (1 / scale))`` as at relax_vk's ``floor(dst * in / out)``, both in float32 as the
    two compute them."""
    import numpy as np

    out = int(size * float(scale))
    dst = np.arange(out, dtype=np.float32)
    pytorch = np.minimum(np.floor(dst * np.float32(1.0 / float(scale))), size - 1)
    ours = np.minimum(np.floor(dst * (np.float32(size) / np.float32(out))), size - 1)
    return bool(np.array_equal(pytorch, ours))


def _output_size(node, x, scales_at: int, op: str, align_corners: bool = False, nearest: bool = False, importer=None) -> list:
    """The output size of PyTorch's upsample ``node`` of ``x``: its ``output_size``, else ``floor(in
    * scale)`` where relax_vk's resize then samples where PyTorch does (module docstring): a static
    size whose product is an integer (any product with ``align_corners``, which reads only the
    sizes; for ``nearest``, any whose rows agree, :func:`_nearest_rows_agree`), a run-time size
    times an integer. The scales are at ``node.args[scales_at]`` (``.vec``: a list) or there and
    after (``.default``: ``scales_h``, ``scales_w``). An ``output_size`` of run-time sizes
    (``F.interpolate(y, size=x.shape[2:])``) is those sizes' expressions (a nearest one is checked
    at every size of the dims' ranges after import: :mod:`relax_vk.frontends.resize_picks`)."""
    from tvm import tirx

    size = node.args[1] if len(node.args) > 1 else node.kwargs.get("output_size", node.kwargs.get("size"))
    if size:
        return [int(s) if isinstance(s, int) else importer.env[s] for s in size]
    if len(node.args) > scales_at + 1 or "scales_h" in node.kwargs:  # (the .default overload)
        scales = [node.args[i] if len(node.args) > i else node.kwargs.get(k) for i, k in ((scales_at, "scales_h"), (scales_at + 1, "scales_w"))]
    else:
        scales = node.args[scales_at] if len(node.args) > scales_at else node.kwargs.get("scale_factors", node.kwargs.get("scale_factor"))
    if isinstance(scales, (int, float)):
        scales = [scales, scales]
    out = []
    for d, scale in zip(x.ty.shape.values[2:], scales):
        if isinstance(d, tirx.IntImm):
            exact = float(scale) * int(d)
            if not (align_corners or exact.is_integer() or (nearest and _nearest_rows_agree(int(d), float(scale)))):
                raise UnsupportedError(f"{op} (node {node.name}): scale {scale} of {int(d)} x {float(scale)} = {exact}: PyTorch samples at the scale, "
                                       "relax_vk's resize at the ratio of the sizes; give the output size, or recompute_scale_factor=True")  # fmt: skip
            out.append(int(exact))
        elif float(scale).is_integer():
            out.append(d * int(scale))
        else:
            raise UnsupportedError(f"{op} (node {node.name}): scale {scale} of the run-time size {d}: integer scales only (PyTorch samples at the "
                                   "scale, relax_vk's resize at the ratio of the sizes, which differ for sizes the scale does not divide)")  # fmt: skip
    return out


def _upsample_nearest(node, importer) -> relax.Var:
    x = importer.env[node.args[0]]
    size = _output_size(node, x, 2, "upsample_nearest2d", nearest=True, importer=importer)
    return importer.block_builder.emit(
        relax.op.image.resize2d(
            x, size, layout="NCHW", method="nearest_neighbor",
            coordinate_transformation_mode="asymmetric", rounding_method="floor",
        )
    )  # fmt: skip


def _resize(importer, x, size, method: str, align_corners: bool) -> relax.Var:
    """PyTorch's ``linear`` / ``cubic`` resize of ``x`` to ``size``: TVM's with ``align_corners`` or
    ``half_pixel`` coordinates."""
    mode = "align_corners" if align_corners else "half_pixel"
    return importer.block_builder.emit(relax.op.image.resize2d(x, size, layout="NCHW", method=method, coordinate_transformation_mode=mode))


def _upsample_sampled(op: str, method: str):
    """``upsample_bilinear2d`` / ``upsample_bicubic2d`` (module docstring), to :func:`_output_size`."""

    def convert(node, importer) -> relax.Var:
        x = importer.env[node.args[0]]
        align_corners = bool(node.args[2] if len(node.args) > 2 else node.kwargs.get("align_corners", False))
        return _resize(importer, x, _output_size(node, x, 3, op, align_corners, importer=importer), method, align_corners)

    return convert


def _upsample_antialiased(op: str, taps: int):
    """``_upsample_bilinear2d_aa`` / ``_upsample_bicubic2d_aa`` (``antialias=True``; TVM's converter
    dropped the filter, and had none for bicubic): PyTorch's weights (:func:`.antialias.antialiased_weights`)
    as two constant matrices, ``Wh @ x @ Ww^T``. Static sizes and ``align_corners=False``."""

    def convert(node, importer) -> relax.Var:
        from tvm import tirx

        bb = importer.block_builder
        x = importer.env[node.args[0]]
        given = [int(d) if isinstance(d, tirx.IntImm) else None for d in x.ty.shape.values[2:]]
        align_corners = bool(node.args[2] if len(node.args) > 2 else node.kwargs.get("align_corners", False))
        if None in given or align_corners:
            raise UnsupportedError(f"{op} (node {node.name}): antialiased resize of {given}"
                                   f"{' with align_corners' if align_corners else ''}: static sizes and align_corners=False only")  # fmt: skip
        size = node.args[1] if len(node.args) > 1 else node.kwargs.get("output_size")
        if len(node.args) > 4 or "scales_h" in node.kwargs:  # (.default: scales_h, scales_w)
            scales = [node.args[i] if len(node.args) > i else node.kwargs.get(k) for i, k in ((3, "scales_h"), (4, "scales_w"))]
        else:  # (.vec: scale_factors)
            scales = node.args[3] if len(node.args) > 3 else node.kwargs.get("scale_factors")
            scales = list(scales) if scales else [None, None]
        if not size:
            size = [int(n * float(f)) for n, f in zip(given, scales)]
        out = [int(v) for v in size]
        # PyTorch's scale: the given factor's inverse, else the ratio of the sizes
        ratios = [1.0 / float(f) if f else n / o for n, o, f in zip(given, out, scales)]
        (h, w), (oh, ow) = given, out
        rows = relax.const(antialiased_weights(h, oh, taps, ratios[0]))  # [oh, h]
        cols = relax.const(antialiased_weights(w, ow, taps, ratios[1]).T.copy())  # [w, ow]
        y = bb.emit(relax.op.matmul(x, cols))  # [n, c, h, ow]
        return bb.emit(relax.op.matmul(rows, y))  # [n, c, oh, ow]

    return convert


def _grid_sampler(node, importer) -> relax.Var:
    """``grid_sampler_2d`` with PyTorch's ``[N, H, W, 2]`` grid as TVM's ``[N, 2, H, W]``."""
    bb = importer.block_builder
    x, grid = importer.env[node.args[0]], importer.env[node.args[1]]
    interp, pad, align_corners = (list(node.args[2:5]) + [0, 0, False][len(node.args[2:5]) :])[:3]
    methods, pads = {0: "bilinear", 1: "nearest", 2: "bicubic"}, {0: "zeros", 1: "border", 2: "reflection"}
    return bb.emit(relax.op.image.grid_sample(x, bb.emit(relax.op.permute_dims(grid, [0, 3, 1, 2])), method=methods[int(interp)], layout="NCHW",
                                              padding_mode=pads[int(pad)], align_corners=bool(align_corners)))  # fmt: skip


def _extreme(largest: bool):
    """``amax`` / ``amin``: the ``max`` / ``min`` reduction over the dims (all when none are given)."""

    def convert(node, importer) -> relax.Var:
        x = importer.env[node.args[0]]
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", [])
        keep = bool(node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False))
        axes = [int(d) for d in dims] if dims else None
        reduce = relax.op.max if largest else relax.op.min
        return importer.block_builder.emit(reduce(x, axes, keep))

    return convert


def _size_bound(arg, axis: int, largest: bool = True):
    """The largest (or smallest) value the export allows for ``arg``'s size along ``axis`` (None:
    unbounded, or unknown)."""
    value = getattr(arg, "meta", {}).get("val")
    return None if value is None else _sym_bound(value.shape[axis], largest)


def _value_bound(value, largest: bool = True):
    """The largest (or smallest) value the export allows for the run-time size ``value`` (an fx
    node of a SymInt, or an int); None when unbounded or unknown."""
    return value if isinstance(value, int) else _sym_bound(getattr(value, "meta", {}).get("val"), largest)


def _sym_bound(size, largest: bool):
    """The largest (or smallest) value of ``size`` (an int, or a SymInt of the export's shape
    environment); None when unbounded or unknown."""
    if isinstance(size, int):
        return size
    if size is None or not hasattr(size, "node"):
        return None
    bounds = size.node.shape_env.bound_sympy(size.node.expr)
    bound = bounds.upper if largest else bounds.lower
    return int(bound) if bound.is_finite else None


def _tvm_converter(importer, name: str, node):
    """TVM's own converter of ``name`` run on ``node`` (for calls a relax_vk converter of the same
    op leaves to it; the importer's table holds relax_vk's in its place)."""
    if not hasattr(importer, "_relax_vk_tvm_map"):
        importer._relax_vk_tvm_map = importer.create_convert_map()
    return importer._relax_vk_tvm_map[name](node)


def _fixed_output_size(node, op: str) -> list:
    """An adaptive pool's output size, refused by node where it is a run-time size
    (``(x.shape[2] // 2, ...)``: TVM's pools take fixed output sizes)."""
    sizes = list(node.args[1]) if isinstance(node.args[1], (list, tuple)) else [node.args[1]]
    if not all(isinstance(s, int) for s in sizes):
        raise UnsupportedError(f"{op} (node {node.name}): an output size computed from run-time sizes is not supported; a fixed output size, "
                               "or a pool with a fixed window (avg_pool2d / max_pool2d), is")  # fmt: skip
    return sizes


def _adaptive_avg_pool(name: str):
    """``adaptive_avg_pool2d`` / ``_adaptive_avg_pool2d`` (TVM's converter) with its output size
    checked fixed."""

    def convert(node, importer) -> relax.Var:
        _fixed_output_size(node, "adaptive_avg_pool2d")
        return _tvm_converter(importer, name, node)

    return convert


def _adaptive_max_pool(node, importer) -> relax.Var:
    from ..legalize.adaptive_pool import adaptive_pool

    x = importer.env[node.args[0]]
    out_h, out_w = _fixed_output_size(node, "adaptive_max_pool2d")
    _, _, h, w = (int(d) if isinstance(d, tirx.IntImm) else None for d in x.ty.shape.values)
    bb = importer.block_builder
    if h is None or w is None:  # a run-time size: the largest windows its export range allows
        bounds = [_size_bound(node.args[0], axis) for axis in (2, 3)]
        if None in bounds:
            raise UnsupportedError(f"adaptive_max_pool2d (node {node.name}): an input of run-time size {list(x.ty.shape.values)} "
                                   "with no upper bound")  # fmt: skip
        values = bb.emit_te(adaptive_pool, x, (out_h, out_w), "max", "NCHW", bounds, primfunc_name_hint="adaptive_max_pool2d")
    elif h % out_h == 0 and w % out_w == 0:
        kernel = (h // out_h, w // out_w)
        values = bb.emit(relax.op.nn.max_pool2d(x, kernel, kernel, layout="NCHW"))
    else:  # uneven windows: relax_vk's adaptive pool (TOPI's nested windows fit no schedule)
        values = bb.emit_te(adaptive_pool, x, (out_h, out_w), "max", primfunc_name_hint="adaptive_max_pool2d")
    indices = bb.emit(relax.op.zeros(values.ty.shape, "int64"))
    return bb.emit(relax.Tuple([values, indices]))


def _reduce_dim(largest: bool):
    def convert(node, importer) -> tuple:
        x = importer.env[node.args[0]]
        dim = int(node.args[1]) if len(node.args) > 1 else int(node.kwargs.get("dim", 0))
        keepdim = bool(node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False))
        bb = importer.block_builder
        reduce, arg = (relax.op.max, relax.op.argmax) if largest else (relax.op.min, relax.op.argmin)
        values = bb.emit(reduce(x, axis=[dim], keepdims=keepdim))
        indices = bb.emit(arg(x, axis=dim, keepdims=keepdim))  # (int64, as PyTorch)
        return (values, indices)  # (not a Relax tuple: unused indices are then dead code)

    return convert


def _variance(kind: str):
    """``var.correction``, ``std.correction`` and ``var_mean.correction`` (``(var, mean)``; TVM has
    no converter): the population variance times ``n / (n - correction)``, ``n`` the elements
    reduced. TVM's own ``var`` / ``std`` need ``n`` static; here a run-time ``n`` (a mean over a
    map of run-time height and width) scales inside a kernel. ``n <= correction`` gives NaN, as
    PyTorch does."""
    from tvm import te

    def convert(node, importer):
        bb = importer.block_builder
        x = importer.env[node.args[0]]
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        keep = bool(node.kwargs.get("keepdim", False))
        correction = node.kwargs.get("correction")
        correction = 1 if correction is None else correction
        ndim = x.ty.ndim
        axes = sorted({int(d) % ndim for d in dim}) if dim else list(range(ndim))
        var = bb.emit(relax.op.variance(x, axes, keepdims=keep))
        if correction:
            dtype = str(x.ty.dtype)

            def scale(v, data):  # (data: whose shape names the sizes; the kernel does not read it)
                sizes = [data.shape[a] for a in axes]
                if all(isinstance(d, tirx.IntImm) for d in sizes):
                    n = math.prod(int(d) for d in sizes)
                    ratio = tirx.const(n / (n - correction) if n > correction else float("nan"), dtype)
                else:
                    n = tirx.const(1, "int64")
                    for d in sizes:
                        n = n * tirx.Cast("int64", d)
                    ratio = tirx.Select(n > correction, tirx.Cast(dtype, n) / tirx.Cast(dtype, n - correction), tirx.const(float("nan"), dtype))
                return te.compute(v.shape, lambda *i: v(*i) * ratio, name="var_correction")

            var = bb.emit_te(scale, var, x, primfunc_name_hint="var_correction")
        if kind == "std":
            return bb.emit(relax.op.sqrt(var))
        if kind == "var_mean":
            return (var, bb.emit(relax.op.mean(x, axes, keepdims=keep)))
        return var

    return convert


def _pairs(node, first: int, names: Sequence[str], defaults: Sequence) -> list:
    """``node``'s int-pair arguments from position ``first`` on (or its keywords), each as ``(a, b)``."""
    out = []
    for k, (name, default) in enumerate(zip(names, defaults)):
        v = node.args[first + k] if len(node.args) > first + k else node.kwargs.get(name, default)
        v = [int(t) for t in (v if isinstance(v, (list, tuple)) else [v, v])]
        out.append((v[0], v[-1]))
    return out


def _im2col(node, importer) -> relax.Var:
    """``im2col`` (``F.unfold``, ``nn.Unfold``: PyTorch decomposes it into ``arange`` index
    gathers TVM's ``index_tensor`` cannot broadcast): ``[N, C, H, W]`` -> ``[N, C * kh * kw, L]``,
    row ``c * kh * kw + i * kw + j`` holding the input at ``(i * dh + oy * sh - ph, j * dw + ox * sw
    - pw)`` (zero in the padding) for ``l = oy * ow + ox``: one gather kernel. Sizes may be static
    or run-time dims; a run-time size that is a multiple of a dim (``4 * s``) is refused by name."""
    from tvm import te
    from tvm.sym import Analyzer

    bb = importer.block_builder
    x = importer.env[node.args[0]]
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _pairs(node, 1, ("kernel_size", "dilation", "padding", "stride"), (None, 1, 0, 1))
    if x.ty.ndim != 4:
        raise UnsupportedError(f"im2col (node {node.name}): a [N, C, H, W] input, not rank {x.ty.ndim}")
    h, w = x.ty.shape.values[2:]
    if not all(isinstance(d, (tirx.IntImm, tirx.Var)) for d in (h, w)):
        raise UnsupportedError(f"im2col (node {node.name}): an input of run-time size {[h, w]}: unfold takes static sizes or plain "
                               "run-time dims, not multiples of one (declare the dim itself, without a multiple)")  # fmt: skip
    simplify = Analyzer().simplify
    oh = simplify(tirx.floordiv(h + 2 * ph - (dh * (kh - 1) + 1), sh) + 1)
    ow = simplify(tirx.floordiv(w + 2 * pw - (dw * (kw - 1) + 1), sw) + 1)
    taps = kh * kw

    def gather(v):
        H, W = v.shape[2], v.shape[3]

        def value(b, r, l):
            ch, t = tirx.floordiv(r, taps), tirx.floormod(r, taps)
            y = tirx.floordiv(t, kw) * dh + tirx.floordiv(l, ow) * sh - ph
            x_ = tirx.floormod(t, kw) * dw + tirx.floormod(l, ow) * sw - pw
            if not (ph or pw):
                return v[b, ch, y, x_]
            inside = tirx.all(y >= 0, y < H, x_ >= 0, x_ < W)
            got = v[b, ch, tirx.max(tirx.min(y, H - 1), 0), tirx.max(tirx.min(x_, W - 1), 0)]
            return tirx.Select(inside, got, tirx.const(0, v.dtype))

        return te.compute((v.shape[0], v.shape[1] * taps, oh * ow), value, name="im2col")

    return bb.emit_te(gather, x, primfunc_name_hint="im2col")


def _col2im(node, importer) -> relax.Var:
    """``col2im`` (``F.fold``, ``nn.Fold``): each output pixel sums the columns whose windows
    cover it, ``kh * kw`` terms at most (the inverse placement of :func:`_im2col`, overlapping
    windows added), then the padding is cropped."""
    from tvm import te

    bb = importer.block_builder
    cols = importer.env[node.args[0]]
    size = node.args[1] if len(node.args) > 1 else node.kwargs["output_size"]
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _pairs(node, 2, ("kernel_size", "dilation", "padding", "stride"), (None, 1, 0, 1))
    if cols.ty.ndim != 3 or not all(isinstance(v, int) for v in size):
        raise UnsupportedError(f"col2im (node {node.name}): columns [N, C * kh * kw, L] folded to a constant size, not {list(size)} of rank {cols.ty.ndim}")
    H, W = (int(v) for v in size)
    oh, ow = (H + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1, (W + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
    n, rows, L = cols.ty.shape.values
    if not (isinstance(rows, tirx.IntImm) and int(rows) % (kh * kw) == 0) or (isinstance(L, tirx.IntImm) and int(L) != oh * ow):
        raise UnsupportedError(f"col2im (node {node.name}): columns {list(cols.ty.shape.values)} are not C * {kh * kw} rows of {oh * ow} windows")
    channels = int(rows) // (kh * kw)

    def place(c):
        i, j = te.reduce_axis((0, kh), name="i"), te.reduce_axis((0, kw), name="j")

        def value(b, ch, y, x):
            yy, xx = y + ph - i * dh, x + pw - j * dw
            oy, ox = tirx.floordiv(yy, sh), tirx.floordiv(xx, sw)
            hit = tirx.all(yy >= 0, xx >= 0, tirx.floormod(yy, sh) == 0, tirx.floormod(xx, sw) == 0, oy < oh, ox < ow)
            safe_y, safe_x = tirx.max(tirx.min(oy, oh - 1), 0), tirx.max(tirx.min(ox, ow - 1), 0)
            term = c[b, ch * (kh * kw) + i * kw + j, safe_y * ow + safe_x]
            return te.sum(tirx.Select(hit, term, tirx.const(0, c.dtype)), axis=[i, j])

        return te.compute((c.shape[0], channels, H, W), value, name="col2im")

    return bb.emit_te(place, cols, primfunc_name_hint="col2im")


def _is_size(value) -> bool:
    """Whether ``value`` is a run-time size (a symbolic integer expression, not a constant)."""
    import tvm

    return tvm.ir.is_prim_expr(value) and not isinstance(value, (tirx.IntImm, tirx.FloatImm)) and not isinstance(value.ty, relax.TensorType)


def _elu(node, importer):
    """``elu`` with its ``scale`` and ``input_scale`` (``nn.SELU`` is ``elu(x, 1.6733, 1.0507)``):
    ``scale * (x > 0 ? x : alpha * (exp(input_scale * x) - 1))``. TVM's converter dropped both
    scales (SELU's outputs came out 0.95 of PyTorch's)."""
    args = importer.retrieve_args(node)
    x = args[0]
    alpha, scale, input_scale = (list(args[1:]) + [1.0] * 3)[:3]
    alpha, scale = node.kwargs.get("alpha", alpha), node.kwargs.get("scale", scale)
    input_scale = node.kwargs.get("input_scale", input_scale)
    bb, R, dtype = importer.block_builder, relax.op, str(x.ty.dtype)
    c = lambda v: relax.const(float(v), dtype)  # noqa: E731
    scaled = bb.emit(R.multiply(x, c(input_scale))) if float(input_scale) != 1.0 else x
    negative = bb.emit(R.multiply(c(alpha), bb.emit(R.subtract(bb.emit(R.exp(scaled)), c(1.0)))))
    out = bb.emit(R.where(bb.emit(R.greater(x, c(0.0))), x, negative))
    return bb.emit(R.multiply(out, c(scale))) if float(scale) != 1.0 else out


def _max_pool_with_indices(node, importer):
    """``max_pool2d_with_indices``: its pooled values (TVM's converter); its indices, which TVM's
    converter gives as zeros, refused by node where the model reads them (``return_indices=True``
    then ``MaxUnpool2d``, say)."""
    import operator

    if any(u.target is operator.getitem and len(u.args) > 1 and u.args[1] == 1 for u in node.users):
        raise UnsupportedError(f"max_pool2d_with_indices (node {node.name}): its indices output (return_indices=True) is not supported")
    return _tvm_converter(importer, "max_pool2d_with_indices.default", node)


def _avg_pool(node, importer):
    """``avg_pool2d`` with ``divisor_override`` (TVM's converter ignored it: a 2x2 window divided
    by 4 where the model says 3): the window sums (a mean counting the padding) times the window's
    size over the divisor; without a ceil-mode window past the input. Any other call is TVM's."""
    args = list(node.args) + [None] * (7 - len(node.args))
    divisor = node.kwargs.get("divisor_override", args[6])
    if divisor is None:
        return _tvm_converter(importer, "avg_pool2d.default", node)
    x = importer.env[node.args[0]]
    kernel = [int(k) for k in args[1]] * (2 // len(args[1]))
    stride = [int(v) for v in (args[2] or kernel)] * (2 // len(args[2] or kernel))
    padding = [int(v) for v in (args[3] or [0, 0])] * (2 // len(args[3] or [0, 0]))
    if bool(node.kwargs.get("ceil_mode", args[4] or False)):
        raise UnsupportedError(f"avg_pool2d (node {node.name}): divisor_override with ceil_mode is not supported")
    bb = importer.block_builder
    mean = bb.emit(relax.op.nn.avg_pool2d(x, kernel, stride, padding, count_include_pad=True))
    return bb.emit(relax.op.multiply(mean, relax.const(kernel[0] * kernel[1] / float(divisor), str(x.ty.dtype))))


def _unit_affine(bb, weight, bias, shape, dtype: str):
    """A norm's ``(weight, bias)``, a missing one as ones / zeros of ``shape`` (constants where the
    shape is static, else computed at the run's sizes)."""
    import numpy as np

    def filled(value, fill):
        if value is not None:
            return value
        if all(isinstance(d, (int, tirx.IntImm)) for d in shape):
            return relax.const(np.full([int(d) for d in shape], fill, dtype))
        return bb.emit((relax.op.ones if fill else relax.op.zeros)(relax.ShapeExpr(shape), dtype))

    return filled(weight, 1), filled(bias, 0)


def _group_norm(node, importer):
    """``native_group_norm`` of ``nn.GroupNorm(affine=False)``: its missing weight and bias as ones
    and zeros (TVM's converter passed None on and failed inside TVM: "Found null pointer node")."""
    args = importer.retrieve_args(node)
    if args[1] is not None and args[2] is not None:
        return _tvm_converter(importer, "native_group_norm.default", node)
    x, bb = args[0], importer.block_builder
    gamma, beta = _unit_affine(bb, args[1], args[2], [int(args[4])], str(x.ty.dtype))
    return bb.emit(relax.op.nn.group_norm(x, gamma, beta, num_groups=int(args[6]), channel_axis=1, axes=list(range(2, x.ty.ndim)),
                                          epsilon=float(args[7])))  # fmt: skip


def _div_rounded(node, importer):
    """``div.Tensor_mode`` of integer tensors (``i // 3``, ``torch.div(i, 3, rounding_mode="trunc")``):
    a scalar divisor in the tensor's dtype (TVM's converter made it int32 beside an int64 tensor,
    and its binary op refused the pair); ``floor`` is a floor division, ``trunc`` one corrected
    toward zero where the remainder is not zero and the signs differ. Float tensors: TVM's."""
    args = importer.retrieve_args(node)
    a, b = args[0], args[1]
    mode = node.kwargs.get("rounding_mode", args[2] if len(args) > 2 else None)
    tensors = [v for v in (a, b) if isinstance(getattr(v, "ty", None), relax.TensorType)]
    dtype = str(tensors[0].ty.dtype) if tensors else ""
    if mode not in ("floor", "trunc") or not dtype.startswith(("int", "uint")) or any(str(t.ty.dtype) != dtype for t in tensors):
        return _tvm_converter(importer, "div.Tensor_mode", node)
    if not all(isinstance(getattr(v, "ty", None), relax.TensorType) or isinstance(v, int) for v in (a, b)):
        return _tvm_converter(importer, "div.Tensor_mode", node)
    bb, R = importer.block_builder, relax.op
    a, b = [v if isinstance(getattr(v, "ty", None), relax.TensorType) else relax.const(int(v), dtype) for v in (a, b)]
    quotient = bb.emit(R.floor_divide(a, b))
    if mode == "floor":
        return quotient
    zero = relax.const(0, dtype)
    remainder = bb.emit(R.subtract(a, bb.emit(R.multiply(quotient, b))))
    toward_zero = bb.emit(R.logical_and(bb.emit(R.not_equal(remainder, zero)), bb.emit(R.not_equal(bb.emit(R.less(a, zero)), bb.emit(R.less(b, zero))))))
    return bb.emit(R.where(toward_zero, bb.emit(R.add(quotient, relax.const(1, dtype))), quotient))


def _layer_norm(node, importer):
    """``native_layer_norm`` over run-time sizes (``F.layer_norm(x, x.shape[1:])``) or without a
    weight or bias: the normalized axes are the last ``len(normalized_shape)``, the missing weight
    and bias ones and zeros of the input's own trailing dims (TVM's converter took ``int()`` of a
    run-time size: a TypeError). A static call with both is TVM's converter's."""
    args = list(importer.retrieve_args(node)) + [None] * 5
    x, shape, weight, bias, eps = args[0], list(args[1]), args[2], args[3], args[4]
    if all(isinstance(d, int) for d in shape) and weight is not None and bias is not None:
        return _tvm_converter(importer, "native_layer_norm.default", node)
    bb, ndim = importer.block_builder, x.ty.ndim
    gamma, beta = _unit_affine(bb, weight, bias, list(x.ty.shape.values[ndim - len(shape) :]), str(x.ty.dtype))
    axes = list(range(ndim - len(shape), ndim))
    return bb.emit(relax.op.nn.layer_norm(x, gamma, beta, axes, 1e-5 if eps is None else float(eps)))


def _index_put(node, importer) -> relax.Var:
    """``y[mask] = v`` (``index_put`` with one bool mask over the leading axes and one value, or
    values broadcast to ``y``): ``where(mask, v, y)``, or ``y + where(mask, v, 0)`` with
    ``accumulate``. TVM's converter takes only integer index tensors. Anything else is TVM's."""
    indices = node.args[1] if len(node.args) > 1 else []
    masks = [i for i in indices if i is not None]
    mask_val = masks[0].meta.get("val") if len(masks) == 1 and hasattr(masks[0], "meta") else None
    values_val = node.args[2].meta.get("val") if len(node.args) > 2 and hasattr(node.args[2], "meta") else None
    if not (len(indices) == 1 and mask_val is not None and str(mask_val.dtype) == "torch.bool" and values_val is not None
            and values_val.numel() == 1):  # fmt: skip
        return _tvm_converter(importer, "index_put.default", node)
    bb = importer.block_builder
    data, mask, values = importer.env[node.args[0]], importer.env[masks[0]], importer.env[node.args[2]]
    ndim, mask_ndim = data.ty.ndim, mask.ty.ndim
    if mask_ndim < ndim:  # (a mask over the leading axes selects whole trailing slices)
        mask = bb.emit(relax.op.reshape(mask, [*mask.ty.shape.values, *([1] * (ndim - mask_ndim))]))
    values = bb.emit(relax.op.reshape(values, [])) if values.ty.ndim else values
    if str(values.ty.dtype) != str(data.ty.dtype):
        values = bb.emit(relax.op.astype(values, str(data.ty.dtype)))
    accumulate = bool(node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False))
    if accumulate:
        zero = relax.const(0, str(data.ty.dtype))
        return bb.emit(relax.op.add(data, bb.emit(relax.op.where(mask, values, zero))))
    return bb.emit(relax.op.where(mask, values, data))


def _accumulate(op: str):
    """``cumsum`` / ``cumprod`` / ``prod`` in the dtype PyTorch gives the result: an integer or bool
    input accumulates in int64 (``i32.cumsum(1)`` is int64 in PyTorch; TVM's converter kept int32,
    and had no ``prod.dim_int``). The input is cast first, so sums past int32 stay exact."""

    def convert(node, importer) -> relax.Var:
        bb = importer.block_builder
        x = importer.env[node.args[0]]
        val = node.meta.get("val") if hasattr(node, "meta") else None
        want = str(getattr(val, "dtype", "")).replace("torch.", "")
        if want and isinstance(getattr(x, "ty", None), relax.TensorType) and str(x.ty.dtype) != want:
            x = bb.emit(relax.op.astype(x, want))
        if op in ("cumsum", "cumprod"):
            dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
            return bb.emit((relax.op.cumsum if op == "cumsum" else relax.op.cumprod)(x, int(dim)))
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        keepdim = bool(node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False))
        return bb.emit(relax.op.prod(x, None if dim is None else [int(dim)], keepdims=keepdim))

    return convert


_ARITHMETIC = {"add.Tensor": relax.op.add, "sub.Tensor": relax.op.subtract, "mul.Tensor": relax.op.multiply, "div.Tensor": relax.op.divide}


def _promoted(node, importer, lhs, rhs, alpha, name: str):
    """``add``/``sub``/``mul``/``div`` whose result PyTorch promotes to a float dtype from an integer
    or bool tensor (``i * 0.5``, ``i + 0.25``, ``i / 3``, ``i / j``): the operands in the result's
    dtype first. TVM's converter cast the float scalar to the tensor's integer dtype (``i * 0.5``
    became ``i * 0``) and divided integers by truncation. None where no operand needs it."""
    val = node.meta.get("val") if hasattr(node, "meta") else None
    out = str(getattr(val, "dtype", "")).replace("torch.", "")
    if not out.startswith(("float", "bfloat")) or name not in _ARITHMETIC:
        return None
    operands = [lhs, rhs]
    integral = [isinstance(getattr(v, "ty", None), relax.TensorType) and not str(v.ty.dtype).startswith(("float", "bfloat")) for v in operands]
    if not any(integral) or any(_is_size(v) for v in operands):
        return None
    bb = importer.block_builder
    cast = []
    for v in operands:
        if isinstance(getattr(v, "ty", None), relax.TensorType):
            cast.append(v if str(v.ty.dtype) == out else bb.emit(relax.op.astype(v, out)))
        elif isinstance(v, (bool, int, float)):
            cast.append(relax.const(float(v), out))
        else:
            return None
    if alpha != 1:
        cast[1] = bb.emit(relax.op.multiply(cast[1], relax.const(float(alpha), out)))
    return bb.emit(_ARITHMETIC[name](cast[0], cast[1]))


def _with_sizes(name: str, combine, true_division: bool = False):
    """``add`` / ``sub`` / ``mul`` / ``div.Tensor`` where one operand is a run-time size
    (``x.sum(1) / x.shape[1]``): TVM's converter gives the size as an int64 scalar against the
    tensor, which its binary ops refuse. Here it is one elementwise kernel, ``combine(tensor,
    size)`` with the size computed from the dims it takes as scalar arguments (float32 for a true
    division of an integer tensor, as PyTorch). Any other call is TVM's converter's."""

    def convert(node, importer):
        args = importer.retrieve_args(node)
        lhs, rhs = args[0], args[1]
        alpha = node.kwargs.get("alpha", 1)
        promoted = _promoted(node, importer, lhs, rhs, alpha, name)
        if promoted is not None:
            return promoted
        sized = [_is_size(v) for v in (lhs, rhs)]
        tensors = [isinstance(getattr(v, "ty", None), relax.TensorType) for v in (lhs, rhs)]
        if sum(sized) != 1 or sum(tensors) != 1 or alpha != 1:
            return _tvm_converter(importer, name, node)
        bb = importer.block_builder
        tensor, size = (lhs, rhs) if tensors[0] else (rhs, lhs)
        if true_division and not str(tensor.ty.dtype).startswith(("float", "bfloat")):
            tensor = bb.emit(relax.op.astype(tensor, "float32"))
        return sized_elementwise(bb, tensor, [size], lambda x, value: combine(x, value) if tensors[0] else combine(value, x))

    return convert


def _select(node, importer):
    """``select.int`` at an index computed from a run-time size (``e.select(1, e.shape[1] - 1)``):
    a take at a size tensor (:mod:`relax_vk.frontends.size_tensors`); at a constant index TVM's
    converter (whose negative indices :func:`_wrapped_constant_indices` wraps)."""
    x, dim, index = importer.env[node.args[0]], int(node.args[1]), node.args[2]
    if isinstance(index, int):
        return _tvm_converter(importer, "select.int", node)
    return importer.block_builder.emit(take_at_size(importer.block_builder, x, importer.env[index], dim % x.ty.ndim))


def _clamp(node, importer):
    """``clamp`` with a run-time size as a bound (``x.clamp(0, x.shape[2] - 1)``: PyTorch's
    decomposition of a replicate pad): one kernel, the sizes computed from the dims it takes as
    scalar arguments. TVM's converter broadcast the size as if it were a tensor (an import error).
    Any other clamp is TVM's converter's."""
    args = importer.retrieve_args(node)
    x, low, high = (list(args) + [None, None])[:3]
    low, high = node.kwargs.get("min", low), node.kwargs.get("max", high)
    bounds = [b for b in (low, high) if b is not None]
    if not isinstance(getattr(x, "ty", None), relax.TensorType) or not any(_is_size(b) for b in bounds):
        return _tvm_converter(importer, "clamp.default", node)
    if not all(_is_size(b) or isinstance(b, (int, float)) for b in bounds):
        return _tvm_converter(importer, "clamp.default", node)
    dtype = str(x.ty.dtype)
    sizes = [b if _is_size(b) else tirx.const(b, dtype) for b in bounds]

    def compute(value, *limits):
        if low is not None:
            value = tirx.max(value, limits[0])
        if high is not None:
            value = tirx.min(value, limits[-1])
        return value

    return sized_elementwise(importer.block_builder, x, sizes, compute)


#: what ``torch.export`` writes for a slice's open end (``x[:, 1:]``)
_OPEN_END = (1 << 63) - 1


def _slice(node, importer):
    """``slice.Tensor`` of a run-time size whose bounds lie within the smallest size the export
    allows (``x[:, :1]``, ``x[:, 2:]``): in bounds for every size, so its length is exact (``1``,
    ``T - 2``). TVM's converter clamps the bounds to the size (``min(1, T)``), a length that its
    binary ops cannot prove broadcastable against ``T`` (the product of ``x[:, :1]`` and ``x`` lost
    its shape). Also a fixed size sliced to a run-time length that never passes it (a learned
    position table, ``pos[:, :x.shape[1]]``: TVM's clamped length was a conditional that no later
    stage could build). Any other slice is TVM's converter's."""
    x = importer.env[node.args[0]]
    args = list(node.args) + [None] * (5 - len(node.args))
    dim, start, end, step = (args[1] if args[1] is not None else 0), args[2], args[3], (args[4] if args[4] is not None else 1)
    shape = x.ty.shape.values if isinstance(x.ty, relax.TensorType) and x.ty.shape is not None else None
    if shape is not None:
        dim = int(dim) % len(shape)
    if shape is not None and isinstance(shape[dim], tirx.IntImm) and start in (0, None) and step == 1 and hasattr(end, "op"):
        stop, most, least = importer.env.get(end), _value_bound(end), _value_bound(end, largest=False)
        if stop is not None and _is_size(stop) and most is not None and least is not None and 0 <= least and most <= int(shape[dim]):
            return importer.block_builder.emit(relax.op.strided_slice(x, [dim], [0], [stop], [1], assume_inbound=True))
    least = _size_bound(node.args[0], dim, largest=False) if shape is not None else None
    start = 0 if start is None else start
    end = _OPEN_END if end is None else end
    plain = all(isinstance(v, int) for v in (start, end, step))
    if (shape is None or isinstance(shape[dim], tirx.IntImm) or least is None or not plain or step < 1 or not 0 <= start <= least
            or not (end >= _OPEN_END or 0 <= end <= least)):  # fmt: skip
        return _tvm_converter(importer, "slice.Tensor", node)
    stop = shape[dim] if end >= _OPEN_END else end
    return importer.block_builder.emit(relax.op.strided_slice(x, [dim], [start], [stop], [step], assume_inbound=True))


def _split_with_sizes(node, importer):
    """``split_with_sizes`` whose sizes are run-time sizes (``x.chunk(n, dim)`` along a run-time
    dim, which ``torch.export`` allows only where ``n`` divides it: ``n`` sizes ``(T + n - 1) //
    n``, equal): Relax's split into ``n`` equal sections. TVM's converter adds the sizes as Python
    numbers. Unequal run-time sizes are refused by name; constant sizes are TVM's converter's."""
    x = importer.env[node.args[0]]
    sizes = [importer.env[s] if hasattr(s, "op") else s for s in node.args[1]]
    dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
    if all(isinstance(v, int) for v in sizes):
        return _tvm_converter(importer, "split_with_sizes.default", node)
    dim = int(dim) % x.ty.ndim
    if not all(tvm_ffi.structural_equal(v, sizes[0]) for v in sizes[1:]):
        raise UnsupportedError(f"{node.name}: split of axis {dim} into parts of different run-time sizes ({', '.join(str(v) for v in sizes)}) "
                               "is not supported; equal parts (chunk) are")  # fmt: skip
    return importer.block_builder.emit(relax.op.split(x, len(sizes), dim))


def _placeholder_values(exported) -> dict:
    """Placeholder name -> the tensor it stands for (parameters, buffers, constants) of ``exported``:
    converters that rearrange weights at import read them here (TVM's importer binds them as
    constants only after converting)."""
    values = {**dict(exported.named_parameters()), **dict(exported.named_buffers()), **dict(exported.constants)}
    return {spec.arg.name: values[spec.target] for spec in exported.graph_signature.input_specs if getattr(spec, "target", None) in values}


def _recurrent(kind: str, nonlinearity: str = "tanh", custom: bool = False):
    """``aten.lstm.input`` / ``gru.input`` / ``rnn_tanh.input`` / ``rnn_relu.input``, and
    relax_vk's ``relax_vk::recurrent`` (:func:`exportable_recurrent_layers`), as the recurrence
    kernels of :mod:`relax_vk.frontends.recurrent` (one launch per layer whatever the length)."""

    def convert(node, importer):
        from .recurrent import emit_torch_layers

        args = list(node.args)
        if custom:  # (x, hx, params, kind, has_biases, num_layers, bidirectional, batch_first, nonlinearity)
            x, hx, params, name, has_biases, num_layers, bidirectional, batch_first, act = args
        else:  # (x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
            x, hx, params, has_biases, num_layers, _dropout, _train, bidirectional, batch_first = args[:9]
            name, act = kind, nonlinearity
        where = f"{name.upper()} (node {node.name})"
        values = getattr(importer, "_relax_vk_values", {})
        missing = [p.name for p in params if p.name not in values]
        if missing:
            raise UnsupportedError(f"{where}: weights {', '.join(missing)} are not parameters or constants")
        hx = hx if isinstance(hx, (list, tuple)) else [hx]
        states = [importer.env[h] if h is not None else None for h in hx] if hx and any(h is not None for h in hx) else None
        weights = [values[p.name].detach().float().numpy() for p in params]
        out = emit_torch_layers(importer.block_builder, name, importer.env[x], states, weights, bool(has_biases), int(num_layers), bool(bidirectional), bool(batch_first), where, act)
        if custom and len(out) == 2:
            out = (*out, out[1])  # (the op always returns three tensors; c_n of a GRU/RNN is unused)
        return out

    return convert


CONVERTERS = {
    "lstm.input": _recurrent("lstm"),
    "gru.input": _recurrent("gru"),
    "rnn_tanh.input": _recurrent("rnn", "tanh"),
    "rnn_relu.input": _recurrent("rnn", "relu"),
    "recurrent.default": _recurrent("", custom=True),
    "replication_pad2d.default": _pad_converter("replicate"),
    "reflection_pad2d.default": _pad_converter("reflect"),
    "upsample_nearest2d.vec": _upsample_nearest,
    "upsample_nearest2d.default": _upsample_nearest,
    "upsample_bilinear2d.vec": _upsample_sampled("upsample_bilinear2d", "linear"),
    "upsample_bilinear2d.default": _upsample_sampled("upsample_bilinear2d", "linear"),
    "upsample_bicubic2d.vec": _upsample_sampled("upsample_bicubic2d", "cubic"),
    "upsample_bicubic2d.default": _upsample_sampled("upsample_bicubic2d", "cubic"),
    "_upsample_bilinear2d_aa.default": _upsample_antialiased("_upsample_bilinear2d_aa", 2),
    "_upsample_bilinear2d_aa.vec": _upsample_antialiased("_upsample_bilinear2d_aa", 2),
    "_upsample_bicubic2d_aa.default": _upsample_antialiased("_upsample_bicubic2d_aa", 4),
    "_upsample_bicubic2d_aa.vec": _upsample_antialiased("_upsample_bicubic2d_aa", 4),
    "grid_sampler_2d.default": _grid_sampler,
    "amax.default": _extreme(largest=True),
    "amin.default": _extreme(largest=False),
    "adaptive_max_pool2d.default": _adaptive_max_pool,
    "adaptive_avg_pool2d.default": _adaptive_avg_pool("adaptive_avg_pool2d.default"),
    "_adaptive_avg_pool2d.default": _adaptive_avg_pool("_adaptive_avg_pool2d.default"),
    "slice.Tensor": _slice,
    "pad.default": _pad,
    "split_with_sizes.default": _split_with_sizes,
    "add.Tensor": _with_sizes("add.Tensor", lambda a, b: a + b),
    "sub.Tensor": _with_sizes("sub.Tensor", lambda a, b: a - b),
    "mul.Tensor": _with_sizes("mul.Tensor", lambda a, b: a * b),
    "clamp.default": _clamp,
    "elu.default": _elu,
    "div.Tensor_mode": _div_rounded,
    "native_group_norm.default": _group_norm,
    "native_layer_norm.default": _layer_norm,
    "max_pool2d_with_indices.default": _max_pool_with_indices,
    "avg_pool2d.default": _avg_pool,
    "select.int": _select,
    "div.Tensor": _with_sizes("div.Tensor", lambda a, b: a / b, true_division=True),
    "im2col.default": _im2col,
    "col2im.default": _col2im,
    "var.correction": _variance("var"),
    "std.correction": _variance("std"),
    "var_mean.correction": _variance("var_mean"),
    "max.dim": _reduce_dim(largest=True),
    "cumsum.default": _accumulate("cumsum"),
    "index_put.default": _index_put,
    "cumprod.default": _accumulate("cumprod"),
    "prod.default": _accumulate("prod"),
    "prod.dim_int": _accumulate("prod"),
    "min.dim": _reduce_dim(largest=False),
}


def _decomposed(torch, exported):
    """``exported`` lowered to core ATen, except the ops relax_vk converts itself (and, in a
    quantized graph, ``aten.linear``, so that its weight's dequantize fuses into it)."""
    from .torch_quant import converted_here, is_quantized

    keep = KEEP + (("aten.linear.default",) if is_quantized(exported) else ())
    table = torch.export.default_decompositions()
    for key in list(table.keys()):
        if str(key) in keep or converted_here(str(key)):
            del table[key]
    return exported.run_decompositions(table)


def _unsupported_nodes(exported) -> list:
    """``(op, node)`` of every call TVM's converter table lacks."""
    from tvm.relax.frontend.torch.exported_program_translator import ExportedProgramImporter

    table = set(ExportedProgramImporter().create_convert_map()) | set(CONVERTERS) | set(QUANTIZED)
    found = []
    for node in exported.graph.nodes:
        if node.op != "call_function":
            continue
        name = getattr(node.target, "_name", None) or getattr(node.target, "__name__", str(node.target))
        short = name.split("::")[-1]
        overload = getattr(node.target, "__name__", "")  # (the importer's key: "op.overload")
        if short not in table and short.split(".")[0] not in ("getitem",) and name not in table and overload not in table:
            found.append((name, node.name))
    return found


def _failed_node(exported, converted) -> str:
    """`` at OP (node NAME, model op PATH)`` for the first op call of ``exported`` the importer had
    not converted when it failed (``converted``: its node table), else ``""``."""
    from .op_names import torch_op_name

    for node in exported.graph.nodes:
        if node.op == "call_function" and node not in converted:
            op = getattr(node.target, "__name__", str(node.target))
            path = torch_op_name(node)
            return f" at {op} (node {node.name}" + (f", model op {path})" if path and path != node.name else ")")
    return ""


def from_exported(exported, where: str = "the PyTorch model") -> tvm.IRModule:
    """Relax module of a ``torch.export.ExportedProgram`` (see the module docstring)."""
    torch = require("torch", "torch")
    from tvm.relax.frontend.torch.exported_program_translator import ExportedProgramImporter

    from .op_names import RecordingTable, torch_op_name

    try:
        decomposed = _decomposed(torch, exported)
    except Exception as err:
        raise UnsupportedError(f"{where}: PyTorch cannot decompose it to core ATen: {type(err).__name__}: {_first_line(err)}") from None
    try:
        # (what tvm's from_exported_program does without decompositions, its node table recorded:
        # the model's op names, which relax_vk.core.provenance follows to the kernels)
        importer = ExportedProgramImporter()
        importer.env = table = RecordingTable(torch_op_name)
        importer._relax_vk_values = _placeholder_values(decomposed)
        mod = importer.from_exported_program(
            decomposed, keep_params_as_input=False, unwrap_unit_return_tuple=True, no_bind_return_tuple=False,
            custom_convert_map={**QUANTIZED, **CONVERTERS},
        )  # fmt: skip
        mod = record_model_ops(mod, table.made_by)
    except UnsupportedError:
        raise
    except Exception as err:
        try:
            missing = _unsupported_nodes(decomposed)
        except Exception:  # the table lookup is a courtesy; the frontend's own message remains
            missing = []
        if missing:
            listed = "; ".join(f"{op} (node {node})" for op, node in missing[:5])
            raise UnsupportedError(f"{where}: TVM's PyTorch frontend cannot convert {listed}") from None
        at = _failed_node(decomposed, table)
        raise UnsupportedError(f"{where}: TVM's PyTorch frontend failed{at}: {type(err).__name__}: {_first_line(err)}") from None
    mod = exact_open_slices(_wrapped_constant_indices(_without_assertions(mod, where)))
    check_nearest_picks(mod, where, "torch")
    refuse_fixed_reshapes(mod, where, "op")
    lost = first_lost_shape(mod) if "tir_var_upper_bound" in (mod["main"].attrs or {}) else None
    if lost is not None:  # (left so, its ops would be built unlegalized or wrong)
        raise UnsupportedError(f"{where}: op {lost}: TVM's importer cannot tell the shape of its output at run-time sizes "
                               "(its inputs' sizes are not provably compatible for every size the export allows)")  # fmt: skip
    try:
        return bind_multiples(mod)  # (torch.export's 32 * Dim("h") axes)
    except ValueError as err:
        raise UnsupportedError(f"{where}: {err}") from None


def _wrapped_constant_indices(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every ``take`` at constant indices that counts some from the end (``x[:, -1]``:
    ``aten.select``, ``aten.index`` with a constant index) reading the entries PyTorch reads. TVM's
    importer writes such a ``take`` in its ``"fast"`` mode, which leaves a negative index
    undefined: ``x[:, -1]`` read memory before ``x``. Over a static axis the indices are wrapped
    here (``-1`` becomes ``n - 1``); over a run-time one the ``take`` wraps them itself (mode
    ``"wrap"``: an index in ``-n .. n - 1`` reads what PyTorch reads). An ``index_tensor`` (``x[i,
    j]`` with index tensors) wraps each run-time index of a static axis the same way, and so does a
    ``take`` at run-time indices (``x[:, i - 1]``: 2.15 off, or memory before ``x`` read) unless
    they are a model input selecting from a constant table (an ``Embedding``: PyTorch refuses a
    negative id there, and so does the runtime's range check, :mod:`relax_vk.passes.layout.index_ranges`)."""
    import numpy as np
    from tvm.ir.expr import GenericConst

    @relax.expr_functor.mutator
    class _Wrap(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.index_tensor":
                return self.wrapped_index_tensor(call)
            if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.take") or str(call.attrs.mode) != "fast":
                return call
            if not isinstance(call.args[1], GenericConst):
                return self.wrapped_take(call)
            indices = call.args[1].value.numpy()
            if not indices.size or indices.min() >= 0:
                return call
            data = call.args[0].ty
            axis = 0 if call.attrs.axis is None else int(call.attrs.axis) % data.ndim
            extent = data.shape.values[axis] if call.attrs.axis is not None else None
            if isinstance(extent, tirx.IntImm):
                wrapped = np.where(indices < 0, indices + int(extent.value), indices).astype(indices.dtype)
                return relax.op.take(call.args[0], relax.const(wrapped, str(indices.dtype)), axis=call.attrs.axis, mode="fast")
            return relax.op.take(call.args[0], call.args[1], axis=call.attrs.axis, mode="wrap")

        def _an_input(self, expr) -> bool:
            """Whether ``expr`` holds a model input's values (through casts and reshapes)."""
            for _ in range(64):
                if not isinstance(expr, relax.Var):
                    return False
                bound = self.lookup_binding(expr)
                if bound is None:
                    return True  # (a parameter)
                if not (isinstance(bound, relax.Call) and isinstance(bound.op, tvm.ir.Op) and bound.op.name in ("relax.astype", "relax.reshape")):
                    return False
                expr = bound.args[0]
            return False

        def wrapped_take(self, call):
            data, index = call.args
            if isinstance(data, GenericConst) and self._an_input(index):
                return call
            if call.attrs.axis is None or not isinstance(getattr(index, "ty", None), relax.TensorType):
                return call
            extent = data.ty.shape.values[int(call.attrs.axis) % data.ty.ndim] if data.ty.shape is not None else None
            if not isinstance(extent, tirx.IntImm):
                return call
            return relax.op.take(data, self.wrapped(index, int(extent.value)), axis=call.attrs.axis, mode="fast")

        def wrapped(self, index, extent: int) -> relax.Var:
            """``where(index < 0, index + extent, index)``, bound: PyTorch's reading of a negative index."""
            dtype = str(index.ty.dtype)
            negative = self.builder_.emit(relax.op.less(index, relax.const(0, dtype)))
            shifted = self.builder_.emit(relax.op.add(index, relax.const(extent, dtype)))
            return self.builder_.emit(relax.op.where(negative, shifted, index))

        def wrapped_index_tensor(self, call):
            # x[i, j] with index tensors: an entry counted from the end (-2) read past the axis;
            # each run-time index tensor of a static axis wraps as PyTorch does
            data, indices = call.args[0], call.args[1]
            fields = list(indices.fields) if isinstance(indices, relax.Tuple) else None
            if fields is None:
                return call
            wrapped = []
            for axis, index in enumerate(fields):
                extent = data.ty.shape.values[axis] if data.ty.shape is not None else None
                known_safe = isinstance(index, GenericConst) and (index.value.numpy().size == 0 or index.value.numpy().min() >= 0)
                if known_safe or not isinstance(extent, tirx.IntImm) or not isinstance(getattr(index, "ty", None), relax.TensorType):
                    wrapped.append(index)
                    continue
                wrapped.append(self.wrapped(index, int(extent.value)))
            return relax.op.index_tensor(data, relax.Tuple(wrapped))

    out = mod.clone()
    mutator = _Wrap(out)
    out["main"] = mutator.visit_expr(out["main"])
    return out


def _without_assertions(mod: tvm.IRModule, where: str) -> tvm.IRModule:
    """``mod`` without the run-time assertions ``torch.export`` writes on values (``one_hot``'s
    "Class values must be non-negative", ``_assert_async``): evaluating one needs the tensor back
    on the host between kernels. Each one dropped is named in a warning; the computation runs as
    written (``one_hot`` of a class past its range gives a row of zeros where PyTorch raises)."""
    import warnings

    main = mod["main"]
    body = main.body
    dropped, blocks = [], []
    for block in body.blocks:
        kept = []
        for b in block.bindings:
            value = b.value
            if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.assert_op":
                texts = [a.value for a in value.args[1:] if isinstance(a, tvm.ir.StringImm)]
                texts += [v.value for v in (value.args[1].fields if isinstance(value.args[1], relax.Tuple) else []) if isinstance(v, tvm.ir.StringImm)]
                dropped.append(next((t for t in texts if t != "{}"), str(b.var.name)))
                continue
            kept.append(b)
        blocks.append(relax.DataflowBlock(kept) if isinstance(block, relax.DataflowBlock) else relax.BindingBlock(kept))
    if not dropped:
        return mod
    warnings.warn(f"{where}: the model's run-time assertions on values are not checked on the device: {'; '.join(sorted(set(dropped)))}",
                  stacklevel=3)  # fmt: skip
    out = mod.clone()
    out["main"] = relax.Function(main.params, relax.SeqExpr(blocks, body.body), main.ret_ty, main.is_pure, main.attrs)
    return out


class _quiet_logger:
    """Keep a library logger's records for the duration of a ``with`` block instead of printing
    them (``messages``): torch.export.load logs the real reason it fails, then raises a generic
    error."""

    def __init__(self, name: str):
        import logging

        self.logger = logging.getLogger(name)
        self.messages: list = []
        parent = self

        class _Keep(logging.Handler):
            def emit(self, record):
                detail = logging.Formatter().formatException(record.exc_info) if record.exc_info else ""
                parent.messages.append(f"{record.getMessage()} {detail}")

        self.handler = _Keep()

    def __enter__(self):
        self.saved = (self.logger.propagate, list(self.logger.handlers))
        self.logger.propagate = False
        self.logger.handlers = [self.handler]  # (torch gives its loggers stderr handlers of their own)
        return self

    def __exit__(self, *exc):
        self.logger.propagate, self.logger.handlers = self.saved
        return False


def _first_line(err) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:300] if text else ""


_HALF = ("float16", "bfloat16")


def _is_half(t) -> bool:
    return str(getattr(t, "dtype", "")).replace("torch.", "") in _HALF


def from_torch(module, example_inputs: Sequence, dynamic_shapes=None) -> tvm.IRModule:
    """Relax module of a copy of ``module`` in eval mode (the caller's is left as it is: a later
    change of its weights does not reach the module returned) for ``example_inputs``; parameters become
    constants. Half-precision models compute in float32 behind their float16 signature (module
    docstring). ``dynamic_shapes``: ``torch.export``'s own (``{"x": {3: Dim("W", min=8,
    max=1280)}}``): those axes stay run-time dims with the ranges torch.export derives (TVM's
    importer names them as torch does, ``s0``, ``s1``, ...; :mod:`relax_vk.core.dims`)."""
    torch = require("torch", "torch")
    import copy

    try:  # a snapshot: the module's constants are its tensors' memory (zero-copy), which a later
        # load_state_dict or optimizer step would change under the built module; the caller's
        # module also keeps its training mode
        module = copy.deepcopy(module)
    except Exception:  # noqa: BLE001 (a module deepcopy refuses: imported as it is)
        pass
    try:
        module = module.eval()
    except (NotImplementedError, RuntimeError):  # a pt2e-converted graph module refuses eval(); it is exported for inference
        pass
    example_inputs = tuple(example_inputs)
    half = any(_is_half(t) for t in list(module.parameters()) + list(module.buffers()) + list(example_inputs))
    if half:
        if dynamic_shapes is not None:
            raise UnsupportedError(f"{type(module).__name__}: run-time dims (dynamic_shapes) of a half-precision model are not supported; "
                                   "export it in float32 and build with ScopeOptions(precision='fp16')")  # fmt: skip
        return _from_half_torch(torch, module, example_inputs)
    from .recurrent import exportable_recurrent_layers

    try:
        with torch.no_grad(), exportable_recurrent_layers(module):
            exported = torch.export.export(module, example_inputs, dynamic_shapes=dynamic_shapes)
    except Exception as err:
        raise UnsupportedError(f"torch.export cannot export {type(module).__name__}: {type(err).__name__}: {_first_line(err)}") from None
    try:
        return from_exported(exported, type(module).__name__)
    except UnsupportedError as err:
        _refuse_float64(module, example_inputs, err)
        raise


def _refuse_float64(module, example_inputs, err: Exception) -> None:
    """Where the import of a model with a float64 parameter, buffer or input failed (TVM's
    importer stops inside, e.g. on a float32 + float64 add), the error names that tensor: the
    kernels compute float32 at most."""
    named = [*(("parameter", n, t) for n, t in module.named_parameters()), *(("buffer", n, t) for n, t in module.named_buffers()),
             *(("input", str(i), t) for i, t in enumerate(example_inputs))]  # fmt: skip
    for kind, name, t in named:
        if str(getattr(t, "dtype", "")) == "torch.float64":
            raise UnsupportedError(f"{type(module).__name__}: {kind} {name} is float64, which relax_vk's kernels do not compute; "
                                   f"convert the model and its inputs with .float() (or .half()) ({err})") from None  # fmt: skip


def _from_half_torch(torch, module, example_inputs) -> tvm.IRModule:
    import copy

    from ..passes.layout.edge_dtypes import result_fields, retype_abi

    with torch.no_grad():
        try:
            outputs = module(*example_inputs)
        except Exception:  # a half op PyTorch cannot run on this CPU: assume float16 results
            outputs = None
    float_inputs = tuple(t.float() if _is_half(t) else t for t in example_inputs)
    mod = from_torch(copy.deepcopy(module).float(), float_inputs)
    main = mod["main"]
    # (bfloat16 inputs and outputs are float32 ones: numpy, the runtime's arrays and the GPU
    # APIs' buffers have no bfloat16; the values a bfloat16 tensor holds are float32's exactly)
    inputs = {p.name: "float16" for p, t in zip(main.params, example_inputs) if str(t.dtype) == "torch.float16"}
    outs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    out_dtypes = {}
    for i, ty in enumerate(result_fields(main)):
        declared = str(outs[i].dtype).replace("torch.", "") if outputs is not None and i < len(outs) else "float16"
        if declared == "float16" and str(getattr(ty, "dtype", "")) == "float32":
            out_dtypes[i] = declared
    if any(str(getattr(t, "dtype", "")) == "torch.bfloat16" for t in list(module.parameters()) + list(example_inputs)):
        warnings.warn(f"{type(module).__name__}: a bfloat16 model computes in float32 and takes and returns float32 arrays "
                      "(numpy and the GPU APIs have no bfloat16)", stacklevel=3)  # fmt: skip
    out = mod.clone()
    out["main"] = retype_abi(main, mod, inputs, out_dtypes)
    return out


def _register_quantized_ops(path: str) -> None:
    """Register the quantized ops a ``.pt2`` archive names before loading it: PyTorch's
    ``quantized_decomposed`` library (pt2e) and, when the archive uses them and torchao is
    installed, torchao's (weight-only configs). An archive is a zip; its graph is JSON text."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            text = b" ".join(archive.read(n) for n in archive.namelist() if n.endswith(".json"))
    except (zipfile.BadZipFile, OSError):
        return  # (torch.export.load says what is wrong with the file)
    if b"quantized_decomposed" in text:
        import torch.ao.quantization.fx._decomposed  # noqa: F401
    if b"torchao." in text:
        try:
            import torchao  # noqa: F401
        except ImportError:
            pass  # (then the op is reported as not registered, by name)


def load_pt2(path: str) -> tvm.IRModule:
    """Relax module of a ``torch.export.save`` archive."""
    torch = require("torch", "torch")

    if os.path.getsize(path) == 0:
        raise ModelLoadError(f"{path}: empty file (not a torch.export archive)")
    _register_quantized_ops(path)
    quiet = _quiet_logger("torch.export")
    try:
        with quiet:  # it logs a traceback of its own before raising
            exported = torch.export.load(path)
    except Exception as err:
        import re

        unresolved = sorted(set(re.findall(r"failed to resolve (torch\.ops\.[\w.]+) to an operator", " ".join(quiet.messages))))
        if unresolved:
            raise UnsupportedError(
                f"{path}: uses custom op {', '.join(unresolved)}, which is not registered here (relax_vk can only "
                "import ops PyTorch and TVM know; a torch.library op needs a TVM converter)"
            ) from None
        raise ModelLoadError(f"{path}: not a readable torch.export archive (.pt2): {type(err).__name__}: {_first_line(err)}") from None
    half = _half_program_inputs(torch, exported)
    if half is not None:  # (computed in float32 behind its half signature, as from_torch does)
        return from_torch(exported.module(), half)
    return from_exported(exported, path)


def _half_program_inputs(torch, exported):
    """Zero example inputs of an exported program with float16 or bfloat16 parameters or inputs
    and fixed input sizes, else None (TVM's importer failed on it: a float32 + float16 add)."""
    tensors = [n.meta.get("val") for n in exported.graph.nodes if n.op == "placeholder"]
    if not any(_is_half(t) for t in tensors):
        return None
    users = set(exported.graph_signature.user_inputs)
    example = []
    for node in exported.graph.nodes:
        val = node.meta.get("val")
        if node.op != "placeholder" or node.name not in users or not hasattr(val, "shape"):
            continue
        if not all(isinstance(d, int) for d in val.shape):
            raise UnsupportedError("run-time dims of a half-precision program are not supported; "
                                   "export it in float32 and build with ScopeOptions(precision='fp16')")  # fmt: skip
        example.append(torch.zeros(tuple(val.shape), dtype=val.dtype))
    return tuple(example)
