"""A decoder's rotary embedding of its queries and keys (with Qwen3's per-head RMSNorm first): one
hand-scheduled kernel for both, which also hands the values on.

The q, k and v projections are one product, ``[S, (H + 2 KV) * D]`` (q's heads, k's, v's). The
kernel writes the rotated queries ``[S, H*D]``, the rotated keys ``[S, KV*D]`` and the values
``[S, KV*D]`` (the keys and values are the layer's new cache rows, tensors of their own) from it in
one launch: one workgroup per (head, token), over the ``H + 2 KV`` heads, its threads on pairs ``(i,
i + D/2)`` of the head -- the two values ``rotate_half`` mixes; a value head's workgroup copies.

Per head, as transformers computes it (``Qwen3Attention``, ``apply_rotary_pos_emb``):

* ``norm``: the head's sum of squares in float32 (each thread its pairs' squares, then every
  thread the workgroup's partials), ``y = x * rsqrt(mean + eps)`` in float32, rounded to the
  model's dtype, times the norm's weight (``q_norm`` or ``k_norm``) in that dtype;
* ``y * cos + rotate_half(y) * sin`` in the model's dtype: ``y_i cos_i - y_{i+D/2} sin_i`` and
  ``y_{i+D/2} cos_{i+D/2} + y_i sin_{i+D/2}``.

The kernel also has a serial CPU form (``cpu=True``) that the CPU reference
(:mod:`relax_vk.analysis.reference`) runs in its place, found by :data:`ROTARY_ATTR`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

#: the PrimFunc attribute holding a kernel's :class:`Rotary` (JSON)
ROTARY_ATTR = "relax_vk.rotary"
#: threads of a workgroup at most (every Vulkan device offers 256)
MAX_THREADS = 256


@dataclass(frozen=True)
class Rotary:
    """The rotary embedding of one model: ``heads`` query and ``kv_heads`` key heads of
    ``head_dim`` values (even), ``norm`` (Qwen3's per-head RMSNorm of ``eps`` first), tokens per
    call at most ``max_len`` (the grid is then known to fit the workgroup limit), values in
    ``dtype``. Checked on construction (ValueError)."""

    heads: int
    kv_heads: int
    head_dim: int
    max_len: int
    norm: bool = False
    eps: float = 1e-6
    dtype: str = "float32"

    def __post_init__(self):
        if self.heads < 1 or self.kv_heads < 1 or self.max_len < 1:
            raise ValueError(f"heads {self.heads}, kv_heads {self.kv_heads}, max_len {self.max_len}: positive")
        if self.head_dim < 2 or self.head_dim % 2:
            raise ValueError(f"head_dim {self.head_dim}: even (RoPE rotates pairs)")
        if self.dtype not in ("float32", "float16"):
            raise ValueError(f"dtype {self.dtype!r}: float32 or float16")

    @property
    def threads(self) -> int:
        return min(MAX_THREADS, 32 * -(-(self.head_dim // 2) // 32))

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def rotary_kernel(spec: Rotary, cpu: bool = False):
    """``QKV [S, (H+2KV)*D]``, ``cos, sin [S, 1, D]`` (and, with ``norm``, the q and k norms'
    weights ``[D]``) -> ``Q [S, H*D]``, ``K [S, KV*D]``, ``V [S, KV*D]`` (module docstring).
    ``cpu``: the serial form for llvm."""
    from tvm.script import tirx as T

    from .apply import hand_scheduled_attrs

    H, KV, D, dt, MAX, norm = spec.heads, spec.kv_heads, spec.head_dim, spec.dtype, spec.max_len, spec.norm
    half, W = D // 2, spec.threads
    PK = -(-half // W)  # pairs of a thread
    eps = float(spec.eps)
    attrs = hand_scheduled_attrs("rotary", cpu)

    def normed(v, i, head, scale, QW, KW):  # (an expression) value v at place i of head, after the head's norm
        if not norm:
            return v
        weight = T.if_then_else(head < H, QW[i], KW[i])
        if dt == "float32":
            return T.Cast("float32", v) * scale * weight
        return T.Cast(dt, T.Cast("float32", v) * scale) * weight

    @T.macro
    def rotate(s, head, i, a, b, scale, COS, SIN, QW, KW, QO, KO, VO):  # the pair (i, i + D/2) of head, values a, b
        na = normed(a, i, head, scale, QW, KW)
        nb = normed(b, i + half, head, scale, QW, KW)
        if head >= H + KV:
            VO[s, (head - H - KV) * D + i] = a
            VO[s, (head - H - KV) * D + i + half] = b
        elif head < H:
            QO[s, head * D + i] = na * COS[s, 0, i] + -nb * SIN[s, 0, i]
            QO[s, head * D + i + half] = nb * COS[s, 0, i + half] + na * SIN[s, 0, i + half]
        else:
            KO[s, (head - H) * D + i] = na * COS[s, 0, i] + -nb * SIN[s, 0, i]
            KO[s, (head - H) * D + i + half] = nb * COS[s, 0, i + half] + na * SIN[s, 0, i + half]

    def scale_of(total):
        return T.rsqrt(total / T.float32(D) + T.float32(eps))

    @T.macro
    def body(X, COS, SIN, QW, KW, QO, KO, VO, S):
        if cpu:
            st = T.alloc_buffer((2,), "float32")  # (not one element: a one-element buffer at the root is a scalar llvm cannot lower)
            for s, head in T.grid(S, H + 2 * KV):
                st[0] = T.float32(0)
                if norm and head < H + KV:
                    for i in range(D):
                        st[0] = st[0] + T.Cast("float32", X[s, head * D + i]) * T.Cast("float32", X[s, head * D + i])
                for i in range(half):
                    rotate(s, head, i, X[s, head * D + i], X[s, head * D + i + half], scale_of(st[0]), COS, SIN, QW, KW, QO, KO, VO)
        else:
            bx = T.launch_thread("blockIdx.x", H + 2 * KV)
            by = T.launch_thread("blockIdx.y", T.min(S, MAX))  # (= S: S <= MAX)
            tx = T.launch_thread("threadIdx.x", W)
            partial = T.alloc_buffer((W,), "float32", scope="shared")
            xr = T.alloc_buffer((PK, 2), dt, scope="local")
            st = T.alloc_buffer((2,), "float32", scope="local")
            for k in T.unroll(PK):  # (a thread past the pairs reads the last: its square is not counted)
                xr[k, 0] = X[by, bx * D + T.min(tx + k * W, half - 1)]
                xr[k, 1] = X[by, bx * D + T.min(tx + k * W, half - 1) + half]
            st[1] = T.float32(0)
            if norm:  # (a value head's sum is not used: every workgroup reaches the barrier)
                st[0] = T.float32(0)
                for k in T.unroll(PK):
                    if tx + k * W < half:
                        st[0] = st[0] + T.Cast("float32", xr[k, 0]) * T.Cast("float32", xr[k, 0]) + T.Cast("float32", xr[k, 1]) * T.Cast("float32", xr[k, 1])
                partial[tx] = st[0]
                T.tvm_storage_sync("shared")
                for j in T.unroll(W):
                    st[1] = st[1] + partial[j]
            for k in T.unroll(PK):
                if tx + k * W < half:
                    rotate(by, bx, tx + k * W, xr[k, 0], xr[k, 1], scale_of(st[1]), COS, SIN, QW, KW, QO, KO, VO)

    @T.macro
    def signature(x_h, cos_h, sin_h, QW, KW, q_h, k_h, v_h):  # the buffers of both forms of the kernel
        T.func_attr(attrs)
        S = T.int64()
        X = T.match_buffer(x_h, (S, (H + 2 * KV) * D), dt)
        COS = T.match_buffer(cos_h, (S, 1, D), dt)
        SIN = T.match_buffer(sin_h, (S, 1, D), dt)
        QO = T.match_buffer(q_h, (S, H * D), dt)
        KO = T.match_buffer(k_h, (S, KV * D), dt)
        VO = T.match_buffer(v_h, (S, KV * D), dt)
        body(X, COS, SIN, QW, KW, QO, KO, VO, S)

    if norm:  # (the norms' weights are parameters only when there is a norm)

        @T.prim_func(private=True)
        def rotary(x_h: T.handle, cos_h: T.handle, sin_h: T.handle, QW: T.Buffer((D,), dt), KW: T.Buffer((D,), dt), q_h: T.handle, k_h: T.handle,
                   v_h: T.handle):  # fmt: skip
            signature(x_h, cos_h, sin_h, QW, KW, q_h, k_h, v_h)

    else:

        @T.prim_func(private=True)
        def rotary(x_h: T.handle, cos_h: T.handle, sin_h: T.handle, q_h: T.handle, k_h: T.handle, v_h: T.handle):
            signature(x_h, cos_h, sin_h, None, None, q_h, k_h, v_h)

    return rotary.with_attr(ROTARY_ATTR, spec.to_json())


def cpu_form(func):
    """The serial CPU form of a rotary kernel (None for any other PrimFunc)."""
    if func.attrs is None or ROTARY_ATTR not in func.attrs:
        return None
    return rotary_kernel(Rotary(**json.loads(str(func.attrs[ROTARY_ATTR]))), cpu=True)
