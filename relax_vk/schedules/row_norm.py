"""relax_vk's schedule for LayerNorm and softmax over the channels of token tensors: rows side
by side in a workgroup, the statistics and the result in one kernel.

For the kernels of :func:`relax_vk.legalize.tokens.token_layer_norm` and
:func:`~relax_vk.legalize.tokens.token_softmax`: one or more row-statistics blocks
(``token_norm_*``, reductions over the ``C/4`` texels of each row of a ``(1, C/4, 1, M, 4)``
tensor, each possibly reading the one before) and the normalized result (``token_layer_norm`` /
``token_softmax``), with elementwise producers fused before (inlined into every read) and
elementwise consumers after (inlined into the result's write). Here a workgroup takes ``rows``
consecutive rows (``threadIdx.x``) and splits each row's texels over ``splits`` threads
(``threadIdx.y``; thread ``t`` takes texels ``t, t + splits, ...``):

* threads side by side read side-by-side rows, which are side by side in memory (the tensor's
  ``M`` axis is its innermost axis but the lanes; in a texture, the image's x): a warp's loads of a
  texel column are one contiguous run, where one workgroup per row (the schedule this replaced)
  read a row's texels ``M`` texels apart, every thread its own cache line;
* each statistic is a partial result per thread (its texels read whole, one vector load, the
  lanes combined in registers) written to workgroup memory (``rfactor``), then summed by every
  thread of the row for itself from there (``splits`` reads after one barrier, no cross-thread
  reduction primitive: TVM's, with the reduced threads on ``threadIdx.y``, gave wrong numbers on
  the H100);
* the row tensors that every statistic and the result read (the normalized tensor, or the
  operands of a fused producer) are staged in workgroup memory first when the workgroup's rows fit
  :data:`STAGE_BYTES`: each texel is read from the texture or buffer once instead of once per
  statistic and once more for the result (Swin's LayerNorms and softmaxes on the H100's OpenCL
  images: 222 -> 172 us per run);
* the result writes its texels whole.

Rows whose texel count has no divisor that leaves each thread at most
:data:`MAX_TEXELS_PER_SPLIT` texels (a prime count: a 6625-class softmax has 1657 texels) take one
workgroup each instead, their texels split over up to :data:`MAX_THREADS` threads on
``threadIdx.x`` and every statistic combined by TVM's cross-thread reduction (sound on
``threadIdx.x``).

One dispatch instead of the four of the decomposed form, no statistics buffers between kernels.
Kernels of any other shape are declined.
"""

from __future__ import annotations

from typing import Optional, Tuple

import tvm
from tvm import s_tir, tirx

from ..core.scope import TEXEL_LANES as LANES
from .channel_reduce import reduce_across_threads, threads_for
from .register_tile import loop_extent
from .unchecked import new_schedule

STAT_PREFIX = "token_norm_"
RESULTS = ("token_layer_norm", "token_softmax")
MAX_THREADS = 256
MAX_ROWS = 32
MAX_SPLITS = 32
MIN_GROUPS = 128  # workgroups a kernel keeps before it puts rows side by side (an H100 has 132 SMs)
MAX_TEXELS_PER_SPLIT = 16  # beyond this a row goes to one workgroup of up to MAX_THREADS threads
STAGE_BYTES = 16 * 1024  # workgroup memory a kernel may stage its rows in (devices have 32 KiB or more)


def schedule_row_norm(func: tirx.PrimFunc, max_threads: int = MAX_THREADS) -> Optional[tirx.PrimFunc]:
    """``func`` scheduled (module docstring), or None when it is not a row-normalization kernel."""
    sch = new_schedule(func)
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
    rows, splits = workgroup(extents[1], extents[3], max_threads)
    if extents[1] > splits * MAX_TEXELS_PER_SPLIT:  # (no divisor of the row's texels shares them out)
        return _row_per_workgroup(sch, out, [blocks[i] for i in stats], extents[1], max_threads, func.attrs)
    sch.reorder(n, h, row, c, lane)
    bx, tx = sch.split(sch.fuse(n, h, row), [None, rows])
    c_o, ty = sch.split(c, [None, splits])
    sch.reorder(ty, tx, c_o, lane)
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(lane)  # whole texels written (a texture's stores must be)
    staged = _stage_rows(sch, out, [blocks[i] for i in stats], rows, extents[1], extents[3])
    for i in reversed(stats):  # (each placed before its consumers, already in the row's body)
        _partials_then_total(sch, blocks[i], bx, splits)
    for cache in staged:
        _load_rows(sch, cache, bx, splits)
    return sch.mod["main"].with_attrs(func.attrs) if func.attrs is not None else sch.mod["main"]


def _row_per_workgroup(sch: s_tir.Schedule, out, stats, texels: int, max_threads: int, attrs) -> tirx.PrimFunc:
    """One workgroup per row, its texels split over up to ``max_threads`` threads on
    ``threadIdx.x`` (thread ``t`` takes texels ``t, t + threads, ...``, the last round partial),
    every statistic combined across them by TVM's cross-thread reduction into workgroup memory:
    for rows whose texel count has no divisor that leaves each thread a few texels (a prime, e.g.
    the 1657 texels of a 6625-class softmax, which the split schedule would give one thread)."""
    threads = threads_for(texels, max_threads)
    n, c, h, row, lane = sch.get_loops(out)
    sch.reorder(n, h, row, c, lane)
    bx = sch.fuse(n, h, row)
    c_o, c_i = sch.split(c, [None, threads])
    sch.reorder(c_i, c_o, lane)
    sch.bind(bx, "blockIdx.x")
    sch.bind(c_i, "threadIdx.x")
    sch.vectorize(lane)  # whole texels written (a texture's stores must be)
    for block in reversed(stats):  # (compute_at places each before its consumers in the row's body)
        sch.set_scope(block, 0, "shared")
        sch.compute_at(block, bx, preserve_unit_loops=True)
        reduce_across_threads(sch, block, sch.get_loops(block)[-1], threads)
    return sch.mod["main"].with_attrs(attrs) if attrs is not None else sch.mod["main"]


def _stage_rows(sch: s_tir.Schedule, out, stats, rows: int, texels: int, extent: int) -> list:
    """Cache the row tensors that the statistics and the result all read (the tensor the rows
    are normalized from, or the operands of a fused producer) in workgroup memory, when the
    workgroup's rows of them fit :data:`STAGE_BYTES`: read once from memory instead of once per
    statistic and once for the result. Returns the cache blocks (still at the root)."""
    shape = [1, texels, 1, extent, LANES]
    reads = sch.get(out).reads
    found = [i for i, r in enumerate(reads) if [int(d) for d in r.source.shape] == shape]
    names = [reads[i].source.name for i in found]
    readers = [b for b in stats if any(r.source.name in names for r in sch.get(b).reads)]
    size = sum(rows * texels * LANES * tvm.DataType(str(reads[i].source.dtype)).bits // 8 for i in found)
    if not found or len(readers) != len(stats) or size > STAGE_BYTES:
        return []
    return [sch.cache_read(out, index, "shared", consumer_blocks=[*stats, out]) for index in reversed(found)]


def _load_rows(sch: s_tir.Schedule, cache, bx, splits: int) -> None:
    """Compute a staging block at ``bx``: the workgroup's rows loaded by the threads that read
    them (rows on ``threadIdx.x``, a row's texels split over ``threadIdx.y`` as the statistics
    split them), whole texels."""
    sch.compute_at(cache, bx, preserve_unit_loops=True)
    n, c, h, row, lane = sch.get_loops(cache)[-5:]
    c_o, ty = sch.split(c, [None, splits])
    sch.reorder(ty, row, c_o, lane)
    sch.bind(ty, "threadIdx.y")
    sch.bind(row, "threadIdx.x")
    sch.vectorize(lane)


def workgroup(texels: int, rows: int, max_threads: int = MAX_THREADS) -> Tuple[int, int]:
    """``(rows, splits)`` of a workgroup for rows of ``texels`` texels. ``splits`` divides
    ``texels`` (TVM's ``compute_at`` drops the bounds check of a partial split from a factored
    reduction) and leaves each thread the nearest to four texels (at most 32 splits); as many
    rows beside them as the workgroup holds (a power of two, at most 32) while the kernel keeps
    :data:`MIN_GROUPS` workgroups (one row per workgroup below that: a ViT's 197 tokens ran 2x
    slower as 25 workgroups of 8 rows than as 197 of one on the H100)."""
    most = min(MAX_SPLITS, max_threads)
    splits = min((d for d in range(1, most + 1) if texels % d == 0), key=lambda d: (abs(texels / d - 4), d))
    room = 1 << ((max_threads // splits).bit_length() - 1)  # (a power of two)
    spread = 1 << (max(1, rows // MIN_GROUPS).bit_length() - 1)  # (MIN_GROUPS workgroups or more)
    return min(room, MAX_ROWS, spread), splits


def _partials_then_total(sch: s_tir.Schedule, block, bx, splits: int) -> None:
    """Compute the row statistic ``block`` at ``bx``: each thread's partial over its texels into
    workgroup memory, then each thread's own total of its row's partials (in registers)."""
    k_o, k_s = sch.split(sch.get_loops(block)[-1], [None, splits])
    partial = sch.rfactor(k_s, 0)
    sch.set_scope(partial, 0, "shared")
    sch.set_scope(block, 0, "local")
    sch.compute_at(block, bx, preserve_unit_loops=True)
    sch.compute_at(partial, bx, preserve_unit_loops=True)
    # partial: bx, split, (n, c, h), row, (lane), texel; total: bx, split (reduced), (n, c, h), row, (lane)
    loops = sch.get_loops(partial)
    split, row, texel = loops[1], loops[5], loops[7]
    sch.reorder(split, row, texel)
    sch.bind(split, "threadIdx.y")
    sch.bind(row, "threadIdx.x")
    reads = sch.get(partial).reads
    for index in reversed([i for i, r in enumerate(reads) if len(r.source.shape) == 5 and int(r.source.shape[-1]) == LANES]):
        cache = sch.cache_read(partial, index, "local", consumer_blocks=[partial])  # a texel whole
        sch.compute_at(cache, texel, preserve_unit_loops=True)
        sch.vectorize(sch.get_loops(cache)[-1])
    local = sch.cache_write(partial, 0, "local")  # (accumulated in a register, stored once)
    sch.reverse_compute_at(local, row, preserve_unit_loops=True)
    sch.decompose_reduction(partial, texel)
    loops = sch.get_loops(block)
    split, row = loops[1], loops[5]
    sch.reorder(row, split)
    sch.bind(row, "threadIdx.x")


def row_norm_rule(func: tirx.PrimFunc, target) -> Optional[tirx.PrimFunc]:
    """The schedule rule (:func:`schedule_row_norm`, at most the target's threads)."""
    from .apply import max_threads

    return schedule_row_norm(func, max_threads(target))
