"""Nearest resizes between run-time sizes, checked to read what the model's framework reads.

A nearest resize whose input or output size holds run-time dims (an FPN's upsample to its skip's
size, ``F.interpolate(y, size=x.shape[2:])``) samples in TVM at ``x * (in / out)`` in float32,
with its floor nudged by 1e-5; onnxruntime at ``x / (out / in)``, PyTorch at ``floor(x * (in /
out))``. Where the exact coordinate is a whole number their roundings can differ: a row or column
one off, with no error (14 rows to 2, asymmetric floor: TVM reads row 7 where onnxruntime reads 6).
:func:`check_nearest_picks` tries every size of the dims' ranges and refuses, by model op, a
resize that would differ at any of them.
"""

from __future__ import annotations

from ..core.errors import UnsupportedError


def _picks(n_in: int, n_out: int, coordinates: str, rounding: str, reference: str):
    """The input index each of ``n_out`` outputs of a nearest resize reads, in float32: as
    onnxruntime computes it (``reference="onnx"``: ``x / (out / in)``, ``floor``/``ceil`` exact),
    as PyTorch does (``"torch"``: ``floor(x * (in / out))``, its asymmetric floor), or (``"tvm"``)
    as TVM's resize does (``x * (in / out)``, ``floor``/``ceil`` nudged by 1e-5)."""
    import numpy as np

    f = np.float32
    x = np.arange(n_out, dtype=f)
    if reference == "torch":
        if coordinates != "asymmetric" or rounding != "floor":
            return None
        return np.minimum(np.floor(x * (f(n_in) / f(n_out))), n_in - 1).astype(np.int64)
    if reference == "onnx":
        scale = f(n_out) / f(n_in)
        at = {"asymmetric": lambda: x / scale, "half_pixel": lambda: (x + f(0.5)) / scale - f(0.5),
              "pytorch_half_pixel": lambda: (x + f(0.5)) / scale - f(0.5) if n_out > 1 else np.zeros_like(x),
              "tf_half_pixel_for_nn": lambda: (x + f(0.5)) / scale,
              "align_corners": lambda: x * f(n_in - 1) / f(n_out - 1) if n_out > 1 else np.zeros_like(x)}  # fmt: skip
        nudge = f(0)
    else:
        scale = f(n_in) / f(n_out)
        at = {"asymmetric": lambda: scale * x, "half_pixel": lambda: (x + f(0.5)) * scale - f(0.5),
              "pytorch_half_pixel": lambda: (x + f(0.5)) * scale - f(0.5) if n_out > 1 else np.zeros_like(x),
              "tf_half_pixel_for_nn": lambda: (x + f(0.5)) * scale,
              "align_corners": lambda: f(n_in - 1) / f(n_out - 1) * x if n_out > 1 else np.zeros_like(x)}  # fmt: skip
        nudge = f(1e-5)
    if coordinates not in at:
        return None
    v = at[coordinates]().astype(f)
    rounded = {"round_prefer_floor": lambda: np.ceil(v - f(0.5)), "round_prefer_ceil": lambda: np.floor(v + f(0.5)),
               "floor": lambda: np.floor(v + nudge), "ceil": lambda: np.ceil(v - nudge)}  # fmt: skip
    if rounding not in rounded:
        return None
    return np.clip(rounded[rounding](), 0, n_in - 1).astype(np.int64)


def check_nearest_picks(mod, where: str, reference: str) -> None:
    """Refuse, naming the model op, a nearest resize between sizes that hold run-time dims where
    TVM's resize would read another input row or column than the ``reference`` (``"onnx"``:
    onnxruntime; ``"torch"``: PyTorch) at some size of the dims' ranges. TVM samples at ``x * (in /
    out)`` and nudges its floor by 1e-5, ONNX at ``x / (out / in)``, PyTorch at ``floor(x * (in /
    out))``: their float32 roundings differ where the exact coordinate is a whole number, a pixel
    off with no error. Every size of the ranges is tried (at most ``core.dims.MOST_SIZE_CASES`` an
    axis; past that the resize is refused as unchecked)."""
    from tvm import relax, tirx
    from tvm.sym import Analyzer

    from ..codegen.run_time_shapes import substitute
    from ..core.dims import dim_ranges, size_cases
    from ..core.provenance import model_op_names

    main = mod["main"]
    ranges, names = dim_ranges(main), model_op_names(main)
    analyzer = Analyzer()
    for block in main.body.blocks:
        for b in block.bindings:
            call = b.value
            if not (isinstance(call, relax.Call) and getattr(call.op, "name", "") == "relax.image.resize2d"):
                continue
            if str(call.attrs.method) != "nearest_neighbor":
                continue
            dims = list(call.args[0].ty.shape.values)[2:]
            sizes = list(b.var.ty.shape.values)[2:]
            coordinates, rounding = str(call.attrs.coordinate_transformation_mode), str(call.attrs.rounding_method)
            node = names.get(b.var.name, b.var.name)
            for axis, (n_in, n_out) in enumerate(zip(dims, sizes), start=2):
                if not tirx.analysis.undefined_vars(n_in) and not tirx.analysis.undefined_vars(n_out):
                    continue
                count, cases = size_cases([n_in, n_out], ranges)
                if cases is None:
                    raise UnsupportedError(f"{where}: node {node}: a nearest resize of axis {axis} from {n_in} to {n_out} at run-time dims: "
                                           f"{f'too many sizes ({count})' if count else 'a dim without a declared range'} to check that TVM's "
                                           f"sampling reads what {reference} does; use "
                                           "a linear mode, integer scales, or narrower --dim ranges")  # fmt: skip
                for bound in cases:
                    a, o = (int(analyzer.simplify(substitute(e, bound))) for e in (n_in, n_out))
                    ours, theirs = _picks(a, o, coordinates, rounding, "tvm"), _picks(a, o, coordinates, rounding, reference)
                    if ours is None or theirs is None:
                        raise UnsupportedError(f"{where}: node {node}: nearest resize with coordinate_transformation_mode "
                                               f"{coordinates!r} and nearest_mode {rounding!r} at run-time dims is not supported")  # fmt: skip
                    if (ours != theirs).any():
                        at = int((ours != theirs).argmax())
                        sizes_at = ", ".join(f"{v.name}={int(x)}" for v, x in bound.items())
                        raise UnsupportedError(f"{where}: node {node}: a nearest resize of axis {axis} from {a} to {o} ({sizes_at}) reads "
                                               f"input {ours[at]} for output {at} where {reference} reads {theirs[at]}"
                                               " (TVM's float32 sampling rounds otherwise); use a linear mode, integer scales, or --dim "
                                               "ranges without such sizes")  # fmt: skip
