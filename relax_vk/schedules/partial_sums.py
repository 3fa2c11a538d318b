"""A sum split over a workgroup's threads through workgroup memory, the structure shared by the
linear layers' schedule (:mod:`.linear`) and the run-time sums' (:mod:`.run_time_sums`).

A workgroup takes ``nt`` consecutive outputs of the output loop ``n`` and splits each output's sum
(loop ``k``) over ``ks`` partial-sum threads: ``rfactor`` writes each thread's partial (accumulated
in a register, stored once) to workgroup memory; then every thread of an output's column adds the
``ks`` partials in a register and applies the kernel's elementwise epilogue (a total accumulated in
the output buffer itself would be a race). A pair reduction (a gated MLP's gate and up summed
together) has each of its outputs staged so. ``n`` and ``k`` split exactly (TVM's ``compute_at``
drops the bounds check of a partial split of a factored reduction): the callers pick divisors.
"""

from __future__ import annotations

from typing import Optional

from tvm import s_tir, tirx

from .analysis import _loop_kinds


def divisor(n: int, most: int) -> int:
    """The largest divisor of ``n`` that is at most ``most``."""
    return max(d for d in range(1, most + 1) if n % d == 0)


def inline_around(sch: s_tir.Schedule, names: list, index: int) -> Optional[object]:
    """Inline the elementwise blocks before the reduction ``names[index]`` (read where they are
    needed) and those after it but the last; returns that last block (the epilogue, applied per
    output: SwiGLU's bias, silu and product are not a chain), or None when the reduction is last."""
    for name in reversed(names[:index]):
        sch.compute_inline(sch.get_sblock(name))
    for name in names[index + 1 : -1]:
        sch.compute_inline(sch.get_sblock(name))
    return sch.get_sblock(names[-1]) if len(names) > index + 1 else None


def static_outputs_and_sum(sch: s_tir.Schedule, block) -> Optional[tuple]:
    """The loops of reduction ``block`` (its output vars first, then its sum's) made ready for
    :func:`split_sum` over a run-time output: the run-time output loops outermost (they join
    ``blockIdx``), then the static ones, and the sum's loops fused into one. Returns ``(static output
    loops, fused sum loop)``, or None when the loops are not one per iter var."""
    ivs = sch.get(block).iter_vars
    loops = sch.get_loops(block)
    if len(loops) != len(ivs):
        return None
    spatial = [(loop, iv) for loop, iv in zip(loops, ivs) if iv.iter_type == tirx.IterVar.DataPar]
    run_time = [loop for loop, iv in spatial if not isinstance(iv.dom.extent, tirx.IntImm)]
    static = [loop for loop, iv in spatial if isinstance(iv.dom.extent, tirx.IntImm)]
    sch.reorder(*run_time, *static)
    k_loops = loops[len(spatial) :]
    return static, sch.fuse(*k_loops) if len(k_loops) > 1 else k_loops[0]


def _unit(sch: s_tir.Schedule, loop) -> bool:
    extent = sch.get(loop).extent
    return isinstance(extent, tirx.IntImm) and int(extent) == 1


def _spread_epilogue(sch: s_tir.Schedule, epilogue, under, threads: int, thread_axis: str) -> None:
    """An epilogue with more outputs than the sum (Qwen3's per-head norm and RoPE: a head's 128
    values from one sum of squares) keeps loops under the output thread: its innermost one is
    spread over the ``threads`` partial-sum threads, which would each run all of it otherwise (every
    one holds the total). An epilogue of the sum's own outputs has none."""
    loops = list(sch.get_loops(epilogue))
    loops = loops[[i for i, loop in enumerate(loops) if sch.get(loop).same_as(sch.get(under))][0] + 1 :]
    wide = [loop for loop in loops if not _unit(sch, loop)]
    if not wide or not isinstance(sch.get(wide[-1]).extent, tirx.IntImm):
        return
    sch.bind(sch.split(wide[-1], [None, threads])[1], thread_axis)


def split_sum(sch: s_tir.Schedule, block, epilogue, n, k, nt: int, ks: int, output_threads: str, part_threads: str, run: int = 1):
    """Schedule the reduction ``block`` (its loops: the outer output loops, ``n``, ``k``; everything
    before ``n`` goes to ``blockIdx.x``) as the module docstring says, its outputs on
    ``output_threads``, its partial sums on ``part_threads``. Partial-sum thread ``t`` takes the
    terms ``t, t + ks, ...`` (``run == 1``) or runs of ``run`` consecutive terms, run ``t``, ``t +
    ks``, ... (``ks * run`` divides the sum). Returns the partial-sum block, its term loops
    ``(..., k_o)`` or ``(..., k_o, k_run)`` innermost, for the caller's unrolling."""
    sch.split(n, [None, nt])
    k_s = sch.split(k, [None, ks])[1] if run == 1 else sch.split(k, [None, ks, run])[1]
    partial = sch.rfactor(k_s, 0)
    outputs_of = len(sch.get(block).writes)  # (a tuple reduction, gate and up summed together, has two)
    for i in range(outputs_of):
        sch.set_scope(partial, i, "shared")
    total = sch.get_loops(block)  # the outer output loops, n_o, n_i, k_s
    bx = sch.fuse(*total[:-2]) if len(total) > 3 else total[0]
    n_i = total[-2]
    sch.bind(bx, "blockIdx.x")
    sch.bind(n_i, output_threads)
    if epilogue is None:
        if outputs_of != 1:
            raise ValueError("a tuple reduction needs an epilogue that combines its outputs")
        epilogue = sch.cache_write(block, 0, "local")
    else:
        for i in range(outputs_of):
            sch.set_scope(block, i, "local")
    sch.reverse_compute_at(epilogue, n_i, preserve_unit_loops=True)
    _spread_epilogue(sch, epilogue, n_i, ks, part_threads)
    sch.compute_at(partial, bx, preserve_unit_loops=True)
    # the partials: bx, k_s, a loop for each output var (in the kernel's order: the ones n_i spans,
    # and unit loops for the others), k_o (and k_run)
    inner = sch.get_loops(partial)
    # the term loops: the innermost loops bound to the sum's vars (a conv's window row of one stays
    # a reduction var of its own beside the fused terms: two loops)
    kinds = "".join(_loop_kinds(sch, partial))
    terms = max(1 if run == 1 else 2, len(kinds) - len(kinds.rstrip("R")))
    split, outputs, term = inner[1], inner[2:-terms], inner[-terms:]
    spanning = [i for i, loop in enumerate(outputs) if not _unit(sch, loop)] or [len(outputs) - 1]  # (nt = 1: n_i's unit loop)
    sch.reorder(split, *[outputs[i] for i in spanning], *[loop for i, loop in enumerate(outputs) if i not in spanning], *term)
    col = sch.fuse(*[outputs[i] for i in spanning]) if len(spanning) > 1 else outputs[spanning[0]]
    sch.bind(split, part_threads)
    sch.bind(col, output_threads)
    # (accumulated in a register, stored once; a tuple's second output's store is made first, so
    # that each store is its own block after the partial sum)
    for local in [sch.cache_write(partial, i, "local") for i in reversed(range(outputs_of))]:
        sch.reverse_compute_at(local, col, preserve_unit_loops=True)
    sch.decompose_reduction(partial, term[0])
    return partial
