"""A reduction spread over a workgroup's threads, one output texel per workgroup: what the pool
schedule does for global pools and the conv schedule for convs with few outputs and long sums.

The output block's spatial loops are fused onto ``blockIdx.x`` and its lane loop vectorised (one
texel stored whole, with any fused epilogue); the reduction block is computed there, its
reduction loops fused and split over ``threadIdx.x`` (thread ``t`` takes terms ``t, t + threads,
...``), and TVM's cross-thread reduction combines the partial sums into workgroup memory, lane by
lane (its reduction loops must be the innermost, so the lane loop stays outside them). TVM guards
the final store so that one thread writes it.
"""

from __future__ import annotations

from tvm import s_tir


def texel_per_workgroup(sch: s_tir.Schedule, reduction, out, reduce_loops: int, threads: int) -> None:
    """Schedule ``reduction`` (whose last ``reduce_loops`` loops reduce) for ``out`` (the block
    that stores the texels: the reduction's fused epilogue, or its write-back) as the module
    docstring says."""
    loops = sch.get_loops(out)
    bx = sch.fuse(*loops[:-1])
    sch.bind(bx, "blockIdx.x")
    sch.vectorize(loops[-1])
    sch.set_scope(reduction, 0, "shared")
    sch.compute_at(reduction, bx, preserve_unit_loops=True)
    inner = sch.get_loops(reduction)
    lane, reduce = inner[-reduce_loops - 1], inner[-reduce_loops:]
    r_o, r_i = sch.split(sch.fuse(*reduce), [None, threads])
    sch.reorder(lane, r_i, r_o)
    sch.bind(r_i, "threadIdx.x")
