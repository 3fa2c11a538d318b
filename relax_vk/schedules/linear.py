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

from tvm import tirx

from ..core.target import target_api
from .analysis import _blocks, _is_reduction
from .partial_sums import divisor, inline_around, split_sum
from .unchecked import new_schedule

NT = 32  # outputs per workgroup (threadIdx.x)
KS = 8  # partial sums per output (threadIdx.y)
K_LANES = 32  # weights along k: partial sums per output (threadIdx.x, reading adjacent weights)
K_OUTPUTS = 8  # weights along k: outputs per workgroup (threadIdx.y)
RUN = 8  # weights along k: consecutive terms a lane takes at a time
MIN_RUNS = 8  # weights along k: the fewest runs a lane takes with K_LANES lanes (else half as many lanes)
MAX_UNROLLED_RUNS = 16  # a lane's runs unrolled whole up to this many, else in groups of at most UNROLL_RUNS
UNROLL_RUNS = 8
UNROLL = 4  # a thread's terms per step of its loop


def is_run_time_linear(func: tirx.PrimFunc) -> bool:
    """Whether ``func``'s one reduction is ``out[..., s, n] += x[..., s, k] * w(k, n)`` with static
    ``K`` and ``N``, ``s`` over one run-time dim (or a single row: a matrix-vector product), any
    leading axes of extent 1 (a ``[1, S, K]`` sequence's batch), ``x`` read at ``[..., s, k]``
    itself, and ``w`` read from buffers of static shape: a ``[K, N]`` weight, or one decoded from
    packed blocks as it is read (:mod:`relax_vk.frontends.blockwise`)."""
    reductions = [b for b in _blocks(func) if _is_reduction(b)]
    if len(reductions) != 1:
        return False
    block = reductions[0]
    ivs = block.iter_vars
    kinds = [iv.iter_type for iv in ivs]
    if len(ivs) < 3 or kinds != [tirx.IterVar.DataPar] * (len(ivs) - 1) + [tirx.IterVar.CommReduce]:
        return False
    if not all(isinstance(iv.dom.extent, tirx.IntImm) and int(iv.dom.extent) == 1 for iv in ivs[:-3]):
        return False
    rows, cols, red = (iv.dom.extent for iv in ivs[-3:])
    if (isinstance(rows, tirx.IntImm) and int(rows) != 1) or not isinstance(cols, tirx.IntImm) or not isinstance(red, tirx.IntImm):
        return False
    x, weights = _operands(block)
    return len(x) == 1 and bool(weights) and all(all(isinstance(d, tirx.IntImm) for d in r.source.shape) for r in weights)


def _operands(block) -> tuple:
    """``(x, weights)``: the reduction's reads at ``[..., s, k]`` itself (the leading unit axes at
    their own vars, no window, no index arithmetic) and the others (the weights, whose indices may
    be anything)."""
    ivs = block.iter_vars
    lead, s, k = [iv.var for iv in ivs[:-3]], ivs[-3].var, ivs[-1].var
    want = [*lead, s, k]

    def at_rows(region) -> bool:
        return len(region) == len(want) and all(r.min.same_as(v) for r, v in zip(region, want))

    x = [r for r in block.reads if at_rows(r.region)]
    return x, [r for r in block.reads if not any(r.same_as(a) for a in x)]


def _weights_run_along_k(block) -> bool:
    """Whether consecutive ``k`` are adjacent in the weights' memory: the largest weight buffer the
    reduction reads has ``k`` in its last index (4-bit blocks ``[N, k_blocks, bytes]``; a float
    ``[K, N]`` weight has ``n`` there)."""
    k = block.iter_vars[-1].var
    weight = max(_operands(block)[1], key=lambda r: math.prod(int(d) for d in r.source.shape))
    return any(v.same_as(k) for v in tirx.analysis.undefined_vars(weight.region[-1].min))


def schedule_linear(func: tirx.PrimFunc, runs: bool = False) -> Optional[tirx.PrimFunc]:
    """The schedule of the module docstring, or None for another kernel; ``runs``: weights along
    ``k`` are read in runs of ``RUN`` terms a lane (the Vulkan form)."""
    if not is_run_time_linear(func):
        return None
    sch = new_schedule(func)
    blocks = _blocks(func)
    names = [b.name_hint for b in blocks]
    index = next(i for i, b in enumerate(blocks) if _is_reduction(b))
    epilogue = inline_around(sch, names, index)
    block = sch.get_sblock(names[index])
    along_k = _weights_run_along_k(blocks[index])
    *_, n, k = sch.get_loops(block)  # (the leading unit axes and s go to blockIdx.x in split_sum)
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
        return sch.mod["main"]
    if along_k and K % K_LANES == 0:  # lanes (threadIdx.x) on consecutive k, outputs on threadIdx.y
        nt, ks, lanes, rows = divisor(N, K_OUTPUTS), K_LANES, "threadIdx.y", "threadIdx.x"
    else:
        nt, ks, lanes, rows = divisor(N, NT), divisor(K, KS), "threadIdx.x", "threadIdx.y"
        if nt < 4:
            return None
    partial = split_sum(sch, block, epilogue, n, k, nt, ks, lanes, rows)
    # UNROLL terms a thread adds in one step: their loads issued together (a thread's terms are a
    # chain of memory latencies otherwise: the sum of one output is short, its latency is not)
    term = sch.get_loops(partial)[-1]
    steps = int(sch.get(term).extent)
    if steps % UNROLL == 0 and steps > UNROLL:
        sch.unroll(sch.split(term, [None, UNROLL])[1])
    return sch.mod["main"]


def linear_rule(func: tirx.PrimFunc, target) -> Optional[tirx.PrimFunc]:
    return schedule_linear(func, runs=target is not None and target_api(target) == "vulkan")
