"""Structural questions the scheduling driver asks before trusting a rule with a kernel.

Two upstream defects found by relax_vk's differential fuzzer decide what is asked:

* **trivial reductions.** dlight's ``normalize_prim_func`` drops unit loops, so a reduction whose
  reduce axes all have extent 1 (a 1x1 conv with one input channel per group, a mean over a 1x1
  map) becomes a block with spatial iter vars and an ``init``; ``reverse_compute_inline`` then folds
  a following bias add into *both* the init and the update, counting it twice. Kernels with such a
  block go straight to the safe schedule (:func:`has_trivial_reduction`).
* **windowed reductions.** dlight's ``gpu.Reduction`` / ``GeneralReduction`` rules rfactor the
  reduction and write results through a local array whose index runs past its extent when the
  reduction reads its input through a window (``y + ry``, ``c // m + rc``: grouped and dilated
  convs, pools): wrong numbers. They are only given kernels whose reductions read every buffer
  with plain iter vars or constants (:func:`reductions_are_plain`): row sums, means, softmax,
  norms, matmuls.
"""

from __future__ import annotations

import math
from typing import List

from tvm import s_tir, tirx


def _blocks(func: tirx.PrimFunc) -> list:
    found = []

    def visit(node):
        if isinstance(node, s_tir.SBlockRealize):
            if node.block.name_hint != "root":
                found.append(node.block)
            visit(node.block.body)
            return
        for child in _children(node):
            visit(child)

    visit(func.body)
    return found


def _children(node) -> list:
    seq = getattr(node, "seq", None)
    if seq is not None:
        return list(seq)
    out = []
    for attr in ("body", "then_case", "else_case"):
        child = getattr(node, attr, None)
        if isinstance(child, tirx.Stmt):
            out.append(child)
    return out


def _is_reduction(block) -> bool:
    return any(iv.iter_type == tirx.IterVar.CommReduce for iv in block.iter_vars)


def has_trivial_reduction(func: tirx.PrimFunc) -> bool:
    """Whether a reduction block of ``func`` reduces only over extent-1 axes."""
    for block in _blocks(func):
        reduce = [iv for iv in block.iter_vars if iv.iter_type == tirx.IterVar.CommReduce]
        if reduce and all(int(getattr(iv.dom.extent, "value", 0)) == 1 for iv in reduce):
            return True
    return False


def reductions_are_plain(func: tirx.PrimFunc) -> bool:
    """Whether every reduction block of ``func`` reads each buffer with indices that are single
    iter vars or constants (no windows, no index arithmetic)."""
    for block in _blocks(func):
        if not _is_reduction(block):
            continue
        ivs = [iv.var for iv in block.iter_vars]
        for region in block.reads:
            for rng in region.region:
                index = rng.min
                if isinstance(index, tirx.IntImm):
                    continue
                if not (isinstance(index, tirx.Var) and any(index.same_as(v) for v in ivs)):
                    return False
    return True


#: sums shorter than this, in kernels of run-time size, stay one thread's (the safe schedule)
MIN_SPLIT_TERMS = 16


def short_run_time_sum(func: tirx.PrimFunc) -> bool:
    """Whether ``func``'s one reduction block has an output extent that is a run-time dim and a sum
    of fewer than :data:`MIN_SPLIT_TERMS` terms. TVM's generic reduction rules give each output a
    workgroup whose threads split its sum; with a sum of a few terms most of those threads idle, and
    at a run-time size the outputs are many (the scores of attention with 3-wide heads over 1,170
    tokens: 2.7 million workgroups of 256 threads, 29 s a run on pocl against 15 ms with a thread
    an output). Kernels of several reductions (a norm's statistics) are not counted: the safe
    schedule would keep their statistics in a workspace sized by expressions the runtime cannot
    evaluate."""
    reductions = [b for b in _blocks(func) if _is_reduction(b)]
    if len(reductions) != 1:
        return False
    block = reductions[0]
    reduce = [iv for iv in block.iter_vars if iv.iter_type == tirx.IterVar.CommReduce]
    spatial = [iv for iv in block.iter_vars if iv.iter_type == tirx.IterVar.DataPar]
    if all(isinstance(iv.dom.extent, tirx.IntImm) for iv in spatial) or not all(isinstance(iv.dom.extent, tirx.IntImm) for iv in reduce):
        return False
    return math.prod(int(iv.dom.extent) for iv in reduce) < MIN_SPLIT_TERMS


def _realize(sch: s_tir.Schedule, block):
    from tvm_ffi import get_global_func

    return get_global_func("s_tir.schedule.GetSBlockRealize")(sch, block)


def _loop_kinds(sch: s_tir.Schedule, block) -> List[str]:
    """Per loop of ``block``: ``"S"`` (feeds only spatial iter vars), ``"R"`` (only reduction ones)
    or ``"O"`` (both, or something else)."""
    realize = _realize(sch, block)
    ivs = list(realize.block.iter_vars)
    kinds = []
    from ..core.ir_utils import tir_uses_any

    for loop in sch.get_loops(block):
        var = sch.get(loop).loop_var
        users = [iv for iv, value in zip(ivs, realize.iter_values) if tir_uses_any(value, [var])]
        types = {iv.iter_type for iv in users}
        if types == {tirx.IterVar.DataPar} or not types:
            kinds.append("S")
        elif types == {tirx.IterVar.CommReduce}:
            kinds.append("R")
        else:
            kinds.append("O")
    return kinds
