"""Adaptive pools: ``relax.nn.adaptive_avg_pool2d`` and PyTorch's ``adaptive_max_pool2d``.

Windows that tile the map evenly go to TVM's legalizer (a plain pool). Uneven windows (a 13 x 13
map to 6 x 6, AlexNet's head at another input size) are written here: TOPI writes them as a
reduction of data-dependent extent nested in another block, which no schedule fits when both
axes are uneven (the safe schedule's verifier finds a race; the build failed in scheduling).
Here each output sums or maxes over the largest window of its axis, ``[floor(i * H / oh),
ceil((i + 1) * H / oh))`` padded to that size with terms that do not count: a reduction of
static extent, scheduled like any pool; the average divides by the window's own size, as
PyTorch does.

An average pool of a map of run-time size is written the same way with the largest window the
dims' bounds allow (``ceil(H_max / oh) + 1``, at most ``H_max``): one kernel for every size, whose
work is that of the bound. A size whose bound is unknown is refused by name.
"""

from __future__ import annotations

import re
from typing import Sequence, Tuple

import tvm
from tvm import relax, tirx

from ..core.dims import dim_ranges, largest_value
from ..core.errors import UnsupportedError


def _windows(size: int, out: int) -> Tuple[list, int]:
    """Each output's ``(start, end)`` along an axis of ``size`` pooled to ``out``, and the largest
    window."""
    spans = [(i * size // out, ((i + 1) * size + out - 1) // out) for i in range(out)]
    return spans, max(end - start for start, end in spans)


def _axes(layout: str) -> Tuple[int, int]:
    """The positions of ``H`` and ``W`` in ``layout`` (``NCHW``, ``NCHW4c``, ...)."""
    axes = re.findall(r"\d*[A-Za-z]", layout)
    return axes.index("H"), axes.index("W")


def _bound_window(largest: int, out: int) -> int:
    """The largest window of an axis of run-time size at most ``largest`` pooled to ``out``."""
    return min(largest, -(-largest // out) + 1)


def adaptive_pool(x, size: Sequence[int], kind: str, layout: str = "NCHW", bounds: Sequence[int] = (0, 0)):
    """The adaptive ``kind`` (``"avg"`` or ``"max"``) pool of the te tensor ``x`` to ``size``, as
    the module docstring says; ``bounds``: the largest height and width a run-time size takes."""
    from tvm import te

    hpos, wpos = _axes(layout)
    H, W = x.shape[hpos], x.shape[wpos]
    oh, ow = int(size[0]), int(size[1])
    kh, kw = (_windows(int(n), out)[1] if isinstance(n, tirx.IntImm) else _bound_window(bounds[k], out)
              for k, (n, out) in enumerate(((H, oh), (W, ow))))  # fmt: skip
    index = x.shape[0].ty.dtype if hasattr(x.shape[0], "ty") else "int64"
    rh = te.reduce_axis((tirx.const(0, index), tirx.const(kh, index)), name="rh")
    rw = te.reduce_axis((tirx.const(0, index), tirx.const(kw, index)), name="rw")
    shape = [tirx.const(oh, index) if d == hpos else tirx.const(ow, index) if d == wpos else x.shape[d] for d in range(len(x.shape))]

    def span(i, n, out):
        return tirx.floordiv(i * n, out), tirx.floordiv((i + 1) * n + out - 1, out)

    def term(idx, empty):
        (sh, eh), (sw, ew) = span(idx[hpos], H, oh), span(idx[wpos], W, ow)
        h, w = sh + rh, sw + rw
        at = list(idx)
        at[hpos], at[wpos] = tirx.min(h, H - 1), tirx.min(w, W - 1)  # (a term that does not count reads inside the map)
        return tirx.Select(tirx.all(h < eh, w < ew), x(*at), tirx.const(empty, x.dtype))

    if kind == "max":
        return te.compute(shape, lambda *i: te.max(term(i, float("-inf")), axis=[rh, rw]), name="adaptive_pool_max")
    total = te.compute(shape, lambda *i: te.sum(term(i, 0.0), axis=[rh, rw]), name="adaptive_pool_sum")

    def average(*i):
        (sh, eh), (sw, ew) = span(i[hpos], H, oh), span(i[wpos], W, ow)
        return total(*i) / ((eh - sh) * (ew - sw)).astype(x.dtype)

    return te.compute(shape, average, name="adaptive_pool_avg")


def _largest(bb: relax.BlockBuilder, extent) -> "int | None":
    """The largest value of ``extent`` (an expression of run-time dims) over the dims' ranges
    recorded on the module's ``main`` (None: unbounded)."""
    if isinstance(extent, tirx.IntImm):
        return int(extent)
    mod = bb.get()
    ranges = dim_ranges(mod["main"]) if any(gv.name_hint == "main" for gv in mod.get_global_vars()) else {}
    return largest_value(extent, ranges)


def legalize_adaptive_avg_pool2d(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    data = call.args[0]
    shape = list(getattr(getattr(data.ty, "shape", None), "values", None) or [])
    out = list(getattr(getattr(call.ty, "shape", None), "values", None) or [])
    layout, out_layout = str(call.attrs.layout), str(call.attrs.out_layout)
    hpos, wpos = _axes(layout)
    spatial = [shape[hpos], shape[wpos]] if len(shape) > max(hpos, wpos) else []
    run_time = any(not isinstance(d, tirx.IntImm) for d in spatial)
    global_pool = len(out) > max(hpos, wpos) and all(isinstance(d, tirx.IntImm) and int(d) == 1 for d in (out[hpos], out[wpos]))
    if global_pool or layout != out_layout:
        return tvm.ir.Op.get("relax.nn.adaptive_avg_pool2d").get_attr("FLegalize")(bb, call)
    size = (int(out[hpos]), int(out[wpos]))
    if run_time:
        bounds = [_largest(bb, d) for d in spatial]
        if None in bounds:
            raise UnsupportedError(f"adaptive_avg_pool2d to {list(size)} of a map of run-time size {shape}: the size has no "
                                   "upper bound (give its dims a range)")  # fmt: skip
        return bb.call_te(adaptive_pool, data, size, "avg", layout, bounds, primfunc_name_hint="adaptive_avg_pool2d")
    if int(spatial[0]) % size[0] == 0 and int(spatial[1]) % size[1] == 0:  # (even windows: a plain pool)
        return tvm.ir.Op.get("relax.nn.adaptive_avg_pool2d").get_attr("FLegalize")(bb, call)
    return bb.call_te(adaptive_pool, data, size, "avg", layout, primfunc_name_hint="adaptive_avg_pool2d")
