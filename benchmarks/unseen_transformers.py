"""Transformer blocks the zoo does not have, as PyTorch writes them: how much of each stays in
textures, and whether it still computes what PyTorch computes.

The zoo's transformers are what the token layout was built on; these are the variants an
unseen model brings: ``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer`` (pre- and
post-norm), ``F.scaled_dot_product_attention`` with and without ``is_causal`` (PyTorch's math
path once exported: k^T scaled, an additive mask, the guard for fully masked rows), token counts
and widths that are not multiples of 4 (a class token, a width of 30, GELU's tanh form,
LayerNorm without affine terms), RMSNorm + SwiGLU, cross-attention, an MLP-Mixer's token mixing,
LeViT's BatchNorm over tokens with a gathered attention-bias table, MobileViTv2's separable
attention, a PoolFormer block (GroupNorm), and attention masked by a bool input (``masked_fill(~mask,
-inf)``, ``key_padding_mask``). Each is compiled for OpenCL and Vulkan under the
texture and the all-buffer plan, run on pocl and lavapipe and compared with PyTorch::

    python benchmarks/unseen_transformers.py              # all (a few minutes on 2 cores)
    python benchmarks/unseen_transformers.py sdpa levit   # some

One row per (model, API, plan): result (OK within 1e-4 of the output's scale), error, activation
bytes in textures, copies, kernels. Exit code 1 when a row is not OK.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np


def _models():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class MHA(nn.Module):  # nn.MultiheadAttention (batch_first), mean over tokens, batch 2
        def __init__(s, d=32, h=4):
            super().__init__()
            s.ln, s.a, s.fc = nn.LayerNorm(d), nn.MultiheadAttention(d, h, batch_first=True), nn.Linear(d, 10)

        def forward(s, x):
            y = s.ln(x)
            return s.fc((x + s.a(y, y, y, need_weights=False)[0]).mean(1))

    class SDPA(nn.Module):
        def __init__(s, d=24, h=3, causal=False):
            super().__init__()
            s.h, s.causal, s.qkv, s.o = h, causal, nn.Linear(d, 3 * d), nn.Linear(d, d)

        def forward(s, x):
            b, n, d = x.shape
            q, k, v = s.qkv(x).reshape(b, n, 3, s.h, d // s.h).permute(2, 0, 3, 1, 4)
            return x + s.o(F.scaled_dot_product_attention(q, k, v, is_causal=s.causal).transpose(1, 2).reshape(b, n, d))

    class ViTOdd(nn.Module):  # class token, width 30, LayerNorm without affine terms, GELU tanh
        def __init__(s, d=30, h=3):
            super().__init__()
            s.h, s.pe = h, nn.Conv2d(3, d, 8, 8)
            s.cls, s.pos = nn.Parameter(torch.randn(1, 1, d)), nn.Parameter(torch.randn(1, 17, d) * 0.1)
            s.ln1, s.qkv, s.proj = nn.LayerNorm(d, elementwise_affine=False), nn.Linear(d, 3 * d), nn.Linear(d, d)
            s.ln2, s.f1, s.f2, s.head = nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.Linear(2 * d, d), nn.Linear(d, 7)

        def forward(s, x):
            t = s.pe(x).flatten(2).transpose(1, 2)
            b, n, d = t.shape
            t = torch.cat([s.cls.expand(b, -1, -1), t], 1) + s.pos
            q, k, v = s.qkv(s.ln1(t)).reshape(b, n + 1, 3, s.h, d // s.h).permute(2, 0, 3, 1, 4)
            a = (q @ k.transpose(-2, -1) / math.sqrt(d // s.h)).softmax(-1)
            t = t + s.proj((a @ v).transpose(1, 2).reshape(b, n + 1, d))
            return s.head((t + s.f2(F.gelu(s.f1(s.ln2(t)), approximate="tanh")))[:, 0])

    class RMSSwiGLU(nn.Module):
        def __init__(s, d=16):
            super().__init__()
            s.n, s.w1, s.w3, s.w2 = nn.RMSNorm(d), nn.Linear(d, 40, bias=False), nn.Linear(d, 40, bias=False), nn.Linear(40, d, bias=False)

        def forward(s, x):
            y = s.n(x)
            return x + s.w2(F.silu(s.w1(y)) * s.w3(y))

    class ConvAttention(nn.Module):  # a conv map as tokens, attention, back to a map; batch 2
        def __init__(s, c=20, h=2):
            super().__init__()
            s.c1, s.ln, s.a, s.c2 = nn.Conv2d(3, c, 3, 2, 1), nn.LayerNorm(c), nn.MultiheadAttention(c, h, batch_first=True), nn.Conv2d(c, 8, 1)

        def forward(s, x):
            y = F.relu(s.c1(x))
            b, c, hh, ww = y.shape
            t = y.flatten(2).transpose(1, 2)
            z = s.ln(t)
            return s.c2((t + s.a(z, z, z, need_weights=False)[0]).transpose(1, 2).reshape(b, c, hh, ww))

    class CrossAttention(nn.Module):  # queries from one sequence, keys and values from another
        def __init__(s, d=16):
            super().__init__()
            s.q, s.kv, s.o = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)

        def forward(s, x, m):
            k, v = s.kv(m).chunk(2, -1)
            return s.o(torch.softmax(s.q(x) @ k.transpose(1, 2) * 0.25, -1) @ v)

    class Mixer(nn.Module):  # MLP-Mixer: a Linear over the 13 tokens, then over the channels
        def __init__(s, n=13, d=12):
            super().__init__()
            s.ln, s.tok, s.ch = nn.LayerNorm(d), nn.Linear(n, n), nn.Linear(d, d)

        def forward(s, x):
            x = x + s.tok(s.ln(x).transpose(1, 2)).transpose(1, 2)
            return x + s.ch(F.gelu(x))

    class LeViTAttention(nn.Module):  # Linear + BatchNorm1d over tokens, attention biases from a table, hard-swish
        def __init__(s, d=32, h=4, res=7):
            super().__init__()
            s.h, s.qkv, s.bn, s.proj = h, nn.Linear(d, 3 * d, bias=False), nn.BatchNorm1d(3 * d), nn.Linear(d, d)
            points = [(i, j) for i in range(res) for j in range(res)]
            offsets, idxs = {}, []
            for p1 in points:
                for p2 in points:
                    idxs.append(offsets.setdefault((abs(p1[0] - p2[0]), abs(p1[1] - p2[1])), len(offsets)))
            s.ab = nn.Parameter(torch.randn(h, len(offsets)) * 0.5)
            s.register_buffer("idx", torch.tensor(idxs).view(res * res, res * res))
            with torch.no_grad():
                s.bn.running_mean.normal_()
                s.bn.running_var.uniform_(0.5, 1.5)

        def forward(s, x):
            b, n, d = x.shape
            q, k, v = s.bn(s.qkv(x).flatten(0, 1)).view(b, n, 3, s.h, d // s.h).permute(2, 0, 3, 1, 4)
            a = (q @ k.transpose(-2, -1)) * (d // s.h) ** -0.5 + s.ab[:, s.idx]
            return s.proj(F.hardswish((a.softmax(-1) @ v).transpose(1, 2).reshape(b, n, d)))

    class SeparableAttention(nn.Module):  # MobileViTv2 on [B, C, P, N]
        def __init__(s, c=16):
            super().__init__()
            s.c, s.qkv, s.out = c, nn.Conv2d(c, 1 + 2 * c, 1), nn.Conv2d(c, c, 1)

        def forward(s, x):
            q, k, v = torch.split(s.qkv(x), [1, s.c, s.c], dim=1)
            context = (k * F.softmax(q, dim=-1)).sum(dim=-1, keepdim=True)
            return s.out(F.relu(v) * context.expand_as(v))

    class PoolFormer(nn.Module):  # GroupNorm(1, C), pooling as the token mixer, MLP of 1x1 convs
        def __init__(s, c=24):
            super().__init__()
            s.n1, s.n2, s.pool = nn.GroupNorm(1, c), nn.GroupNorm(1, c), nn.AvgPool2d(3, 1, 1, count_include_pad=False)
            s.f1, s.f2 = nn.Conv2d(c, 4 * c, 1), nn.Conv2d(4 * c, c, 1)

        def forward(s, x):
            y = s.n1(x)
            x = x + (s.pool(y) - y)
            return x + s.f2(F.gelu(s.f1(s.n2(x))))

    class MaskedAttention(nn.Module):  # scores.masked_fill(~mask, -inf) with a bool key mask input
        def __init__(s, d=32, h=2):
            super().__init__()
            s.h, s.qkv, s.o = h, nn.Linear(d, 3 * d), nn.Linear(d, d)

        def forward(s, x, mask):
            b, n, d = x.shape
            q, k, v = s.qkv(x).reshape(b, n, 3, s.h, d // s.h).permute(2, 0, 3, 1, 4)
            a = ((q @ k.transpose(-2, -1)) * 0.25).masked_fill(~mask[:, None, None, :], float("-inf")).softmax(-1)
            return x + s.o((a @ v).transpose(1, 2).reshape(b, n, d))

    class KeyPadding(nn.Module):  # nn.MultiheadAttention with key_padding_mask
        def __init__(s, d=32, h=4):
            super().__init__()
            s.a = nn.MultiheadAttention(d, h, batch_first=True)

        def forward(s, x, padding):
            return s.a(x, x, x, key_padding_mask=padding, need_weights=False)[0]

    def encoder(norm_first, act):
        return nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation=act, batch_first=True, norm_first=norm_first)

    return {
        "multihead_attention": (lambda: MHA(), [(2, 10, 32)]),
        "sdpa": (lambda: SDPA(), [(1, 9, 24)]),
        "sdpa_causal": (lambda: SDPA(causal=True), [(1, 9, 24)]),
        "sdpa_causal_batch2": (lambda: SDPA(d=32, h=2, causal=True), [(2, 16, 32)]),
        "encoder_prenorm": (lambda: encoder(True, "gelu"), [(1, 12, 32)]),
        "encoder_postnorm_relu": (lambda: encoder(False, "relu"), [(2, 7, 32)]),
        "vit_width30": (lambda: ViTOdd(), [(1, 3, 32, 32)]),
        "rmsnorm_swiglu": (lambda: RMSSwiGLU(), [(1, 11, 16)]),
        "conv_attention": (lambda: ConvAttention(), [(2, 3, 16, 12)]),
        "cross_attention": (lambda: CrossAttention(), [(1, 5, 16), (1, 9, 16)]),
        "mlp_mixer": (lambda: Mixer(), [(1, 13, 12)]),
        "levit_attention": (lambda: LeViTAttention(), [(1, 49, 32)]),
        "separable_attention": (lambda: SeparableAttention(), [(1, 16, 4, 36)]),
        "poolformer": (lambda: PoolFormer(), [(1, 24, 14, 14)]),
        "masked_attention": (lambda: MaskedAttention(), [(2, 13, 32), ("keep", (2, 13))]),
        "key_padding_mask": (lambda: KeyPadding(), [(2, 10, 32), ("padding", (2, 10))]),
    }


def _input(spec, torch):
    """A float input of shape ``spec``, or a bool key mask ``(kind, shape)``: the last three keys of
    the second sequence masked (``"keep"``: True where attended, ``"padding"``: True where not)."""
    if not isinstance(spec[0], str):
        return torch.randn(*spec)
    kind, shape = spec
    keep = torch.ones(*shape, dtype=torch.bool)
    keep[-1, -3:] = False
    return keep if kind == "keep" else ~keep


def main(argv=None) -> int:
    import torch

    import relax_vk
    from relax_vk.frontends import from_torch
    from relax_vk.runtime import load

    models = _models()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", choices=[[]] + sorted(models), help="default: all")
    parser.add_argument("--plans", nargs="+", default=["texture", "buffer"], choices=["texture", "buffer"])
    parser.add_argument("--apis", nargs="+", default=["opencl", "vulkan"], choices=["opencl", "vulkan"])
    args = parser.parse_args(argv)
    print(f"{'model':22s} {'api':7s} {'plan':8s} result  max rel err  textures  copies  kernels  seconds")
    bad = 0
    for name in args.models or list(models):
        make, shapes = models[name]
        torch.manual_seed(0)
        model = make().eval()
        with torch.no_grad():
            for p in model.parameters():  # away from LayerNorm's ones and zeros
                p.add_(torch.randn_like(p) * 0.05)
        inputs = [_input(s, torch) for s in shapes]
        with torch.no_grad():
            expected = model(*inputs)
        expected = [e.numpy() for e in (expected if isinstance(expected, tuple) else (expected,))]
        mod = from_torch(model, tuple(inputs))
        for api, device in (("opencl", "pocl"), ("vulkan", "lavapipe")):
            if api not in args.apis:
                continue
            for plan in args.plans:
                t0 = time.perf_counter()
                try:
                    compiled = relax_vk.build(mod, target=api, options=relax_vk.ScopeOptions(prefer=plan))
                    outs = load(compiled.artifact(), device=device).run([x.numpy() for x in inputs])
                    err = max(float(np.max(np.abs(o - e)) / max(1e-6, float(np.max(np.abs(e))))) for o, e in zip(outs, expected))
                    p = compiled.plan()
                    result = "OK" if err < 1e-4 else "WRONG"
                    row = f"{err:11.1e}  {100 * p.activation_texture_share:7.1f}%  {p.copies:6d}  {len(compiled.kernels):7d}"
                except Exception as e:  # noqa: BLE001 (a row, not a traceback)
                    result, row = "FAIL", f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
                bad += result != "OK"
                print(f"{name:22s} {api:7s} {plan:8s} {result:6s} {row}  {time.perf_counter() - t0:7.1f}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
