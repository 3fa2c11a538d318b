"""ONNX ``Slice`` of a run-time axis with constant bounds, its length exact over the dims' ranges.

``x[:, :, 1:]`` exported by torch.onnx is ``Slice(starts=[1], ends=[INT64_MAX or 2^30])``. TVM's
converter clamps the bounds to the axis, ``min(2^30, H) - min(1, H)``: a length it cannot prove
equal to ``H - 1`` while it imports (it does not know the dims' ranges), so a ``Flatten`` of the
slice failed in TVM's converter and an ``Add`` of it to another ``H - 1`` rows (``torch.roll``'s
``cat([x[:, :, 1:], x[:, :, :1]]) + x``) lost its shape.

:func:`convert_slice` takes such a slice (constant starts, ends, axes and unit steps over a 4-D or
any-rank input) and gives it its exact bounds where they hold at every size of the dims' ranges
(ONNX's rules: a negative bound counts from the end, an end at or past every size is the size);
any other slice, or one it cannot prove in bounds, stays with TVM's converter. The ranges are the
import's own (:func:`importing_ranges`), set by ``from_onnx`` around TVM's import.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Dict, Iterator, Tuple

_RANGES: contextvars.ContextVar = contextvars.ContextVar("relax_vk_onnx_dim_ranges", default={})


@contextlib.contextmanager
def importing_ranges(ranges: Dict[str, Tuple[int, int]]) -> Iterator[None]:
    """The run-time dims' ``{name: (min, max)}`` the converters of an import may read."""
    token = _RANGES.set(dict(ranges))
    try:
        yield
    finally:
        _RANGES.reset(token)


def current_ranges() -> Dict[str, Tuple[int, int]]:
    """The run-time dims' ranges of the import in progress (empty outside one)."""
    return _RANGES.get()


def convert_slice(bb, inputs, attrs):
    """``Slice`` with constant bounds over run-time axes (module docstring); None for TVM's converter."""
    import tvm
    from tvm import relax, tirx
    from tvm.ir import GenericConst

    from ..core.dims import bounded_analyzer

    def entries(value):  # a constant's values, or a size's (a shape value, or one size: ``Shape -> Gather -> Div``)
        if isinstance(value, GenericConst):
            return [int(v) for v in value.value.numpy().reshape(-1)]
        if isinstance(value, relax.ShapeExpr):
            return list(value.values)
        if tvm.ir.is_prim_expr(value) and not isinstance(getattr(value, "ty", None), relax.TensorType):
            return [value]
        return None

    ranges = _RANGES.get()
    data = inputs[0]
    shape = getattr(getattr(data, "ty", None), "shape", None)
    values = getattr(shape, "values", None)
    if not ranges or values is None or len(inputs) < 3:
        return None
    starts, ends = entries(inputs[1]), entries(inputs[2])
    axes = entries(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else list(range(len(starts or [])))
    steps = entries(inputs[4]) if len(inputs) > 4 and inputs[4] is not None else [1] * len(starts or [])
    if starts is None or ends is None or axes is None or steps is None or not len(starts) == len(ends) == len(axes) == len(steps):
        return None
    if not all(isinstance(a, int) for a in axes) or any(not isinstance(s, int) or s != 1 for s in steps):
        return None
    rank = len(values)
    axes = [int(a) % rank for a in axes]
    if all(isinstance(values[a], tirx.IntImm) for a in axes):
        return None  # (static axes: TVM's converter is exact)
    variables = {v for a in axes for v in tirx.analysis.undefined_vars(values[a])}
    if any(str(v.name) not in ranges for v in variables):
        return None
    analyzer = bounded_analyzer(variables, ranges)
    begins, stops = [], []
    for axis, start, end in zip(axes, starts, ends):
        extent = values[axis]
        dtype = str(extent.ty.dtype)
        if isinstance(start, int):
            begin = extent + start if start < 0 else tirx.const(start, dtype)
        else:  # (a size: never negative)
            begin = start if str(start.ty.dtype) == dtype else tirx.Cast(dtype, start)
        if isinstance(end, int):
            stop = extent + end if end < 0 else tirx.const(min(end, 1 << 62), dtype)
        else:
            stop = end if str(end.ty.dtype) == dtype else tirx.Cast(dtype, end)
        if analyzer.can_prove(stop >= extent):
            stop = extent
        if not (analyzer.can_prove(begin >= 0) and analyzer.can_prove(begin <= stop) and analyzer.can_prove(stop <= extent)):
            return None
        begins.append(analyzer.simplify(begin))
        stops.append(analyzer.simplify(stop))
    return relax.op.strided_slice(data, axes, begins, stops, [1] * len(axes), assume_inbound=True)
