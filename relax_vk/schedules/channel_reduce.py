"""relax_vk's schedule for channel statistics of token tensors: one workgroup per row.

For the ``token_channel_{sum,max,min}`` block of
:func:`relax_vk.legalize.tokens.token_channel_reduce` (LayerNorm's and softmax's statistics over
the ``C/4`` texels of each row of a ``(1, C/4, 1, M, 4)`` tensor), with elementwise producers
fused before it (the square of a variance; a kernel with consumers fused after the reduction is
left to the safe schedule). The safe schedule
gives each row one thread that walks all its texels: ``M`` threads (196 for a ViT's LayerNorm, on
a GPU that wants tens of thousands) each doing ``C/4`` dependent loads. Here:

* each row gets a workgroup of ``threads`` (a power of two up to 32, one warp/subgroup on most
  GPUs) that split its texels (thread ``t`` takes texels ``t, t + threads, ...``), each texel
  fetched whole (one vector load, its four lanes combined in registers);
* the partial results are combined across the workgroup by TVM's cross-thread reduction
  (workgroup memory and barriers in OpenCL and WGSL).

Rows with fewer than :data:`MIN_TEXELS` texels are left to the safe schedule (one thread per row
is then the better split).
"""

from __future__ import annotations

from typing import Optional

from tvm import s_tir, tirx

from ..core.scope import TEXEL_LANES as LANES
from .register_tile import loop_extent
from .unchecked import new_schedule

PREFIX = "token_channel_"
MIN_TEXELS = 8
MAX_THREADS = 32


def threads_for(texels: int, most: int = MAX_THREADS) -> int:
    """Threads per row: the smallest power of two covering ``texels``, at most ``most``."""
    threads = 1
    while threads < min(texels, most):
        threads *= 2
    return min(threads, most)


def schedule_channel_reduce(func: tirx.PrimFunc, max_threads: int = MAX_THREADS) -> Optional[tirx.PrimFunc]:
    """``func`` scheduled (module docstring), or None when it is not a channel-statistics kernel
    this schedule takes."""
    sch = new_schedule(func)
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    names = [sch.get(b).name_hint for b in blocks]
    found = [i for i, name in enumerate(names) if name.startswith(PREFIX)]
    if len(found) != 1:
        return None
    index = found[0]
    if index != len(blocks) - 1:
        return None  # (TVM fuses elementwise producers into a reduction, not consumers)
    red, prologue = blocks[index], blocks[:index]
    for block in prologue:  # elementwise producers (a variance's square) folded into the reads
        sch.compute_inline(block)
    loops = sch.get_loops(red)
    extents = [loop_extent(sch.get(lp)) for lp in loops]
    if len(loops) != 6 or extents[:3] != [1, 1, 1] or extents[4] != 1 or extents[5] < MIN_TEXELS:
        return None
    n, c, h, row, lane, k4 = loops
    reduce_across_threads(sch, red, k4, threads_for(extents[5], min(MAX_THREADS, max_threads)))
    sch.bind(sch.fuse(n, c, h, row, lane), "blockIdx.x")
    return sch.mod["main"].with_attrs(func.attrs) if func.attrs is not None else sch.mod["main"]


def reduce_across_threads(sch: s_tir.Schedule, block, k4, threads: int) -> None:
    """Split a row reduction's texel loop ``k4`` over ``threads`` (thread ``t`` takes texels
    ``t, t + threads, ...``; TVM combines the partial results across them) and read each texel of
    a packed token operand once, whole, into registers (the reduction combines its lanes)."""
    k_o, k_i = sch.split(k4, [None, threads])
    sch.reorder(k_i, k_o)
    sch.bind(k_i, "threadIdx.x")
    reads = sch.get(block).reads
    for index in reversed([i for i, r in enumerate(reads) if len(r.source.shape) == 5 and int(r.source.shape[-1]) == LANES]):
        cache = sch.cache_read(block, index, "local", consumer_blocks=[block])
        sch.compute_at(cache, k_o, preserve_unit_loops=True)
        sch.vectorize(sch.get_loops(cache)[-1])


def channel_reduce_rule(func: tirx.PrimFunc, target) -> Optional[tirx.PrimFunc]:
    """The schedule rule (:func:`schedule_channel_reduce`, at most the target's threads)."""
    from .apply import max_threads

    return schedule_channel_reduce(func, max_threads(target))
