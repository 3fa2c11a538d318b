"""A decoder's attention over its key/value cache: one or two hand-scheduled kernels in place of four.

Attention of ``S`` queries over ``T`` keys (grouped-query: head ``h`` reads key/value head ``h //
g``) in the form flash-decoding uses: the keys are cut into parts of :data:`ROWS` rows, and

1. :func:`attention_parts_kernel` -- one workgroup per (query, head, part) computes the part's
   scores, its largest score ``m``, the sum ``l`` of ``exp(score - m)`` and the ``exp``-weighted sum
   ``o`` of its value rows, all in float32 (the scores and weights stay in workgroup memory);
2. :func:`attention_combine_kernel` -- one thread per output value rescales the parts to their
   common largest score ``M``: ``sum_p o_p exp(m_p - M) / sum_p l_p exp(m_p - M)``, rounded once to
   the model's dtype.

or, in one kernel, :func:`attention_one_pass_kernel` -- one workgroup per (query, head) takes the
parts in sequence, each as the parts kernel does, and folds each part's ``m``, ``l`` and ``o`` into
running ones (the online softmax): one launch a layer instead of two, the parts one after another
instead of side by side, and no partial sums in memory (:func:`one_pass` says which a model takes:
the pair, unless its partial sums would not fit one buffer binding).

That is ``softmax(q . k / sqrt(D) + bias) . v`` exactly as the four kernels computed it (scores,
softmax, value parts, the parts' sum), up to float32 rounding (a model's own score scale in place of
``1 / sqrt(D)``: :attr:`Attention.scale`; Gemma's soft-capped scores, ``cap * tanh(q . k scale / cap)``
before the bias: :attr:`Attention.softcap`): a masked key's score is its bias,
``hf_decoder.MASKED``, so a query whose keys are all masked (a padded query) averages them, as
transformers does. (A float16 model's weights stay float32 here, where transformers rounds its
probabilities to float16 before the values: within the float16 bound the decoders' tests hold.)
One launch pair per layer whatever ``T`` is, with ``ceil(T / ROWS)`` parts: the
grid grows with the context, and no thread's serial loop does.

Key and value row ``t`` is read where it lies: the cache ``past`` (``[MAX, KV*D]``) below ``T - S``,
this call's ``new`` (``[S, KV*D]``) from there, so no ``[T, KV*D]`` copy is made.

Phase by phase, the parts kernel (``L`` threads on each of the part's rows, ``W = ROWS * L`` threads,
each thread ``C = ceil(D / L)`` consecutive columns of a row):

* every load of the thread is issued first, into registers: its ``C`` key values (a row's ``L``
  threads are adjacent: their reads are one contiguous row), its value column's ``ROWS`` values,
  its row's bias, and ``q * scale`` into workgroup memory; the kernel then waits for memory
  once (a decode step is latency-bound: each wait costs about as much as the arithmetic);
* each thread's partial dot product; the ``L`` partials summed by the row's first thread, the bias
  added;
* ``m`` and the weights ``exp(score - m)`` (0 for rows past ``T``) into workgroup memory, ``l``;
* each thread a column of ``o`` from its registers.

The combination reads the parts in unrolled steps (all of them in one when the cache has at most
:data:`MAX_UNROLLED_PARTS`). The grids are bounded by the cache (``T <= max_len``), so they are
never folded.

Both kernels also have serial CPU forms (``cpu=True``) that the CPU reference
(:mod:`relax_vk.analysis.reference`) runs in their place, found by :data:`ATTENTION_ATTR`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Optional

#: key rows of one part
ROWS = 32
#: the most threads a row of the parts kernel takes (a workgroup of ROWS * 8 = 256 threads, the
#: size every Vulkan device offers)
MAX_LANES = 8
#: the most parts the combination reads in one unrolled step (a longer cache: four a step)
MAX_UNROLLED_PARTS = 32
#: float32's lowest value: where the largest score's search starts
LOWEST = -3.4028234663852886e38
#: the most bytes the pair's partial sums ``O [S, H, P, D]`` (float32, at the dims' bounds) may take:
#: one buffer binding of any device (WebGPU's and Vulkan's least, 128 MiB); past it the model takes
#: the one-pass kernel (:func:`one_pass`)
PARTIAL_SUMS_MAX_BYTES = 1 << 27
#: the PrimFunc attribute holding a kernel's :class:`Attention` and which of the two it is (JSON)
ATTENTION_ATTR = "relax_vk.attention"


@dataclass(frozen=True)
class Attention:
    """The attention of one model: ``heads`` query heads over ``kv_heads`` key/value heads of
    ``head_dim`` values, a cache of ``max_len`` rows (``T`` and ``S`` are at most that: the grids
    are then known to fit the workgroup limit and are never folded), inputs and output in ``dtype``
    (float32 or float16); the scores ``q . k`` times ``scale`` (None: ``head_dim ** -0.5``), and,
    where ``softcap`` is not 0, soft-capped as transformers' Gemma models do: ``softcap *
    tanh(score / softcap)``, before the mask's bias is added. Checked on construction (ValueError)."""

    heads: int
    kv_heads: int
    head_dim: int
    max_len: int
    dtype: str = "float32"
    scale: Optional[float] = None
    softcap: float = 0.0

    def __post_init__(self):
        if self.heads < 1 or self.kv_heads < 1 or self.heads % self.kv_heads:
            raise ValueError(f"{self.heads} heads over {self.kv_heads} key/value heads: a positive multiple")
        if self.head_dim < 1 or self.max_len < 1:
            raise ValueError(f"head_dim {self.head_dim}, max_len {self.max_len}: positive")
        if self.dtype not in ("float32", "float16"):
            raise ValueError(f"dtype {self.dtype!r}: float32 or float16")
        if self.scale is not None and not self.scale > 0:
            raise ValueError(f"scale {self.scale}: positive")
        if not self.softcap >= 0:
            raise ValueError(f"softcap {self.softcap}: 0 (none) or positive")

    @property
    def score_scale(self) -> float:
        """What ``q . k`` is multiplied by."""
        return self.head_dim**-0.5 if self.scale is None else self.scale

    @property
    def lanes(self) -> int:
        """Threads on one row of the parts kernel."""
        return min(MAX_LANES, -(-self.head_dim // 32))

    @property
    def threads(self) -> int:
        return ROWS * self.lanes

    @property
    def columns(self) -> int:
        """Columns of a row each of its threads sums."""
        return -(-self.head_dim // self.lanes)

    def to_json(self, kernel: str) -> str:
        return json.dumps(dict(asdict(self), kernel=kernel), sort_keys=True)


def parts(T):
    """The parts of ``T`` key rows (a TIR expression or an int)."""
    return (T + ROWS - 1) // ROWS


def one_pass(spec: Attention, max_queries: int) -> bool:
    """Whether a model of at most ``max_queries`` queries a call takes
    :func:`attention_one_pass_kernel` rather than the pair: when the pair's partial sums would not
    fit one buffer binding (:data:`PARTIAL_SUMS_MAX_BYTES`; Qwen3-0.6B's at a 2,048-token prompt over
    a 2,112-row cache: 1.1 GB). The pair is faster wherever both fit (the H200, Qwen3-0.6B with 4-bit
    weights, decode at 128 / 512 tokens of context: 419 / 396 tokens/s against 370 / 217 on Vulkan,
    296 / 297 against 319 / 247 on OpenCL): the one-pass kernel's 16 workgroups take a part about
    4.6 us after another, where the pair's take them side by side."""
    return max_queries * spec.heads * parts(spec.max_len) * spec.head_dim * 4 > PARTIAL_SUMS_MAX_BYTES


def _part_macros(spec: Attention) -> dict:
    """The TVMScript macros both the parts kernel and the one-pass kernel are made of (one part's
    loads, scores, largest score and weights; the serial forms' pieces), by name."""
    from tvm.script import tirx as T

    D = spec.head_dim
    L, W, C = spec.lanes, spec.threads, spec.columns
    VK = -(-D // W)  # value columns of a thread
    scale = spec.score_scale
    cap = float(spec.softcap)
    capping = cap > 0  # (TVMScript's conditions: a bool)

    def capped(score):  # a score (before its bias) as the model takes it: soft-capped where it is (Attention.softcap)
        return T.float32(cap) * T.tanh(score * T.float32(1.0 / cap)) if capping else score

    @T.macro
    def load_key(t, first, c0, kvh, past_k, new_k, kreg):  # kreg[c] = key row t, column c0 + c (the row's last past D)
        if t < first:
            for c in T.unroll(C):
                kreg[c] = T.Cast("float32", past_k[t, kvh * D + T.min(c0 + c, D - 1)])
        else:
            for c in T.unroll(C):
                kreg[c] = T.Cast("float32", new_k[t - first, kvh * D + T.min(c0 + c, D - 1)])

    @T.macro
    def load_values(p, Tn, first, kvh, d, past_v, new_v, vreg, k):  # vreg[k, r] = value row p*ROWS + r (clamped to T), column d
        # (both sources read, clamped, and one taken: no branch, so that the loads issue together)
        for r in T.unroll(ROWS):
            vreg[k, r] = T.Cast("float32", T.if_then_else(
                T.min(p * ROWS + r, Tn - 1) < first, past_v[T.min(p * ROWS + r, Tn - 1), kvh * D + d],
                new_v[T.max(T.min(p * ROWS + r, Tn - 1) - first, T.int64(0)), kvh * D + d]))

    @T.macro
    def dot(c0, qs, kreg, acc):  # acc[0] = q . kreg over columns c0 .. c0+C-1 (qs is zero past D)
        acc[0] = T.float32(0)
        for c in T.unroll(C):
            acc[0] = acc[0] + qs[c0 + c] * kreg[c]

    @T.macro
    def weigh(ex, vreg, k, acc):  # acc[0] = sum_r ex[r] * vreg[k, r] (a row past T weighs 0)
        acc[0] = T.float32(0)
        for r in T.unroll(ROWS):
            acc[0] = acc[0] + ex[r] * vreg[k, r]

    @T.macro
    def load_part(p, Tn, first, kvh, s, tx, past_k, new_k, past_v, new_v, bias, kreg, vreg, st):
        # the thread's key columns of its row of part p, its value columns of the part's rows, and
        # its row's bias (st[2]), all issued before anything waits for them
        load_key(T.min(p * ROWS + tx // L, Tn - 1), first, tx % L * C, kvh, past_k, new_k, kreg)
        for k in T.unroll(VK):
            load_values(p, Tn, first, kvh, T.min(tx + k * W, D - 1), past_v, new_v, vreg, k)
        st[2] = bias[s, T.min(p * ROWS + tx % ROWS, Tn - 1)]

    @T.macro
    def stage_query(s, h, tx, Q, qs):  # qs = q * scale, zero past D
        for k in range((L * C + W - 1) // W):
            if tx + k * W < L * C:
                qs[tx + k * W] = T.if_then_else(tx + k * W < D, T.Cast("float32", Q[s, h * D + T.min(tx + k * W, D - 1)]) * T.float32(scale), T.float32(0))

    @T.macro
    def dot_part(tx, qs, kreg, partial, acc):  # (after load_part and qs staged) the thread's partial score; kreg is free after
        dot(tx % L * C, qs, kreg, acc)
        partial[tx] = acc[0]

    @T.macro
    def weigh_part(p, Tn, tx, partial, sc, ex, st, mp):
        # (after dot_part) each row's score (its partials and its bias st[2]) into sc, the part's
        # largest score m into st[0] of its first ROWS threads and into mp, ex = exp(score - m) (0
        # past T); ends at a barrier
        T.tvm_storage_sync("shared")
        if tx < ROWS:
            st[1] = T.float32(0) if capping else st[2]  # (uncapped: the bias first, then the partials)
            for lane in range(L):
                st[1] = st[1] + partial[tx * L + lane]
            sc[tx] = st[2] + capped(st[1]) if capping else st[1]
        T.tvm_storage_sync("shared")
        if tx < ROWS:  # (each of the first ROWS threads finds m itself: ROWS reads, no more barriers)
            st[0] = T.float32(LOWEST)
            for r in range(ROWS):
                if p * ROWS + r < Tn:
                    st[0] = T.max(st[0], sc[r])
            ex[tx] = T.if_then_else(p * ROWS + tx < Tn, T.exp(sc[tx] - st[0]), T.float32(0))
            if tx == 0:
                mp[0] = st[0]
        T.tvm_storage_sync("shared")

    @T.macro
    def stage_query_serial(s, h, Q, qs):  # (the CPU forms) qs = q * scale, zero past D
        for i in range(L * C):
            qs[i] = T.if_then_else(i < D, T.Cast("float32", Q[s, h * D + T.min(i, D - 1)]) * T.float32(scale), T.float32(0))

    @T.macro
    def score_part_serial(s, h, p, Tn, S, g, past_k, new_k, bias, qs, kreg, acc, sc, ex, st):
        # (the CPU forms) part p's scores into sc, its largest score m into st[0], ex = exp(score -
        # m) (0 past T), their sum l into st[1]
        for r in range(ROWS):
            sc[r] = T.float32(0) if capping else bias[s, T.min(p * ROWS + r, Tn - 1)]
            for lane in range(L):
                load_key(T.min(p * ROWS + r, Tn - 1), Tn - S, lane * C, h // g, past_k, new_k, kreg)
                dot(lane * C, qs, kreg, acc)
                sc[r] = sc[r] + acc[0]
            if capping:
                sc[r] = bias[s, T.min(p * ROWS + r, Tn - 1)] + capped(sc[r])
        st[0] = T.float32(LOWEST)
        for r in range(ROWS):
            if p * ROWS + r < Tn:
                st[0] = T.max(st[0], sc[r])
        st[1] = T.float32(0)
        for r in range(ROWS):
            ex[r] = T.if_then_else(p * ROWS + r < Tn, T.exp(sc[r] - st[0]), T.float32(0))
            st[1] = st[1] + ex[r]

    return dict(load_key=load_key, load_values=load_values, dot=dot, weigh=weigh, load_part=load_part, stage_query=stage_query,
                dot_part=dot_part, weigh_part=weigh_part, stage_query_serial=stage_query_serial, score_part_serial=score_part_serial)


def attention_parts_kernel(spec: Attention, cpu: bool = False):
    """``Q [S, H*D]`` (heads side by side), ``past_k, past_v [MAX, KV*D]``, ``new_k, new_v [S,
    KV*D]``, ``bias [S, T]`` (float32: 0 where a query attends to a key, ``MASKED`` elsewhere) ->
    ``O [S, H, P, D]``, ``M [S, H, P]``, ``Lsum [S, H, P]`` (float32, ``P = ceil(T / ROWS)``; module
    docstring). ``cpu``: the serial form for llvm."""
    from tvm.script import tirx as T

    from .apply import hand_scheduled_attrs

    H, KV, D, dt, MAX = spec.heads, spec.kv_heads, spec.head_dim, spec.dtype, spec.max_len
    g, L, W, C = H // KV, spec.lanes, spec.threads, spec.columns
    VK = -(-D // W)  # value columns of a thread
    attrs = hand_scheduled_attrs("decode_attention", cpu)

    body = _part_macros(spec)
    load_values, weigh = body["load_values"], body["weigh"]
    load_part, stage_query, dot_part, weigh_part = body["load_part"], body["stage_query"], body["dot_part"], body["weigh_part"]
    stage_query_serial, score_part_serial = body["stage_query_serial"], body["score_part_serial"]

    @T.prim_func(private=True)
    def attention_parts(q_h: T.handle, past_k_h: T.handle, new_k_h: T.handle, past_v_h: T.handle,
                        new_v_h: T.handle, bias_h: T.handle, o_h: T.handle, m_h: T.handle, l_h: T.handle):  # fmt: skip
        T.func_attr(attrs)
        S = T.int64()
        Tn = T.int64()
        P = T.int64()
        Q = T.match_buffer(q_h, (S, H * D), dt)
        past_k = T.match_buffer(past_k_h, (MAX, KV * D), dt)
        new_k = T.match_buffer(new_k_h, (S, KV * D), dt)
        past_v = T.match_buffer(past_v_h, (MAX, KV * D), dt)
        new_v = T.match_buffer(new_v_h, (S, KV * D), dt)
        bias = T.match_buffer(bias_h, (S, Tn), "float32")
        O = T.match_buffer(o_h, (S, H, P, D), "float32")
        M = T.match_buffer(m_h, (S, H, P), "float32")
        Lsum = T.match_buffer(l_h, (S, H, P), "float32")
        if cpu:
            qs = T.alloc_buffer((L * C,), "float32")
            sc = T.alloc_buffer((ROWS,), "float32")
            ex = T.alloc_buffer((ROWS,), "float32")
            kreg = T.alloc_buffer((C,), "float32")
            vreg = T.alloc_buffer((1, ROWS), "float32")
            acc = T.alloc_buffer((1,), "float32")
            st = T.alloc_buffer((2,), "float32")
            for s, h, p in T.grid(S, H, P):
                stage_query_serial(s, h, Q, qs)
                score_part_serial(s, h, p, Tn, S, g, past_k, new_k, bias, qs, kreg, acc, sc, ex, st)
                for d in range(D):
                    load_values(p, Tn, Tn - S, h // g, d, past_v, new_v, vreg, 0)
                    weigh(ex, vreg, 0, acc)
                    O[s, h, p, d] = acc[0]
                M[s, h, p] = st[0]
                Lsum[s, h, p] = st[1]
        else:
            # (part, head, query on the three axes: no index is divided by a run-time extent here,
            # and no signed remainder is left for Vulkan's 32-bit indices)
            bx = T.launch_thread("blockIdx.x", T.min(P, parts(MAX)))  # (= P: T <= MAX)
            by = T.launch_thread("blockIdx.y", H)
            bz = T.launch_thread("blockIdx.z", T.min(S, MAX))
            tx = T.launch_thread("threadIdx.x", W)
            qs = T.alloc_buffer((L * C,), "float32", scope="shared")
            partial = T.alloc_buffer((W,), "float32", scope="shared")
            sc = T.alloc_buffer((ROWS,), "float32", scope="shared")
            ex = T.alloc_buffer((ROWS,), "float32", scope="shared")
            kreg = T.alloc_buffer((C,), "float32", scope="local")
            vreg = T.alloc_buffer((VK, ROWS), "float32", scope="local")
            acc = T.alloc_buffer((1,), "float32", scope="local")
            st = T.alloc_buffer((3,), "float32", scope="local")
            mp = T.alloc_buffer((1,), "float32", scope="shared")
            # every load of the thread first (its key columns, its value columns, its row's bias),
            # so that the kernel waits for memory once
            load_part(bx, Tn, Tn - S, by // g, bz, tx, past_k, new_k, past_v, new_v, bias, kreg, vreg, st)
            stage_query(bz, by, tx, Q, qs)
            T.tvm_storage_sync("shared")
            dot_part(tx, qs, kreg, partial, acc)
            weigh_part(bx, Tn, tx, partial, sc, ex, st, mp)
            if tx == 0:
                st[1] = T.float32(0)
                for r in range(ROWS):
                    st[1] = st[1] + ex[r]
                M[bz, by, bx] = st[0]
                Lsum[bz, by, bx] = st[1]
            for k in T.unroll(VK):
                if tx + k * W < D:
                    weigh(ex, vreg, k, acc)
                    O[bz, by, bx, tx + k * W] = acc[0]

    return attention_parts.with_attr(ATTENTION_ATTR, spec.to_json("parts"))


def attention_one_pass_kernel(spec: Attention, cpu: bool = False):
    """The inputs of :func:`attention_parts_kernel` -> ``Y [S, H*D]`` in the model's dtype, as
    :func:`attention_combine_kernel` makes it, in one kernel: one workgroup per (query, head) steps
    through the parts itself, each part's scores, ``m``, ``l`` and value sums computed as the parts
    kernel does, and folds them into a running ``(m, l, o)`` (``o`` in the registers of the thread
    that owns its value column): ``m' = max(m, m_p)``, ``l' = l e^(m - m') + l_p e^(m_p - m')``, the
    same for ``o``. One launch a layer where the pair takes two, with ``ceil(T / ROWS)`` parts in
    sequence where the pair runs them side by side. ``cpu``: the serial form for llvm."""
    from tvm.script import tirx as T

    from .apply import hand_scheduled_attrs

    H, KV, D, dt, MAX = spec.heads, spec.kv_heads, spec.head_dim, spec.dtype, spec.max_len
    g, L, W, C = H // KV, spec.lanes, spec.threads, spec.columns
    VK = -(-D // W)
    attrs = hand_scheduled_attrs("decode_attention", cpu)
    body = _part_macros(spec)
    load_key, load_values, weigh = body["load_key"], body["load_values"], body["weigh"]
    load_part, stage_query, dot_part, weigh_part = body["load_part"], body["stage_query"], body["dot_part"], body["weigh_part"]
    stage_query_serial, score_part_serial = body["stage_query_serial"], body["score_part_serial"]

    @T.macro
    def fold(mp, lp, op, run, o, k):  # the running (m, l, o[k]) with a part's (m_p, l_p, o_p[k])
        run[2] = T.max(run[0], mp)
        run[3] = T.exp(run[0] - run[2])  # (0 at the first part: run[0] is float32's lowest)
        run[4] = T.exp(mp - run[2])
        o[k] = o[k] * run[3] + op * run[4]
        if k == 0:
            run[1] = run[1] * run[3] + lp * run[4]

    @T.prim_func(private=True)
    def attention_one_pass(q_h: T.handle, past_k_h: T.handle, new_k_h: T.handle, past_v_h: T.handle,
                           new_v_h: T.handle, bias_h: T.handle, y_h: T.handle):  # fmt: skip
        T.func_attr(attrs)
        S = T.int64()
        Tn = T.int64()
        Q = T.match_buffer(q_h, (S, H * D), dt)
        past_k = T.match_buffer(past_k_h, (MAX, KV * D), dt)
        new_k = T.match_buffer(new_k_h, (S, KV * D), dt)
        past_v = T.match_buffer(past_v_h, (MAX, KV * D), dt)
        new_v = T.match_buffer(new_v_h, (S, KV * D), dt)
        bias = T.match_buffer(bias_h, (S, Tn), "float32")
        Y = T.match_buffer(y_h, (S, H * D), dt)
        if cpu:
            qs = T.alloc_buffer((L * C,), "float32")
            sc = T.alloc_buffer((ROWS,), "float32")
            ex = T.alloc_buffer((ROWS,), "float32")
            kreg = T.alloc_buffer((C,), "float32")
            vreg = T.alloc_buffer((1, ROWS), "float32")
            acc = T.alloc_buffer((1,), "float32")
            st = T.alloc_buffer((2,), "float32")
            o = T.alloc_buffer((D,), "float32")
            run = T.alloc_buffer((5,), "float32")
            for s, h in T.grid(S, H):
                stage_query_serial(s, h, Q, qs)
                run[0] = T.float32(LOWEST)
                run[1] = T.float32(0)
                for d in range(D):
                    o[d] = T.float32(0)
                for p in range((Tn + ROWS - 1) // ROWS):
                    score_part_serial(s, h, p, Tn, S, g, past_k, new_k, bias, qs, kreg, acc, sc, ex, st)
                    for d in range(D):
                        load_values(p, Tn, Tn - S, h // g, d, past_v, new_v, vreg, 0)
                        weigh(ex, vreg, 0, acc)
                        fold(st[0], st[1], acc[0], run, o, d)
                    run[0] = run[2]
                for d in range(D):
                    Y[s, h * D + d] = T.Cast(dt, o[d] / run[1])
        else:
            bx = T.launch_thread("blockIdx.x", H)
            by = T.launch_thread("blockIdx.y", T.min(S, MAX))  # (= S: S <= T <= MAX)
            tx = T.launch_thread("threadIdx.x", W)
            qs = T.alloc_buffer((L * C,), "float32", scope="shared")
            partial = T.alloc_buffer((W,), "float32", scope="shared")
            sc = T.alloc_buffer((ROWS,), "float32", scope="shared")
            ex = T.alloc_buffer((ROWS,), "float32", scope="shared")
            mp = T.alloc_buffer((1,), "float32", scope="shared")
            kreg = T.alloc_buffer((C,), "float32", scope="local")
            vreg = T.alloc_buffer((VK, ROWS), "float32", scope="local")
            vnext = T.alloc_buffer((VK, ROWS), "float32", scope="local")
            acc = T.alloc_buffer((1,), "float32", scope="local")
            st = T.alloc_buffer((4,), "float32", scope="local")
            o = T.alloc_buffer((VK,), "float32", scope="local")
            run = T.alloc_buffer((5,), "float32", scope="local")
            first = Tn - S
            load_part(0, Tn, first, bx // g, by, tx, past_k, new_k, past_v, new_v, bias, kreg, vreg, st)
            stage_query(by, bx, tx, Q, qs)
            run[0] = T.float32(LOWEST)
            run[1] = T.float32(0)
            for k in T.unroll(VK):
                o[k] = T.float32(0)
            T.tvm_storage_sync("shared")
            # The parts in sequence, each step's barriers reached by every thread (the trip count
            # is the workgroup's). The next part's keys, values and bias (st[3]) are loaded as soon
            # as this part's are used, so that their wait overlaps this part's barriers and sums
            # (past the last part: rows clamped to T - 1, read and unused). No barrier ends a step:
            # the next one writes what this one reads only past its own first two barriers.
            for p in range((Tn + ROWS - 1) // ROWS):
                dot_part(tx, qs, kreg, partial, acc)
                load_key(T.min((p + 1) * ROWS + tx // L, Tn - 1), first, tx % L * C, bx // g, past_k, new_k, kreg)
                for k in T.unroll(VK):
                    load_values(p + 1, Tn, first, bx // g, T.min(tx + k * W, D - 1), past_v, new_v, vnext, k)
                st[3] = bias[by, T.min((p + 1) * ROWS + tx % ROWS, Tn - 1)]
                weigh_part(p, Tn, tx, partial, sc, ex, st, mp)
                st[1] = T.float32(0)
                for r in range(ROWS):
                    st[1] = st[1] + ex[r]
                for k in T.unroll(VK):
                    weigh(ex, vreg, k, acc)
                    fold(mp[0], st[1], acc[0], run, o, k)
                run[0] = run[2]
                st[2] = st[3]
                for k in T.unroll(VK):
                    for r in T.unroll(ROWS):
                        vreg[k, r] = vnext[k, r]
            for k in T.unroll(VK):
                if tx + k * W < D:
                    Y[by, bx * D + tx + k * W] = T.Cast(dt, o[k] / run[1])

    return attention_one_pass.with_attr(ATTENTION_ATTR, spec.to_json("one_pass"))


def attention_combine_kernel(spec: Attention, cpu: bool = False):
    """``O [S, H, P, D]``, ``M [S, H, P]``, ``Lsum [S, H, P]`` (:func:`attention_parts_kernel`) ->
    ``Y [S, H*D]`` in the model's dtype (heads side by side, as the output projection reads them):
    one thread per value. ``cpu``: the serial form for llvm."""
    from tvm.script import tirx as T

    from .apply import hand_scheduled_attrs

    H, D, dt, MAX = spec.heads, spec.head_dim, spec.dtype, spec.max_len
    U = parts(MAX) if parts(MAX) <= MAX_UNROLLED_PARTS else 4
    W = min(256, 32 * -(-D // 32))
    attrs = hand_scheduled_attrs("decode_attention", cpu)

    @T.macro
    def combine(s, h, d, P, O, M, Lsum, Y, st):
        # U parts a step, unrolled (their loads issue together; a part past P reads the last and
        # weighs 0): every part in one step when the cache's parts are few
        st[0] = T.float32(LOWEST)
        for p4 in range((P + U - 1) // U):
            for j in T.unroll(U):
                st[0] = T.max(st[0], M[s, h, T.min(p4 * U + j, P - 1)])
        st[1] = T.float32(0)
        st[2] = T.float32(0)
        for p4 in range((P + U - 1) // U):
            for j in T.unroll(U):
                st[3] = T.if_then_else(p4 * U + j < P, T.exp(M[s, h, T.min(p4 * U + j, P - 1)] - st[0]), T.float32(0))
                st[1] = st[1] + O[s, h, T.min(p4 * U + j, P - 1), d] * st[3]
                st[2] = st[2] + Lsum[s, h, T.min(p4 * U + j, P - 1)] * st[3]
        Y[s, h * D + d] = T.Cast(dt, st[1] / st[2])

    @T.prim_func(private=True)
    def attention_combine(o_h: T.handle, m_h: T.handle, l_h: T.handle, y_h: T.handle):
        T.func_attr(attrs)
        S = T.int64()
        P = T.int64()
        O = T.match_buffer(o_h, (S, H, P, D), "float32")
        M = T.match_buffer(m_h, (S, H, P), "float32")
        Lsum = T.match_buffer(l_h, (S, H, P), "float32")
        Y = T.match_buffer(y_h, (S, H * D), dt)
        if cpu:
            st = T.alloc_buffer((4,), "float32")
            for s, h, d in T.grid(S, H, D):
                combine(s, h, d, P, O, M, Lsum, Y, st)
        else:
            bx = T.launch_thread("blockIdx.x", H)
            by = T.launch_thread("blockIdx.y", T.min(S, MAX))  # (= S: S <= T <= MAX)
            tx = T.launch_thread("threadIdx.x", W)
            st = T.alloc_buffer((4,), "float32", scope="local")
            for k in range((D + W - 1) // W):
                if tx + k * W < D:
                    combine(by, bx, tx + k * W, P, O, M, Lsum, Y, st)

    return attention_combine.with_attr(ATTENTION_ATTR, spec.to_json("combine"))


def cpu_form(func):
    """The serial CPU form of an attention kernel (None for any other PrimFunc)."""
    if func.attrs is None or ATTENTION_ATTR not in func.attrs:
        return None
    fields = json.loads(str(func.attrs[ATTENTION_ATTR]))
    kernel = fields.pop("kernel")
    make = {"parts": attention_parts_kernel, "combine": attention_combine_kernel, "one_pass": attention_one_pass_kernel}[kernel]
    return make(Attention(**fields), cpu=True)
