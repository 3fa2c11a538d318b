"""Pieces the register-tiled schedules share (the NCHW4c conv, the token matmul and the conv of a
run-time size).

Each keeps a thread's output tile in registers: the reduction accumulates into a local buffer and
the fused elementwise epilogue is folded into the write-back (:func:`accumulate`); the texture
schedules' write-back and accumulator initialisation store whole texels (innermost lane loop
vectorised, the tile loops unrolled so every register index is a constant).
"""

from __future__ import annotations

from typing import Sequence

from tvm import s_tir


def loop_extent(loop_stmt) -> int:
    """A loop's constant extent, or -1 when it is not a constant."""
    return int(getattr(loop_stmt.extent, "value", -1))


def unroll_constant(sch: s_tir.Schedule, loops: Sequence) -> None:
    """Unroll each of ``loops`` whose extent is a constant; a loop whose extent depends on the
    thread's position stays serial (TVM cannot unroll it: "Cannot unroll non-constant loop").
    Such loops come from cache stages whose region TVM bounds per thread, e.g. the input rows of a
    grouped conv whose output-channel tile straddles two groups."""
    for lp in loops:
        if loop_extent(sch.get(lp)) >= 0:
            sch.unroll(lp)


def read_index(sch: s_tir.Schedule, block, buffer) -> int:
    """The position of ``buffer`` among ``block``'s reads (what ``cache_read`` and ``reindex`` take)."""
    return [r.source.same_as(buffer) for r in sch.get(block).reads].index(True)


def loop_depth(sch: s_tir.Schedule, block, loop) -> int:
    """The loops around ``block`` down to and including ``loop``."""
    return [sch.get(lp).same_as(sch.get(loop)) for lp in sch.get_loops(block)].index(True) + 1


def texel_loops(sch: s_tir.Schedule, block, bound: int) -> None:
    """Vectorise ``block``'s innermost (lane) loop and unroll the loops between it and the first
    ``bound`` (thread-bound) loops."""
    loops = sch.get_loops(block)
    sch.vectorize(loops[-1])
    unroll_constant(sch, loops[bound:-1])


def cache_texels(sch: s_tir.Schedule, block, buffer, loop):
    """A private ("local") copy of what ``block`` reads of ``buffer`` under ``loop``, loaded there
    as whole texels (:func:`texel_loops`); returns the cache block."""
    cache = sch.cache_read(block, read_index(sch, block, buffer), "local")
    sch.compute_at(cache, loop, preserve_unit_loops=True)
    texel_loops(sch, cache, loop_depth(sch, block, loop))
    return cache


def accumulate(sch: s_tir.Schedule, block, thread_loop, epilogue: Sequence, reduce_loop) -> tuple:
    """Give reduction ``block`` a local accumulator written back under ``thread_loop``, with the
    ``epilogue`` blocks (a DAG: hard-swish reads its input twice) collapsed into their last block
    and folded into the write-back, and its initialisation split off at ``reduce_loop``. Returns
    ``(write-back block, init block)``."""
    acc = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(acc, thread_loop, preserve_unit_loops=True)
    for b in epilogue[:-1]:
        sch.compute_inline(b)
    if epilogue:
        sch.reverse_compute_inline(epilogue[-1])
    return acc, sch.decompose_reduction(block, reduce_loop)


def accumulate_in_registers(sch: s_tir.Schedule, block, thread_loop, epilogue: Sequence, reduce_loop, bound: int = 3):
    """:func:`accumulate`, the write-back and the initialisation storing texels
    (:func:`texel_loops` past the ``bound`` thread-bound loops). Returns ``(write-back block, init
    block)``."""
    acc, init = accumulate(sch, block, thread_loop, epilogue, reduce_loop)
    texel_loops(sch, acc, bound)
    texel_loops(sch, init, bound)
    return acc, init
