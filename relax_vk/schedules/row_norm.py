"""relax_vk's schedule for LayerNorm and softmax over the channels of token tensors: one
workgroup per row, the statistics and the result in one kernel.

For the kernels of :func:`relax_vk.legalize.tokens.token_layer_norm` and
:func:`~relax_vk.legalize.tokens.token_softmax`: one or more row-statistics blocks
(``token_norm_*``, reductions over the ``C/4`` texels of each row of a ``(1, C/4, 1, M, 4)``
tensor, each possibly reading the one before) and the normalized result (``token_layer_norm`` /
``token_softmax``), with elementwise producers fused before (inlined into every read) and
elementwise consumers after (inlined into the result's write). Here:

* each row gets a workgroup of ``threads`` (a power of two up to 32) that split its texels, as in
  :mod:`.channel_reduce`; every statistic is combined across the workgroup (TVM's cross-thread
  reduction) into workgroup memory, where the next statistic and the result read it;
* the statistics read each texel whole (one vector load into registers, its four lanes combined
  in one expression); the result reads its texels again (from the cache: one row is a few KiB)
  and writes them whole (a vectorized lane loop).

One dispatch instead of the four of the decomposed form (two statistics kernels and two
elementwise kernels), and no statistics buffers between kernels. Kernels of any other shape are
declined.

Tried and dropped: several consecutive rows per workgroup (rows on ``threadIdx.x``, a row's
threads on ``threadIdx.y``, so that threads side by side read side-by-side texels). Its numbers
were right on pocl and lavapipe and wrong on the H100 (both APIs, both memory kinds): TVM's
cross-thread reduction over ``threadIdx.y`` within ``threadIdx.x`` groups is not sound there.
The reduction stays on ``threadIdx.x``, one row per workgroup.
"""

from __future__ import annotations

from typing import Optional

from tvm import s_tir, tirx

from ..core.scope import TEXEL_LANES as LANES
from .channel_reduce import MAX_THREADS, reduce_across_threads, threads_for
from .register_tile import loop_extent

STAT_PREFIX = "token_norm_"
RESULTS = ("token_layer_norm", "token_softmax")


def schedule_row_norm(func: tirx.PrimFunc, max_threads: int = MAX_THREADS) -> Optional[tirx.PrimFunc]:
    """``func`` scheduled (module docstring), or None when it is not a row-normalization kernel."""
    sch = s_tir.Schedule(func)
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    names = [sch.get(b).name_hint for b in blocks]
    results = [i for i, name in enumerate(names) if name in RESULTS]
    stats = [i for i, name in enumerate(names) if name.startswith(STAT_PREFIX)]
    if len(results) != 1 or not stats or max(stats) > results[0]:
        return None
    at = results[0]
    consumers = []
    for i, block in enumerate(blocks):  # elementwise producers (also ones recorded after the
        if i in stats or i == at:  # result, e.g. a ``full`` a consumer reads): recomputed in reads
            continue
        try:
            sch.compute_inline(block)
        except s_tir.ScheduleError:
            if i < at:
                return None
            consumers.append(block)
    for block in reversed(consumers):  # elementwise consumers: into the result's write
        sch.reverse_compute_inline(block)
    out = blocks[at]
    loops = sch.get_loops(out)
    extents = [loop_extent(sch.get(lp)) for lp in loops]
    if len(loops) != 5 or extents[0] != 1 or extents[2] != 1 or extents[4] != LANES or None in extents:
        return None
    n, c, h, row, lane = loops
    threads = threads_for(extents[1], min(MAX_THREADS, max_threads))
    sch.reorder(n, h, row, c, lane)
    bx = sch.fuse(n, h, row)
    c_o, c_i = sch.split(c, [None, threads])
    sch.reorder(c_i, c_o, lane)
    sch.bind(bx, "blockIdx.x")
    sch.bind(c_i, "threadIdx.x")
    sch.vectorize(lane)  # whole texels written (a texture's stores must be)
    for i in reversed(stats):  # (compute_at places each before its consumers in the row's body)
        block = blocks[i]
        sch.set_scope(block, 0, "shared")
        sch.compute_at(block, bx, preserve_unit_loops=True)
        reduce_across_threads(sch, block, sch.get_loops(block)[-1], threads)
    return sch.mod["main"].with_attrs(func.attrs) if func.attrs is not None else sch.mod["main"]


def row_norm_rule(func: tirx.PrimFunc, target) -> Optional[tirx.PrimFunc]:
    """The schedule rule (:func:`schedule_row_norm`, at most the target's threads)."""
    from .apply import max_threads

    return schedule_row_norm(func, max_threads(target))
