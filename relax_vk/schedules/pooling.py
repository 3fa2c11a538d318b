"""A schedule for NCHW4c pooling kernels (max, avg, adaptive avg; with fused pads and epilogues).

TVM's adreno pool rule accumulates four texel lanes into a one-element local buffer (wrong numbers
on pocl) and its fallback rule fails on pools that write textures. This schedule: inline the pad,
let the final block (the pool, or its fused epilogue) own the threads -- spatial loops fused and
bound to ``blockIdx.x``/``threadIdx.x``, the 4-lane texel loop vectorised -- and compute the
reduction per thread into a 4-lane local accumulator. Windows of :data:`GLOBAL_WINDOW` texels or
more (global pools, a squeeze-excite's mean) take a workgroup per output texel instead, the window
split over its threads: one thread summing a 6x80 map serially took 120 us (OpenCL) to 545 us
(Vulkan) on an H100 for PP-OCR's recognizer.
"""

from __future__ import annotations

import math
from typing import Optional

from tvm import tirx

from .cross_thread import texel_per_workgroup
from .register_tile import loop_extent
from .unchecked import new_schedule

THREADS = 64
GLOBAL_WINDOW = 64  # windows of at least this many texels are reduced across a workgroup's threads
WINDOW_THREADS = 64  # (cross_thread.texel_per_workgroup)
#: a grid of fewer workgroups than this reduces each window over up to FEW_OUTPUT_THREADS threads:
#: EfficientNet's first squeeze-excite mean (two output texels, 112x112 texels each) ran two
#: workgroups of 64 threads, each thread summing 196 texels in turn: 0.141 ms on an H200's Vulkan
FEW_OUTPUTS = 64
FEW_OUTPUT_THREADS = 256


def _is_pool_reduction(sch, block) -> bool:
    stmt = sch.get(block)
    kinds = [iv.iter_type for iv in stmt.iter_vars]
    spatial = [k for k in kinds if k == tirx.IterVar.DataPar]
    reduce = [k for k in kinds if k == tirx.IterVar.CommReduce]
    if len(spatial) != 5 or len(reduce) != 2 or len(stmt.writes) != 1:
        return False
    lanes = stmt.iter_vars[4].dom.extent
    return int(getattr(lanes, "value", -1)) == 4


def window_threads(outputs: Optional[int], window: int, max_threads: int) -> int:
    """Threads of the workgroup that reduces one output texel's ``window`` texels:
    :data:`WINDOW_THREADS`, or up to :data:`FEW_OUTPUT_THREADS` (within ``max_threads`` and the
    window) when fewer than :data:`FEW_OUTPUTS` workgroups make the grid."""
    if outputs is not None and outputs < FEW_OUTPUTS and window >= 2 * FEW_OUTPUT_THREADS:
        return max(WINDOW_THREADS, min(FEW_OUTPUT_THREADS, max_threads))
    return WINDOW_THREADS


def _texels(sch, loops) -> Optional[int]:
    """The product of ``loops``' constant extents, None if one is not a constant."""
    extents = [loop_extent(sch.get(loop)) for loop in loops]
    return None if min(extents) < 0 else math.prod(extents)


def schedule_pool(func: tirx.PrimFunc, max_threads: int = WINDOW_THREADS) -> Optional[tirx.PrimFunc]:
    """The scheduled pool kernel, or None when ``func`` is not one (``max_threads``: the most a
    workgroup may have on the target)."""
    sch = new_schedule(func)
    try:
        blocks = sch.get_child_blocks(sch.get_sblock("root"))
    except Exception:
        return None
    reductions = [b for b in blocks if _is_pool_reduction(sch, b)]
    if len(reductions) != 1:
        return None
    red = reductions[0]
    index = [sch.get(b).same_as(sch.get(red)) for b in blocks].index(True)
    for b in blocks[:index]:  # pads and other producers
        sch.compute_inline(b)
    after = blocks[index + 1 :]
    for b in after[:-1]:
        sch.compute_inline(b)
    if after:
        out = after[-1]
        sch.set_scope(red, 0, "local")
    else:
        out = sch.cache_write(red, 0, "local")
    loops = sch.get_loops(out)
    if len(loops) != 5:
        return None
    window = _window(sch, red)
    if window is not None and window >= GLOBAL_WINDOW:  # (a workgroup per output texel)
        texel_per_workgroup(sch, red, out, 2, window_threads(_texels(sch, loops[:4]), window, max_threads))
        return sch.mod["main"].with_attrs(func.attrs).with_attr("tirx.is_scheduled", True)
    fused = sch.fuse(*loops[:4])
    bx, tx = sch.split(fused, [None, THREADS])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(loops[4])
    sch.compute_at(red, tx)
    return sch.mod["main"].with_attrs(func.attrs).with_attr("tirx.is_scheduled", True)


def _window(sch, red) -> Optional[int]:
    """Texels in one pooling window (the product of the reduction's extents), None if symbolic."""
    size = 1
    for iv in sch.get(red).iter_vars:
        if iv.iter_type == tirx.IterVar.CommReduce:
            extent = getattr(iv.dom.extent, "value", None)
            if extent is None:
                return None
            size *= int(extent)
    return size

