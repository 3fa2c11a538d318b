"""Sums over a static length in kernels of run-time size, no other rule's: each workgroup takes a
few outputs and splits each output's sum over several threads.

The safe schedule gives every output a thread that adds all of its terms alone. Attention over a
run-time length then runs a few thousand threads, each a chain of dependent loads: a score walks a
whole 128-wide key row (the rows of neighbouring threads 4 KB apart), a value part 64 cached rows
(relax_vk's decoders have their own kernels for it now: :mod:`.decode_attention`). Here,
as in the linear layers' schedule (:mod:`.linear`), the kernel's run-time output dims go to
``blockIdx``, its static ones give ``n`` and its sum ``k``: a workgroup takes consecutive outputs of
``n`` and splits their sums over partial-sum threads (``rfactor``), whose partials meet in workgroup
memory; then each output's thread adds them and applies the kernel's elementwise epilogue (the
attention mask's ``where``). Which index a warp's lanes share decides the roles, so that they read
adjacent memory:

* the sum runs along rows (the largest input's last index is a term of the sum, and no input has
  one elsewhere: a key row): ``LANES`` lanes take consecutive terms (``threadIdx.x``), ``OUTPUTS``
  outputs sit on ``threadIdx.y``;
* the sum runs down columns (that last index is the innermost static output, with no term in it: a
  value column): ``LANES`` lanes take consecutive outputs of that dim, ``PARTS`` partial sums sit on
  ``threadIdx.y``, the other output dims join ``blockIdx``.

Anything else (a conv reads its channels and windows through the sum's vars) is declined, as are
sums shorter than ``MIN_TERMS`` and kernels of static size. The splits divide the static extents
exactly (TVM drops the bounds check of a partial split of a factored reduction)."""

from __future__ import annotations

import math
from typing import Optional

from tvm import tirx

from .analysis import _blocks, _is_reduction
from .partial_sums import divisor, inline_around, split_sum, static_outputs_and_sum
from .unchecked import new_schedule

LANES = 32  # threads of a warp: on consecutive terms, or on consecutive outputs
OUTPUTS = 8  # terms on the lanes: outputs a workgroup
PARTS = 8  # outputs on the lanes: partial sums an output
MIN_TERMS = 16  # shorter sums stay one thread's


def _static(iv) -> bool:
    return isinstance(iv.dom.extent, tirx.IntImm)


def _roles(block, spatial) -> Optional[str]:
    """Where a warp's lanes go so that every read they make is adjacent or shared: ``"terms"`` when
    every buffer that a term of the sum indexes has it in its last index only (a key row and the
    query), ``"outputs"`` when every buffer that the innermost static output indexes has it in its
    last index only and the sum has one var (a value column and the probabilities); else None (a
    conv reads channels and windows through its sum's vars: not this rule's)."""
    reduce = [iv.var for iv in block.iter_vars if iv.iter_type == tirx.IterVar.CommReduce]

    def only_last(names) -> bool:
        def uses(index) -> bool:
            return any(u.same_as(v) for u in tirx.analysis.undefined_vars(index) for v in names)

        return all(not any(uses(r.min) for r in read.region[:-1]) for read in block.reads) and any(uses(read.region[-1].min) for read in block.reads)

    if only_last(reduce):
        return "terms"
    if len(reduce) == 1 and only_last([[iv.var for iv in spatial if _static(iv)][-1]]):
        return "outputs"
    return None


def schedule_run_time_sums(func: tirx.PrimFunc) -> Optional[tirx.PrimFunc]:
    """The schedule of the module docstring, or None for another kernel."""
    blocks = _blocks(func)
    reductions = [b for b in blocks if _is_reduction(b)]
    if len(reductions) != 1:
        return None
    red = reductions[0]
    kinds = [iv.iter_type for iv in red.iter_vars]
    spatial = [iv for iv in red.iter_vars if iv.iter_type == tirx.IterVar.DataPar]
    reduce = [iv for iv in red.iter_vars if iv.iter_type == tirx.IterVar.CommReduce]
    if kinds != sorted(kinds) or not all(_static(iv) for iv in reduce):  # (spatial vars first, then the sum's)
        return None
    if all(_static(iv) for iv in spatial) or not any(_static(iv) for iv in spatial):
        return None
    terms = math.prod(int(iv.dom.extent) for iv in reduce)
    outputs = math.prod(int(iv.dom.extent) for iv in spatial if _static(iv))
    if terms < MIN_TERMS:
        return None
    roles = _roles(red, spatial)
    if roles is None:
        return None
    sch = new_schedule(func)
    names = [b.name_hint for b in blocks]
    epilogue = inline_around(sch, names, names.index(red.name_hint))
    block = sch.get_sblock(red.name_hint)
    found = static_outputs_and_sum(sch, block)
    if found is None:
        return None
    static, k = found
    if roles == "terms":  # outputs on threadIdx.y (every static output var), lanes on the terms
        n = sch.fuse(*static) if len(static) > 1 else static[0]
        nt, ks, lanes, rows = divisor(outputs, OUTPUTS), divisor(terms, LANES), "threadIdx.y", "threadIdx.x"
    else:  # lanes on the innermost output var (the others join blockIdx), partial sums on threadIdx.y
        n = static[-1]
        nt, ks, lanes, rows = divisor(int(sch.get(n).extent), LANES), divisor(terms, PARTS), "threadIdx.x", "threadIdx.y"
    if nt < 4 or ks < 4:
        return None
    split_sum(sch, block, epilogue, n, k, nt, ks, lanes, rows)
    return sch.mod["main"]


def run_time_sums_rule(func: tirx.PrimFunc, _target) -> Optional[tirx.PrimFunc]:
    return schedule_run_time_sums(func)
