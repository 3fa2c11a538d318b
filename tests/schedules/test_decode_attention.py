"""The decoder's attention kernels (relax_vk.schedules.decode_attention): the key rows in parts, then
the parts combined (or folded in sequence by the one-pass kernel), right against numpy's softmax
attention at every size of one artifact, on pocl and lavapipe, and in their CPU forms."""

import numpy as np
import pytest
from tvm import relax, tirx

import relax_vk
from relax_vk.analysis.reference import run_on_cpu
from relax_vk.core.dims import with_dim_ranges
from relax_vk.runtime import Session
from relax_vk.schedules.decode_attention import (MAX_UNROLLED_PARTS, ROWS, Attention, attention_combine_kernel, attention_one_pass_kernel,
                                                  attention_parts_kernel, parts)  # fmt: skip

MAX = 80
#: (S, T): one query over one key, parts cut inside and at their ends, a prompt whose first query
#: attends to nothing (a padded query), the whole cache
SIZES = [(1, 1), (1, 7), (1, ROWS + 1), (4, 4), (3, 70), (4, MAX)]


def _module(spec: Attention, rows: int = MAX, one_pass: bool = False):
    """The attention as the pair of kernels, or (``one_pass``) as the one-pass kernel."""
    S, T = tirx.Var("S", "int64"), tirx.Var("T", "int64")
    H, KV, D, dt = spec.heads, spec.kv_heads, spec.head_dim, spec.dtype
    params = [relax.Var(name, relax.TensorType(shape, dt)) for name, shape in
              [("q", (S, H * D)), ("past_k", (rows, KV * D)), ("new_k", (S, KV * D)), ("past_v", (rows, KV * D)), ("new_v", (S, KV * D))]]  # fmt: skip
    params.append(relax.Var("bias", relax.TensorType((S, T), "float32")))
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            if one_pass:
                one = bb.add_func(attention_one_pass_kernel(spec), "attention_one_pass")
                out = bb.emit_output(relax.call_tir(one, params, out_ty=relax.TensorType((S, H * D), dt)))
            else:
                find = bb.add_func(attention_parts_kernel(spec), "attention_parts")
                combine = bb.add_func(attention_combine_kernel(spec), "attention_combine")
                P = parts(T)
                found = bb.emit(relax.call_tir(find, params, out_ty=[relax.TensorType((S, H, P, D), "float32"), relax.TensorType((S, H, P), "float32"),
                                                                      relax.TensorType((S, H, P), "float32")]))  # fmt: skip
                out = bb.emit_output(relax.call_tir(combine, [bb.emit(relax.TupleGetItem(found, i)) for i in range(3)], out_ty=relax.TensorType((S, H * D), dt)))
        bb.emit_func_output(out)
    return with_dim_ranges(bb.get(), {"S": (1, 4), "T": (1, rows)})


def _inputs(spec: Attention, S: int, T: int, rng):
    H, KV, D, rows = spec.heads, spec.kv_heads, spec.head_dim, spec.max_len
    arrays = [rng.standard_normal(shape).astype(spec.dtype) for shape in [(S, H * D), (rows, KV * D), (S, KV * D), (rows, KV * D), (S, KV * D)]]
    bias = np.where(rng.random((S, T)) < 0.3, -1e30, 0).astype(np.float32)
    if S > 1:
        bias[0] = -1e30  # (every key masked: the keys averaged, as transformers does)
    return arrays + [bias]


def _reference(spec: Attention, q, past_k, new_k, past_v, new_v, bias):
    """softmax(q . k scale (soft-capped) + bias) . v in float64, key row t from the cache below T - S."""
    S, T = bias.shape
    H, KV, D = spec.heads, spec.kv_heads, spec.head_dim
    keys = np.concatenate([past_k[: T - S], new_k]).astype(np.float64).reshape(T, KV, D)
    values = np.concatenate([past_v[: T - S], new_v]).astype(np.float64).reshape(T, KV, D)
    queries = q.astype(np.float64).reshape(S, H, D)
    out = np.zeros((S, H, D))
    for h in range(H):
        scores = queries[:, h] @ keys[:, h * KV // H].T * (D**-0.5 if spec.scale is None else spec.scale)
        if spec.softcap:
            scores = spec.softcap * np.tanh(scores / spec.softcap)
        scores = scores + bias
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        out[:, h] = (weights / weights.sum(-1, keepdims=True)) @ values[:, h * KV // H]
    return out.reshape(S, H * D)


@pytest.mark.one_api("target")
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.parametrize("heads, kv_heads, head_dim", [(4, 2, 64), (6, 2, 80), (2, 1, 300)])
@pytest.mark.parametrize("one_pass", [False, True], ids=["pair", "one-pass"])
def test_attention_over_parts_is_right_at_every_size(heads, kv_heads, head_dim, one_pass, target, device, request):
    """Grouped heads of 64 (two threads a row), of 80 (three threads, the last row's columns cut:
    a non-power-of-two group and head count, whose remainders Vulkan's 32-bit indices must hold)
    and of 300 (wider than the workgroup); the pair of kernels and the one-pass kernel."""
    request.getfixturevalue(device)
    spec = Attention(heads, kv_heads, head_dim, MAX)
    artifact = relax_vk.build(_module(spec, one_pass=one_pass), target).artifact()
    assert [k.get("schedule") for k in artifact.program["kernels"]] == ["decode_attention"] * (1 if one_pass else 2)
    session = Session(artifact, device=device)
    rng = np.random.default_rng(0)
    for S, T in SIZES:
        args = _inputs(spec, S, T, rng)
        np.testing.assert_allclose(session.run(args)[0], _reference(spec, *args), rtol=1e-5, atol=2e-6, err_msg=f"S={S} T={T}")


@pytest.mark.one_api("target")
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.parametrize("one_pass", [False, True], ids=["pair", "one-pass"])
def test_a_long_cache_combines_its_parts_four_at_a_time(one_pass, target, device, request):
    """Past MAX_UNROLLED_PARTS parts (1,300 rows: 41) the combination steps through them four at a
    time, the last step cut; the one-pass kernel folds 41 parts in sequence."""
    request.getfixturevalue(device)
    spec = Attention(4, 2, 64, 1300)
    assert parts(spec.max_len) > MAX_UNROLLED_PARTS
    session = Session(relax_vk.build(_module(spec, spec.max_len, one_pass), target).artifact(), device=device)
    rng = np.random.default_rng(3)
    for S, T in [(1, 1), (1, 129), (2, 1299), (1, 1300)]:
        args = _inputs(spec, S, T, rng)
        np.testing.assert_allclose(session.run(args)[0], _reference(spec, *args), rtol=1e-5, atol=2e-6, err_msg=f"S={S} T={T}")


@pytest.mark.parametrize("one_pass", [False, True], ids=["pair", "one-pass"])
def test_float16_inputs_round_once_at_the_output(one_pass, lavapipe):
    spec = Attention(4, 2, 128, MAX, "float16")
    session = Session(relax_vk.build(_module(spec, one_pass=one_pass), "vulkan").artifact(), device="lavapipe")
    rng = np.random.default_rng(1)
    for S, T in SIZES[-2:]:
        args = _inputs(spec, S, T, rng)
        got = session.run(args)[0]
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.astype(np.float64), _reference(spec, *args), rtol=2e-3, atol=2e-3)


@pytest.mark.one_api("target")
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.parametrize("one_pass", [False, True], ids=["pair", "one-pass"])
def test_a_model_scale_and_soft_capped_scores(one_pass, target, device, request):
    """Gemma's scores: ``q . k`` times ``query_pre_attn_scalar ** -0.5`` (here not ``head_dim ** -0.5``),
    then ``cap * tanh(score / cap)``, before the mask. The cap (2) is below most scores of these
    inputs, so a kernel that skipped it, or capped after the bias, would be far off."""
    request.getfixturevalue(device)
    spec = Attention(4, 2, 64, MAX, scale=0.3, softcap=2.0)
    session = Session(relax_vk.build(_module(spec, one_pass=one_pass), target).artifact(), device=device)
    rng = np.random.default_rng(4)
    uncapped = 0.0
    for S, T in SIZES:
        args = _inputs(spec, S, T, rng)
        expected = _reference(spec, *args)
        uncapped = max(uncapped, np.abs(_reference(Attention(4, 2, 64, MAX, scale=0.3), *args) - expected).max())
        np.testing.assert_allclose(session.run(args)[0], expected, rtol=1e-5, atol=2e-6, err_msg=f"S={S} T={T}")
    assert uncapped > 0.05  # (the cap changes the result)


def test_the_cpu_forms_compute_the_same():
    rng = np.random.default_rng(2)
    # (the serial score loop with a model's scale and a soft cap in the pair's form, without in the one-pass form's)
    for spec, one_pass in [(Attention(6, 2, 80, MAX, scale=0.2, softcap=3.0), False), (Attention(6, 2, 80, MAX), True)]:
        mod = _module(spec, one_pass=one_pass)
        for S, T in [(1, ROWS + 1), (3, 70)]:
            args = _inputs(spec, S, T, rng)
            np.testing.assert_allclose(run_on_cpu(mod, args)[0], _reference(spec, *args), rtol=1e-5, atol=2e-6, err_msg=f"one_pass={one_pass}")


def test_the_pair_unless_its_partial_sums_pass_a_binding():
    from relax_vk.schedules.decode_attention import one_pass

    qwen3 = Attention(16, 8, 128, 576)  # Qwen3-0.6B's heads, a 512-token prompt and 64 more
    assert not one_pass(qwen3, 512)  # 75 MB of partial sums
    assert one_pass(Attention(16, 8, 128, 2112), 2048)  # 1.1 GB
    assert not one_pass(Attention(16, 8, 128, 2112), 1)  # (decode only: 69 KB)


def test_the_configuration_is_checked():
    with pytest.raises(ValueError, match="positive multiple"):
        Attention(6, 4, 64, MAX)
    with pytest.raises(ValueError, match="max_len 0"):
        Attention(4, 2, 64, 0)
    with pytest.raises(ValueError, match="float32 or float16"):
        Attention(4, 2, 64, MAX, "bfloat16")
    with pytest.raises(ValueError, match="softcap -1"):
        Attention(4, 2, 64, MAX, softcap=-1.0)
    with pytest.raises(ValueError, match="scale 0"):
        Attention(4, 2, 64, MAX, scale=0.0)
    wide = Attention(4, 2, 128, MAX)
    assert (wide.lanes, wide.threads, wide.columns) == (4, 128, 32)
    assert (Attention(4, 2, 300, MAX).lanes, Attention(4, 2, 300, MAX).columns) == (8, 38)
