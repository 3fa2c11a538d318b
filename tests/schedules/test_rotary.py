"""The decoder's rotary kernel (relax_vk.schedules.rotary): queries and keys rotated in one launch
(with Qwen3's per-head RMSNorm first) and the values handed on, right against numpy's
transformers-style computation at every size of one artifact, on pocl and lavapipe, and in its CPU
form."""

import numpy as np
import pytest
from tvm import relax, tirx

import relax_vk
from relax_vk.analysis.reference import run_on_cpu
from relax_vk.core.dims import with_dim_ranges
from relax_vk.runtime import Session
from relax_vk.schedules.rotary import Rotary, rotary_kernel

MAX = 16


def _module(spec: Rotary, qw, kw):
    S = tirx.Var("S", "int64")
    H, KV, D, dt = spec.heads, spec.kv_heads, spec.head_dim, spec.dtype
    params = [relax.Var("qkv", relax.TensorType((S, (H + 2 * KV) * D), dt)), relax.Var("cos", relax.TensorType((S, 1, D), dt)),
              relax.Var("sin", relax.TensorType((S, 1, D), dt))]  # fmt: skip
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            kernel = bb.add_func(rotary_kernel(spec), "rotary")
            norms = [relax.const(qw), relax.const(kw)] if spec.norm else []
            both = bb.emit(relax.call_tir(kernel, params + norms, out_ty=[relax.TensorType((S, H * D), dt)] + [relax.TensorType((S, KV * D), dt)] * 2))
            out = bb.emit_output(relax.Tuple([bb.emit(relax.TupleGetItem(both, j)) for j in range(3)]))
        bb.emit_func_output(out)
    return with_dim_ranges(bb.get(), {"S": (1, MAX)})


def _reference(spec: Rotary, qw, kw, qkv, cos, sin):
    """transformers' order: the norm in float32, rounded, times the weight in the dtype; the rotation
    in the dtype."""
    H, KV, D, dt = spec.heads, spec.kv_heads, spec.head_dim, spec.dtype
    S = qkv.shape[0]
    y = qkv.reshape(S, H + 2 * KV, D)[:, : H + KV]
    if spec.norm:
        x = y.astype(np.float32)
        y = (x / np.sqrt((x * x).mean(-1, keepdims=True) + np.float32(spec.eps))).astype(dt)
        y = (y * np.concatenate([np.tile(qw, (H, 1)), np.tile(kw, (KV, 1))])[None]).astype(dt)
    out = (y * cos + np.concatenate([-y[..., D // 2 :], y[..., : D // 2]], -1) * sin).astype(dt)
    return out[:, :H].reshape(S, -1), out[:, H:].reshape(S, -1), qkv[:, (H + KV) * D :]


#: tokens per call: one (decode), a few, the bound
SIZES = (1, 3, MAX)


def _case(spec: Rotary, seed: int):
    """The norms' weights and the generator of the inputs."""
    rng = np.random.default_rng(seed)
    qw, kw = (0.5 + rng.random((2, spec.head_dim))).astype(spec.dtype)
    return qw, kw, rng


def _inputs(spec: Rotary, S: int, rng):
    H, KV, D = spec.heads, spec.kv_heads, spec.head_dim
    return [rng.standard_normal(shape).astype(spec.dtype) for shape in [(S, (H + 2 * KV) * D), (S, 1, D), (S, 1, D)]]


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.parametrize("heads, kv_heads, head_dim, norm", [(4, 2, 64, True), (4, 2, 64, False), (6, 2, 80, True), (2, 1, 600, True)])
def test_queries_and_keys_are_rotated_and_values_handed_on_in_one_launch(heads, kv_heads, head_dim, norm, target, device, request):
    """Pairs on threads: a head of 64 (32 pairs: one warp), of 80 (40 pairs: threads past them idle)
    and of 600 (300 pairs: two a thread); with and without the per-head norm."""
    request.getfixturevalue(device)
    spec = Rotary(heads, kv_heads, head_dim, MAX, norm)
    qw, kw, rng = _case(spec, 0)
    artifact = relax_vk.build(_module(spec, qw, kw), target).artifact()
    assert [k.get("schedule") for k in artifact.program["kernels"]] == ["rotary"]
    session = Session(artifact, device=device)
    for S in SIZES:
        args = _inputs(spec, S, rng)
        for got, want in zip(session.run(args), _reference(spec, qw, kw, *args)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"S={S}")


@pytest.mark.parametrize("norm", [True, False])
def test_float16_is_rounded_where_transformers_rounds(norm, lavapipe):
    """float16: the normed values rounded before the weight, the rotation in float16: the same values
    as numpy computing in that order."""
    spec = Rotary(4, 2, 128, MAX, norm, dtype="float16")
    qw, kw, rng = _case(spec, 1)
    session = Session(relax_vk.build(_module(spec, qw, kw), "vulkan").artifact(), device="lavapipe")
    for S in SIZES:
        args = _inputs(spec, S, rng)
        for got, want in zip(session.run(args), _reference(spec, qw, kw, *args)):
            assert got.dtype == np.float16
            np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3, err_msg=f"S={S}")


def test_the_cpu_form_computes_the_same():
    spec = Rotary(6, 2, 80, MAX, True)
    qw, kw, rng = _case(spec, 2)
    mod = _module(spec, qw, kw)
    for S in SIZES:
        args = _inputs(spec, S, rng)
        for got, want in zip(run_on_cpu(mod, args), _reference(spec, qw, kw, *args)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_the_configuration_is_checked():
    with pytest.raises(ValueError, match="even"):
        Rotary(4, 2, 63, MAX)
    with pytest.raises(ValueError, match="float32 or float16"):
        Rotary(4, 2, 64, MAX, dtype="bfloat16")
    assert (Rotary(4, 2, 128, MAX).threads, Rotary(4, 2, 80, MAX).threads, Rotary(4, 2, 600, MAX).threads) == (64, 64, 256)
