"""relax_vk's schedule for linear layers over run-time rows: a decoder's ``[S, K] @ [K, N]`` whose
``S`` (the tokens of the call) is a run-time dim, weights constant (float, or 4-bit blocks decoded
as they are read), with its elementwise epilogue.

Decoding runs it at ``S = 1``: a matrix-vector product, bound by how fast the weights stream in.
The safe schedule gives each output a thread that sums all ``K`` terms alone (``N`` threads: a few
workgroups on a large GPU, each thread a long dependent chain). Here a workgroup takes ``NT``
consecutive outputs of one row (``threadIdx.x``: side-by-side weights, one contiguous run per
warp) and splits their sum over ``KS`` threads (``threadIdx.y``, thread ``t`` taking terms
``t, t + KS, ...``): each partial sum goes to workgroup memory (``rfactor``), then each output's
thread adds its ``KS`` partials and applies the epilogue. ``KS`` times the threads, ``1/KS`` the
chain. Weights stored along ``k`` (packed n-bit blocks, :mod:`relax_vk.frontends.blockwise`:
``[N, k_blocks, words]``) swap the roles so that a warp reads adjacent words: lanes
(``threadIdx.x``) split one output's sum, each lane taking runs of ``RUN`` consecutive terms (a
32-bit word of 4-bit codes, and the ``x`` beside it) ``lanes * RUN`` apart, ``K_OUTPUTS`` outputs a
workgroup (``threadIdx.y``), and a lane's runs unrolled so that their loads are issued together (a
decoder's GEMVs are bound by memory latency: one round trip for all of a lane's words, not one per
step). 32 lanes when that leaves a lane ``MIN_RUNS`` runs or more, else 16 (measured on an H200:
K = 1024 with 32 lanes and 4 runs a lane left the latency of one round trip per 4 words exposed).
Runs are a Vulkan schedule: in a Qwen3-0.6B decoder on the H200 they took the 4-bit GEMVs from
2.78 to 1.89 ms a token and prefill up 1.6-1.8x on Vulkan, and made NVIDIA's OpenCL 2.7x slower
(not understood; single kernels outside the model were not), so OpenCL, and sums whose length is
not a multiple of ``16 * RUN``, keep ``K_LANES`` lanes on consecutive ``k``.
``NT`` divides ``N`` and ``KS`` divides ``K`` (TVM's ``compute_at`` drops the bounds check of a
partial split from a factored reduction); a kernel of any other shape is declined.
"""

from __future__ import annotations

import math
from typing import Optional

from tvm import s_tir, tirx

from ..core.target import target_api
from .analysis import _blocks, _is_reduction
from .partial_sums import divisor, inline_around, split_sum

NT = 32  # outputs per workgroup (threadIdx.x)
KS = 8  # partial sums per output (threadIdx.y)
K_LANES = 32  # weights along k: partial sums per output (threadIdx.x, reading adjacent weights)
K_OUTPUTS = 8  # weights along k: outputs per workgroup (threadIdx.y)
RUN = 8  # weights along k: consecutive terms a lane takes at a time
MIN_RUNS = 8  # weights along k: the fewest runs a lane takes with K_LANES lanes (else half as many lanes)
MAX_UNROLLED_RUNS = 16  # a lane's runs unrolled whole up to this many, else in groups of at most UNROLL_RUNS
UNROLL_RUNS = 8
UNROLL = 4  # a thread's terms per step of its loop


def _is_row_statistic(block, rows, K) -> bool:
    """Whether ``block`` is ``stat[s] += f(x[s, k])`` over the linear layer's rows and its ``K``
    terms (an RMSNorm's sum of squares, which the epilogue reads)."""
    ivs = block.iter_vars
    if len(ivs) != 2 or [iv.iter_type for iv in ivs] != [tirx.IterVar.DataPar, tirx.IterVar.CommReduce]:
        return False
    extents = [iv.dom.extent for iv in ivs]
    same_rows = extents[0].same_as(rows) or (isinstance(rows, tirx.IntImm) and isinstance(extents[0], tirx.IntImm) and int(rows) == int(extents[0]))
    return same_rows and isinstance(extents[1], tirx.IntImm) and int(extents[1]) == int(K)


def _main_and_statistics(func: tirx.PrimFunc):
    """``(the linear layer's reduction, [row statistics])``, or None when the reductions are not
    one of the first kind and any number of the second."""
    reductions = [b for b in _blocks(func) if _is_reduction(b)]
    main = [b for b in reductions if len(b.iter_vars) == 3]
    if len(main) != 1:
        return None
    rows, _, red = (iv.dom.extent for iv in main[0].iter_vars)
    stats = [b for b in reductions if b is not main[0] and not b.same_as(main[0])]
    if not isinstance(red, tirx.IntImm) or not all(_is_row_statistic(b, rows, int(red)) for b in stats):
        return None
    return main[0], stats


def is_run_time_linear(func: tirx.PrimFunc) -> bool:
    """Whether ``func``'s reduction is ``out[s, n] += x[s, k] * w(k, n)`` with static ``K`` and
    ``N``, ``s`` over one run-time dim (or a single row: a matrix-vector product), ``x`` read at
    ``[s, k]`` itself, and ``w`` read from buffers of static shape: a ``[K, N]`` weight, or one
    decoded from packed blocks as it is read (:mod:`relax_vk.frontends.blockwise`); beside it, row
    statistics over the same terms that the terms read (an RMSNorm folded into the layer that
    reads it, ``x[s, k] * rsqrt(squares[s] / K + eps) * g[k]``: each workgroup sums its row's squares
    itself)."""
    found = _main_and_statistics(func)
    if found is None:
        return False
    block = found[0]
    ivs = block.iter_vars
    if len(ivs) != 3 or [iv.iter_type for iv in ivs] != [tirx.IterVar.DataPar, tirx.IterVar.DataPar, tirx.IterVar.CommReduce]:
        return False
    rows, cols, red = (iv.dom.extent for iv in ivs)
    if (isinstance(rows, tirx.IntImm) and int(rows) != 1) or not isinstance(cols, tirx.IntImm) or not isinstance(red, tirx.IntImm):
        return False
    x, weights = _operands(block)
    weights = _weights(block, found[1])
    return len(x) == 1 and bool(weights) and all(all(isinstance(d, tirx.IntImm) for d in r.source.shape) for r in weights)


def _operands(block) -> tuple:
    """``(x, weights)``: the reduction's reads at ``[s, k]`` itself (no window, no index arithmetic)
    and the others (the weights, whose indices may be anything)."""
    s, k = block.iter_vars[0].var, block.iter_vars[2].var
    x = [r for r in block.reads if len(r.region) == 2 and r.region[0].min.same_as(s) and r.region[1].min.same_as(k)]
    return x, [r for r in block.reads if not any(r.same_as(a) for a in x)]


def _weights(block, stats) -> list:
    """The reduction's weight reads: its reads but ``x`` and the row statistics."""
    produced = [st.writes[0].source for st in stats]
    return [r for r in _operands(block)[1] if not any(r.source.same_as(b) for b in produced)]


def _weights_run_along_k(block, stats=()) -> bool:
    """Whether consecutive ``k`` are adjacent in the weights' memory: the largest weight buffer the
    reduction reads has ``k`` in its last index (4-bit blocks ``[N, k_blocks, bytes]``; a float
    ``[K, N]`` weight has ``n`` there)."""
    k = block.iter_vars[2].var
    weight = max(_weights(block, stats), key=lambda r: math.prod(int(d) for d in r.source.shape))
    return any(v.same_as(k) for v in tirx.analysis.undefined_vars(weight.region[-1].min))


def schedule_linear(func: tirx.PrimFunc, runs: bool = False) -> Optional[tirx.PrimFunc]:
    """The schedule of the module docstring, or None for another kernel; ``runs``: weights along
    ``k`` are read in runs of ``RUN`` terms a lane (the Vulkan form)."""
    if not is_run_time_linear(func):
        return None
    sch = s_tir.Schedule(func)
    main, stats = _main_and_statistics(func)
    names = [b.name_hint for b in _blocks(func) if not any(b.same_as(st) for st in stats)]
    index = names.index(main.name_hint)
    epilogue = inline_around(sch, names, index)
    block = sch.get_sblock(main.name_hint)
    along_k = _weights_run_along_k(main, stats)
    s, n, k = sch.get_loops(block)
    N, K = int(sch.get(n).extent), int(sch.get(k).extent)
    if runs and along_k and K % (RUN * K_LANES // 2) == 0:
        enough = K % (RUN * K_LANES) == 0 and K // (RUN * K_LANES) >= MIN_RUNS
        lanes = K_LANES if enough else K_LANES // 2
        partial = split_sum(sch, block, epilogue, n, k, divisor(N, K_OUTPUTS), lanes, "threadIdx.y", "threadIdx.x", run=RUN)
        lane_runs, run = sch.get_loops(partial)[-2:]
        sch.unroll(run)
        count = int(sch.get(lane_runs).extent)
        if count > MAX_UNROLLED_RUNS:
            lane_runs = sch.split(lane_runs, [None, divisor(count, UNROLL_RUNS)])[1]
        sch.unroll(lane_runs)
        _row_statistics(sch, stats, block, lanes, "threadIdx.x")
        return sch.mod["main"]
    if along_k and K % K_LANES == 0:  # lanes (threadIdx.x) on consecutive k, outputs on threadIdx.y
        nt, ks, lanes, rows = divisor(N, K_OUTPUTS), K_LANES, "threadIdx.y", "threadIdx.x"
    else:
        nt, ks, lanes, rows = divisor(N, NT), divisor(K, KS), "threadIdx.x", "threadIdx.y"
        if nt < 4:
            return None
    partial = split_sum(sch, block, epilogue, n, k, nt, ks, lanes, rows)
    _row_statistics(sch, stats, block, ks, rows)
    # UNROLL terms a thread adds in one step: their loads issued together (a thread's terms are a
    # chain of memory latencies otherwise: the sum of one output is short, its latency is not)
    term = sch.get_loops(partial)[-1]
    steps = int(sch.get(term).extent)
    if steps % UNROLL == 0 and steps > UNROLL:
        sch.unroll(sch.split(term, [None, UNROLL])[1])
    return sch.mod["main"]


def _row_statistics(sch: s_tir.Schedule, stats, block, ks: int, part_threads: str) -> None:
    """Each row statistic computed by every workgroup for its own row, before the sum: its terms
    split over the ``ks`` partial-sum threads and combined across them (every thread holds the
    total, which its terms read)."""
    for stat in stats:
        sb = sch.get_sblock(stat.name_hint)
        sch.set_scope(sb, 0, "local")
        sch.compute_at(sb, sch.get_loops(block)[0], preserve_unit_loops=True)
        k = sch.get_loops(sb)[-1]
        sch.bind(sch.split(k, [None, ks])[1], part_threads)


def linear_rule(func: tirx.PrimFunc, target) -> Optional[tirx.PrimFunc]:
    return schedule_linear(func, runs=target is not None and target_api(target) == "vulkan")
