"""The safe schedule: every kernel gets one, whatever its blocks are.

It is what the scheduling driver falls back to when no rule gives a kernel that passes
:func:`~relax_vk.schedules.verify.kernel_problems` (a conv whose fused epilogue the adreno rule
leaves unbound, a reduction no rule recognises, ...). It is simple, not fast:

1. every spatial block that is not an output is inlined into its consumers when possible (pads
   fold into the reads of the op after them; epilogue chains collapse);
2. every remaining block gets its own launch: its spatial loops are fused and split over
   ``blockIdx.x``/``threadIdx.x`` (a second grid axis when one would exceed 65,535 groups), its
   reduction loops run serially inside the thread;
3. a block that writes a texture keeps the 4-lane texel loop innermost and vectorized (texture
   stores write whole texels); a reduction that writes a texture accumulates in a per-thread local
   buffer, written back texel by texel, with its reduction loops outside the lane loop (each texel
   it reads fetched once for the four lanes).
"""

from __future__ import annotations

from typing import Optional

from tvm import s_tir, tirx

from ..core.dims import kernel_ranges
from ..core.ir_utils import run_time_size
from .analysis import _loop_kinds, _realize
from .unchecked import new_schedule
from .verify import compacted

MAX_GROUPS = 65535  # per grid dimension (Vulkan's guaranteed minimum, and OpenCL-safe)


def _is_texture(buffer) -> bool:
    return str(buffer.scope()).startswith("global.texture")


def _lane_loop(sch: s_tir.Schedule, block) -> Optional[object]:
    """The loop that walks the texel lanes of the texture ``block`` writes (None if none)."""
    from ..core.ir_utils import tir_uses_any

    realize = _realize(sch, block)
    stmt = realize.block
    textures = [w for w in stmt.writes if _is_texture(w.source)]
    if not textures:
        return None
    last = textures[0].region[-1].min
    ivs = [iv.var for iv in stmt.iter_vars]
    lane_ivs = [iv for iv in ivs if tir_uses_any(last, [iv])]
    values = [value for iv, value in zip(ivs, realize.iter_values) if any(iv.same_as(v) for v in lane_ivs)]
    for loop in sch.get_loops(block):
        var = sch.get(loop).loop_var
        if any(tir_uses_any(v, [var]) for v in values) and int(getattr(sch.get(loop).extent, "value", 0)) == 4:
            return loop
    return None


def _is_spatial(sch: s_tir.Schedule, block) -> bool:
    return all(iv.iter_type == tirx.IterVar.DataPar for iv in sch.get(block).iter_vars)


def _writes_output(sch: s_tir.Schedule, block, outputs) -> bool:
    return any(any(w.source.same_as(o) for o in outputs) for w in sch.get(block).writes)


def _bind(sch: s_tir.Schedule, loops: list, threads: int):
    """Fuse ``loops`` and spread them over blockIdx (x, then y past the group limit) and
    threadIdx.x; returns the thread loop."""
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    extent = int(getattr(sch.get(fused).extent, "value", 0)) or threads
    threads = max(1, min(threads, extent))
    groups = -(-extent // threads)
    if groups <= MAX_GROUPS:
        bx, tx = sch.split(fused, [None, threads])
        sch.bind(bx, "blockIdx.x")
    else:
        by, bx, tx = sch.split(fused, [None, MAX_GROUPS, threads])
        sch.bind(by, "blockIdx.y")
        sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return tx


class _NotSplittable(Exception):
    """The loops cannot be bound without fusing two run-time extents (:func:`_bind_apart`)."""


class _Apart:
    """How :func:`_bind_apart` binds a kernel's launches: the run-time dims' ``ranges`` (``{name:
    (min, max)}``) and the grid ranks its launches took (one rank a kernel: TVM's split of host and
    device code fails on launches of different ranks in one kernel)."""

    def __init__(self, ranges: dict):
        self.ranges, self.ranks = ranges, set()


def _bind_apart(sch: s_tir.Schedule, loops: list, threads: int, apart: _Apart):
    """Bind ``loops`` without fusing two run-time extents: the innermost loops, up to and including
    the first of run-time extent, fused over blockIdx.x/threadIdx.x, and each loop outside them on
    blockIdx.y and blockIdx.z. A thread's indices are then each one loop's (TVM cannot bound a
    register buffer's region through the division of a fused index by a product of run-time
    extents: a LayerNorm over channels of a ``[2, H + 3, W + 4, C]`` map); returns the thread
    loop. Raises :class:`_NotSplittable` when more than two loops would be left outside, or a grid
    axis could pass :data:`MAX_GROUPS` within the dims' ranges."""
    from ..core.dims import largest_value

    extents = [sch.get(loop).extent for loop in loops]
    start = len(loops)
    for i in reversed(range(len(loops))):
        start = i
        if not isinstance(extents[i], tirx.IntImm):
            break
    inner, outer = loops[start:], loops[:start]
    if len(outer) > 2:
        raise _NotSplittable()
    for loop in outer:
        top = largest_value(sch.get(loop).extent, apart.ranges)
        if top is None or top > MAX_GROUPS:
            raise _NotSplittable()
    fused = sch.fuse(*inner) if len(inner) > 1 else inner[0]
    top = largest_value(sch.get(fused).extent, apart.ranges)
    if top is None or -(-top // threads) > MAX_GROUPS:
        raise _NotSplittable()
    bx, tx = sch.split(fused, [None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    for loop, axis in zip(reversed(outer), ("blockIdx.y", "blockIdx.z")):
        sch.bind(loop, axis)
    apart.ranks.add(len(outer))
    return tx


def _schedule_block(sch: s_tir.Schedule, block, threads: int, apart: Optional[_Apart] = None) -> None:
    lane = _lane_loop(sch, block)
    reduction = not _is_spatial(sch, block)
    if lane is not None and reduction:
        if apart is not None:
            raise _NotSplittable()
        # accumulate in registers, write whole texels: the write-back block owns the threads
        write_back = sch.cache_write(block, 0, "local")
        tx = _schedule_spatial(sch, write_back, threads)
        sch.compute_at(block, tx)
        _lanes_innermost(sch, block)
        return tx
    return _schedule_spatial(sch, block, threads, apart)


def _lanes_innermost(sch: s_tir.Schedule, block) -> None:
    """Inside the thread, run the reduction loops outside the 4-lane loop (unrolled): each texel
    the reduction reads is fetched once for the four lanes, not once per lane (a texture fetch is
    not a cached scalar load)."""
    loops = sch.get_loops(block)
    kinds = _loop_kinds(sch, block)
    inner = [(lp, k) for lp, k in zip(loops, kinds) if sch.get(lp).kind != tirx.ForKind.THREAD_BINDING]
    spatial = [lp for lp, k in inner if k == "S"]
    reduce = [lp for lp, k in inner if k == "R"]
    if len(spatial) != 1 or not reduce or int(getattr(sch.get(spatial[0]).extent, "value", 0)) != 4:
        return
    try:
        sch.reorder(*reduce, spatial[0])
        sch.unroll(spatial[0])
    except Exception:  # the loop nest cannot be reordered: keep the order it had
        return


def _schedule_spatial(sch: s_tir.Schedule, block, threads: int, apart: Optional[_Apart] = None):
    loops = sch.get_loops(block)
    if not loops:
        loops = [sch.add_unit_loop(block)]
    kinds = _loop_kinds(sch, block)
    lane = _lane_loop(sch, block)
    lane_stmt = sch.get(lane) if lane is not None else None
    spatial = [lp for lp, k in zip(loops, kinds) if k == "S" and (lane_stmt is None or not sch.get(lp).same_as(lane_stmt))]
    inner = [lp for lp, k in zip(loops, kinds) if k != "S"]
    order = spatial + ([lane] if lane is not None else []) + inner
    if len(order) > 1:
        sch.reorder(*order)
    if not spatial:  # (a unit loop above all the others: a whole reduction to one value stays inside the thread)
        spatial = [sch.add_unit_loop(sch.get_loops(block)[0])]
    if apart is not None:
        if lane is not None:
            raise _NotSplittable()
        return _bind_apart(sch, spatial, threads, apart)
    tx = _bind(sch, spatial, threads)
    if lane is not None:
        sch.vectorize(lane)
    return tx


def schedule_safe(func: tirx.PrimFunc, threads: int = 64) -> tirx.PrimFunc:
    """``func`` scheduled by the safe schedule (module docstring). Top-level blocks with nested
    blocks (adaptive pools with uneven windows) get their outer spatial loops bound; what is nested
    runs inside the thread as it is. A reduction placed in registers whose per-thread region TVM
    cannot bound (fused run-time extents: its buffer compaction fails) is placed again with the
    loops bound apart (:func:`_bind_apart`), and failing that runs as its own launch; so is a
    kernel of run-time extents whose fused loops TVM's index analysis cannot split (a pad then a
    transpose over a run-time batch and length). A kernel TVM cannot compact any way is refused here (the driver then names it), not left to fail inside
    TVM's lowering."""
    import tvm

    try:
        scheduled = _schedule_safe(func, threads, registers=True)
        if not run_time_size(func) or _compacts(scheduled):
            return scheduled
    except tvm.error.InternalError:  # (fused run-time extents TVM's index analysis cannot divide: B * (T + 3) * 8 by (T + 3) * 8)
        if not run_time_size(func):
            raise
    ranges = kernel_ranges(func)
    if ranges:  # (the loops bound apart: each index one loop's)
        try:
            scheduled = _schedule_safe(func, threads, registers=True, apart=_Apart(ranges))
            if _compacts(scheduled):
                return scheduled
        except _NotSplittable:
            pass
    scheduled = _schedule_safe(func, threads, registers=False)
    if not _compacts(scheduled):
        from ..core.errors import UnsupportedError

        raise UnsupportedError("TVM's buffer compaction cannot bound the regions of its intermediates at run-time sizes")
    return scheduled


def _compacts(func: tirx.PrimFunc) -> bool:
    """Whether TVM's lowering up to its buffer compaction accepts ``func`` (the passes the
    verifier and the TIR pipeline run: :data:`relax_vk.schedules.verify.COMPACTING`)."""
    return compacted(func) is not None


def _schedule_safe(func: tirx.PrimFunc, threads: int, registers: bool, apart: Optional[_Apart] = None) -> tirx.PrimFunc:
    sch = new_schedule(func)
    root = sch.get_sblock("root")
    outputs = list(func.params)  # blocks write parameters only when they are the kernel's outputs
    changed = True
    while changed:
        changed = False
        for block in sch.get_child_blocks(root):
            if _writes_output(sch, block, outputs) or not _is_spatial(sch, block):
                continue
            try:
                sch.compute_inline(block)
            except Exception:  # not inlinable (e.g. read by an output in another shape): keep it
                continue
            changed = True
            break
    placed = set()
    for block in reversed(sch.get_child_blocks(root)):  # consumers first
        name = sch.get(block).name_hint
        if name in placed:
            continue
        tx = _schedule_block(sch, block, threads, apart)
        placed.add(name)
        # a reduction read only by this block computes per thread, in registers (no workspace)
        for producer in sch.get_producers(block):
            pname = sch.get(producer).name_hint
            if pname in placed or _is_spatial(sch, producer) or _writes_output(sch, producer, outputs):
                continue
            if not registers or len(sch.get_consumers(producer)) != 1 or tx is None:
                continue
            try:
                sch.compute_at(producer, tx)
                for i in range(len(sch.get(producer).writes)):  # (every output of a tuple reduction: argmax's index and value)
                    sch.set_scope(producer, i, "local")
            except Exception:  # not placeable under this thread (e.g. reads another layout): own launch
                continue
            placed.add(pname)
    if apart is not None and len(apart.ranks) > 1:
        raise _NotSplittable()
    return sch.mod["main"].with_attrs(func.attrs) if func.attrs is not None else sch.mod["main"]
