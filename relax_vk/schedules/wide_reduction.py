"""Long reductions to few outputs (a whole-tensor max, a ``ReduceMin`` over all but the batch, the
min and max ``DynamicQuantizeLinear`` takes of an activation): a workgroup an output, its terms
split over the workgroup's threads.

TVM's dlight ``gpu.Reduction`` takes sums only, and ``GeneralReduction`` declines single
reductions with no spatial work beside them, so a max or min over a whole tensor fell to the safe
schedule: one thread per output walking every term (a ``ReduceMax`` over 1x64x40x40 ran 102,400
steps in one invocation, which lavapipe refuses: llvmpipe ends an invocation's loops after 65,535
iterations, :mod:`relax_vk.codegen.wgsl`; on a GPU one thread of thousands does all the work).

Here the reduction's output axes are fused onto ``blockIdx.x`` and its reduction loops fused and
split over ``threadIdx.x`` (thread ``t`` takes terms ``t, t + threads, ...``: adjacent threads read
adjacent elements); TVM's cross-thread reduction combines the partial results with the block's own
reducer (sum, max, min: any that TVM recognises) in workgroup memory. An injective epilogue (a
cast, a scale) is computed by the workgroup after the reduction. It takes kernels of static size
with one reduction block of at least :data:`MIN_TERMS` terms and at most :data:`MAX_OUTPUTS`
outputs; any other kernel is declined.
"""

from __future__ import annotations

import math
from typing import Optional

from tvm import s_tir, tirx

from ..core.ir_utils import run_time_size
from .analysis import _blocks, _is_reduction
from .unchecked import new_schedule

MIN_TERMS = 256  # a shorter sum stays a thread's loop
MAX_OUTPUTS = 4096  # more outputs already give the GPU a thread each to run
THREADS = 256


def _extent(iv) -> Optional[int]:
    return int(iv.dom.extent) if isinstance(iv.dom.extent, tirx.IntImm) else None


def wide_reduction_rule(func: tirx.PrimFunc, target) -> Optional[tirx.PrimFunc]:
    """``func`` scheduled as the module docstring says, or None."""
    from .apply import max_threads

    if run_time_size(func):
        return None
    reductions = [b for b in _blocks(func) if _is_reduction(b)]
    if len(reductions) != 1:
        return None
    ivs = reductions[0].iter_vars
    extents = [_extent(iv) for iv in ivs]
    if None in extents:
        return None
    terms = math.prod(e for iv, e in zip(ivs, extents) if iv.iter_type == tirx.IterVar.CommReduce)
    outputs = math.prod(e for iv, e in zip(ivs, extents) if iv.iter_type == tirx.IterVar.DataPar)
    if terms < MIN_TERMS or outputs > MAX_OUTPUTS:
        return None
    threads = min(THREADS, max_threads(target), 1 << (terms.bit_length() - 1))
    sch = new_schedule(func)
    name = reductions[0].name_hint
    # the spatial producers inline into their readers; what reads the reduction is its epilogue
    reduction = sch.get_sblock(name)
    for block in list(_blocks(func)):
        if block.name_hint == name:
            continue
        rv = sch.get_sblock(block.name_hint)
        if sch.get_consumers(rv) and not _is_reduction(block):
            sch.compute_inline(rv)
    consumers = sch.get_consumers(reduction)
    if len(consumers) > 1:
        return None
    if consumers:  # an epilogue: a workgroup an output of it, the reduction computed there
        epilogue = consumers[0]
        if sch.get_consumers(epilogue):
            return None
        loops = sch.get_loops(epilogue)
        bx = sch.fuse(*loops) if len(loops) > 1 else loops[0]
        sch.bind(bx, "blockIdx.x")
        sch.set_scope(reduction, 0, "shared")
        sch.compute_at(reduction, bx, preserve_unit_loops=True)
        inner = sch.get_loops(reduction)[-sum(1 for iv in ivs if iv.iter_type == tirx.IterVar.CommReduce):]
    else:
        loops = sch.get_loops(reduction)
        if len(loops) != len(ivs):
            return None
        spatial = [lp for lp, iv in zip(loops, ivs) if iv.iter_type == tirx.IterVar.DataPar]
        inner = [lp for lp, iv in zip(loops, ivs) if iv.iter_type == tirx.IterVar.CommReduce]
        bx = sch.fuse(*spatial) if len(spatial) > 1 else (spatial[0] if spatial else sch.add_unit_loop(loops[0]))
        sch.bind(bx, "blockIdx.x")
    r = sch.fuse(*inner) if len(inner) > 1 else inner[0]
    r_o, r_i = sch.split(r, [None, threads])
    sch.reorder(r_i, r_o)
    sch.bind(r_i, "threadIdx.x")
    return sch.mod["main"].with_attr("tirx.is_scheduled", True)
