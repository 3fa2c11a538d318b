"""The token-matmul, channel-statistics and row-normalization schedules: which kernels they take,
the tiles and thread counts they pick, and the numbers their kernels compute on pocl and lavapipe
(textures and buffers; head sizes, token counts and widths that are not multiples of the tiles)."""

import numpy as np
import pytest
from tvm import relax

import relax_vk
from relax_vk.analysis.reference import random_inputs, run_on_cpu
from relax_vk.runtime import load
from relax_vk.schedules.channel_reduce import threads_for
from relax_vk.schedules.matmul import MIN_THREADS, _threads, tile
from relax_vk.schedules.row_norm import MIN_GROUPS, workgroup

from helpers import const, module, tensor
from helpers_build import BACKENDS


def attention(tokens, dim, heads):
    """LayerNorm, q/k/v Linears, q @ k^T (scaled), softmax, @ v, head merge: [1, tokens, dim]."""
    x = tensor("x", (1, tokens, dim))
    d = dim // heads

    def body(bb, x):
        h = bb.emit(relax.op.nn.layer_norm(x, const((dim,), 1), const((dim,), 2), axes=[-1]))

        def heads_of(seed):
            y = bb.emit(relax.op.matmul(h, const((dim, dim), seed)))
            return bb.emit(relax.op.permute_dims(bb.emit(relax.op.reshape(y, (1, tokens, heads, d))), [0, 2, 1, 3]))

        q, k, v = heads_of(3), heads_of(4), heads_of(5)
        scores = bb.emit(relax.op.matmul(q, bb.emit(relax.op.permute_dims(k, [0, 1, 3, 2]))))
        attn = bb.emit(relax.op.nn.softmax(bb.emit(relax.op.multiply(scores, relax.const(d**-0.5, "float32"))), axis=-1))
        out = bb.emit(relax.op.permute_dims(bb.emit(relax.op.matmul(attn, v)), [0, 2, 1, 3]))
        return relax.op.reshape(out, (1, tokens, dim))

    return module([x], body)


def test_tiles_stay_inside_a_batch_and_the_output_and_keep_enough_threads():
    # the largest tile (up to 4 rows x 2 texels) that divides a batch's rows and the output
    # texels and leaves MIN_THREADS threads; (1, 1) when none does
    def threads(rows, texels, batches, t):
        return batches * (rows // t[0]) * (texels // t[1])

    for rows in (1, 3, 16, 49, 50, 196, 4095, 4096, 16384):
        for texels in (1, 8, 16, 49, 63, 64, 768):
            for batches in (1, 6):
                px, oc = tile(rows, texels, batches=batches)
                assert rows % px == 0 and texels % oc == 0 and px <= 4 and oc <= 2
                fits = [(p, o) for p in (4, 2, 1) for o in (2, 1)
                        if rows % p == 0 and texels % o == 0 and threads(rows, texels, batches, (p, o)) >= MIN_THREADS]  # fmt: skip
                if (px, oc) != (1, 1):
                    assert (px, oc) in fits
                assert all(p * o <= px * oc for p, o in fits), (rows, texels, batches, fits)


def test_workgroup_threads_fit_and_divide_a_batch_when_exact():
    for pixels in range(1, 1100, 7):
        for most in (64, 256):
            t = _threads(pixels, most, exact=True)
            divisors = [d for d in range(32, most + 1) if pixels % d == 0]
            if pixels <= most:
                assert t == pixels
            else:
                assert (t is None) == (not divisors) and (t is None or (pixels % t == 0 and 32 <= t <= most))
            loose = _threads(pixels, most, exact=False)
            assert loose == pixels if pixels <= most else 0 < loose <= most


def test_channel_threads_are_the_smallest_power_of_two_covering_the_row():
    for texels in range(1, 200):
        t = threads_for(texels)
        assert t & (t - 1) == 0 and t <= 32 and t >= min(texels, 32) and (t == 1 or t // 2 < min(texels, 32))


def test_row_norm_workgroups_split_rows_evenly_and_keep_enough_groups():
    # (rows side by side, threads per row): the threads divide a row's texels (about four each),
    # rows are a power of two, and a kernel keeps MIN_GROUPS workgroups before it packs rows
    for texels in range(1, 200):
        for rows in (1, 7, 197, 1030, 3136, 50176):
            for most in (64, 256):
                r, t = workgroup(texels, rows, most)
                assert texels % t == 0 and t <= 32 and r * t <= most and r & (r - 1) == 0
                assert r == 1 or rows // r >= MIN_GROUPS
                # the nearest to four texels per thread among the divisors that fit
                near = min(abs(texels / d - 4) for d in range(1, min(32, most) + 1) if texels % d == 0)
                assert abs(texels / t - 4) == near


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", BACKENDS)
# scores 512 x 512 (tiles of 4 rows x 1 texel), 2 x 510 x 510 padded to 512 columns with head size
# 12 (2 x 2), 13 tokens of head size 10 (one texel per thread, everything padded), and 546 x 546
# in one head (more row tiles than a workgroup holds, padded columns: TVM cannot bound the clamped
# column reads of a partial workgroup, so that kernel takes the safe schedule instead of failing)
@pytest.mark.parametrize(
    "tokens, dim, heads", [(512, 16, 1), (510, 24, 2), (13, 40, 4), (546, 16, 1)], ids=["tiled", "tiled-padded", "padded", "partial"]
)
@pytest.mark.parametrize("prefer", ["texture", "buffer"])
def test_attention_kernels_use_the_token_schedules(backend, device, tokens, dim, heads, prefer):
    mod = attention(tokens, dim, heads)
    compiled = relax_vk.build(mod, target=backend, options=relax_vk.ScopeOptions(prefer=prefer))
    kernels = compiled.artifact().program["kernels"]
    rules = {k["name"]: k.get("schedule") for k in kernels}
    matmuls = [r for name, r in rules.items() if "token_matmul" in name]
    assert matmuls and set(matmuls) <= {"token_matmul", "safe"} and (tokens == 546 or set(matmuls) == {"token_matmul"}), rules
    # the LayerNorm is one kernel, and so is the softmax, over padded score columns too (it masks
    # their padding lanes): no separate statistics kernels
    norms = {name: r for name, r in rules.items() if "token_layer_norm" in name or "token_softmax" in name}
    assert len(norms) == 2 and set(norms.values()) == {"row_norm"}, rules
    assert not any("token_channel" in name for name in rules), rules
    # q, k and v are read through their texel tables by the matmuls: no gather kernels for them
    # (head sizes that are not multiples of 4 still need element gathers)
    assert not any(name.startswith("token_gather") for name in rules), rules
    inputs = random_inputs(mod)
    (out,) = load(compiled.artifact(), device=device).run(inputs)
    np.testing.assert_allclose(out, run_on_cpu(mod, inputs)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", BACKENDS)
@pytest.mark.parametrize("scale, center", [(True, True), (False, False), (True, False), (False, True)])
@pytest.mark.parametrize("prefer", ["texture", "buffer"])
# 20 channels: 5 texels over 8 threads; 200: 50 texels over 32 (two rounds, the last partial);
# 30: a padded base (the last texel's two padding lanes masked out of the statistics, written 0)
@pytest.mark.parametrize("tokens, dim", [(7, 20), (65, 200), (9, 30)])
def test_layer_norm_and_softmax_are_one_kernel_each(backend, device, scale, center, prefer, tokens, dim):
    x = tensor("x", (1, tokens, dim))

    def body(bb, x):
        h = bb.emit(relax.op.add(x, const((1, tokens, dim), 7)))  # a producer fused into the kernel
        h = bb.emit(relax.op.nn.layer_norm(h, const((dim,), 1), const((dim,), 2), axes=[-1], epsilon=1e-3, center=center, scale=scale))
        return relax.op.multiply(bb.emit(relax.op.nn.softmax(h, axis=-1)), relax.const(3.0, "float32"))  # a consumer too

    mod = module([x], body)
    compiled = relax_vk.build(mod, target=backend, options=relax_vk.ScopeOptions(prefer=prefer))
    rules = {k["name"]: k.get("schedule") for k in compiled.artifact().program["kernels"]}
    norms = {name: r for name, r in rules.items() if "token_layer_norm" in name or "token_softmax" in name}
    assert len(norms) == 2 and set(norms.values()) == {"row_norm"}, rules
    assert not any("token_channel" in name for name in rules), rules
    program = compiled.artifact().program
    (ln,) = [step for step in program["steps"] if "token_layer_norm" in step.get("kernel", "")]
    assert bool(program["tensors"][ln["args"][-1]]["image"]) == (prefer == "texture")  # its result
    inputs = random_inputs(mod)
    (out,) = load(compiled.artifact(), device=device).run(inputs)
    # (numpy: TVM's own legalization applies the gain and bias whatever the flags say)
    h = inputs[0] + const((1, tokens, dim), 7).value.numpy()
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-3)
    h = h * (const((dim,), 1).value.numpy() if scale else 1) + (const((dim,), 2).value.numpy() if center else 0)
    e = np.exp(h - h.max(-1, keepdims=True))
    np.testing.assert_allclose(out, 3 * e / e.sum(-1, keepdims=True), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend, device", BACKENDS)
@pytest.mark.parametrize("prefer", ["texture", "buffer"])
def test_softmax_with_a_generated_operand_in_its_consumer(backend, device, prefer):
    # where(mask, zeros, softmax(x)): the zeros (a kernel with no inputs, recorded after the
    # softmax) and the where fuse into the softmax kernel, in textures as in buffers
    x = tensor("x", (1, 50, 64))

    def body(bb, x):
        h = bb.emit(relax.op.nn.layer_norm(x, const((64,), 1), const((64,), 2), axes=[-1]))  # (packs the tokens)
        p = bb.emit(relax.op.nn.softmax(h, axis=-1))
        keep = bb.emit(relax.op.less(p, relax.const(0.02, "float32")))
        return relax.op.where(keep, p, bb.emit(relax.op.zeros_like(p)))

    mod = module([x], body)
    compiled = relax_vk.build(mod, target=backend, options=relax_vk.ScopeOptions(prefer=prefer))
    program = compiled.artifact().program
    rules = {k["name"]: k.get("schedule") for k in program["kernels"]}
    assert [r for name, r in rules.items() if "softmax" in name] == ["row_norm"], rules
    assert not any(step["op"] == "copy" for step in program["steps"])
    inputs = random_inputs(mod)
    (out,) = load(compiled.artifact(), device=device).run(inputs)
    np.testing.assert_allclose(out, run_on_cpu(mod, inputs)[0], rtol=1e-4, atol=1e-6)


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", BACKENDS)
@pytest.mark.parametrize("prefer", ["texture", "buffer"])
# 1030 rows: workgroups of 8 rows, the last one partial; 2048 rows of 32 channels: 16 rows of 2
# threads each, exact
@pytest.mark.parametrize("tokens, dim", [(1030, 24), (2048, 32)])
def test_layer_norm_and_softmax_with_several_rows_per_workgroup(backend, device, prefer, tokens, dim):
    x = tensor("x", (1, tokens, dim))

    def body(bb, x):
        h = bb.emit(relax.op.nn.layer_norm(x, const((dim,), 1), const((dim,), 2), axes=[-1], epsilon=1e-5))
        return relax.op.nn.softmax(h, axis=-1)

    mod = module([x], body)
    compiled = relax_vk.build(mod, target=backend, options=relax_vk.ScopeOptions(prefer=prefer))
    rules = {k["name"]: k.get("schedule") for k in compiled.artifact().program["kernels"]}
    assert sorted(r for name, r in rules.items() if "layer_norm" in name or "softmax" in name) == ["row_norm", "row_norm"], rules
    inputs = random_inputs(mod)
    (out,) = load(compiled.artifact(), device=device).run(inputs)
    np.testing.assert_allclose(out, run_on_cpu(mod, inputs)[0], rtol=1e-4, atol=1e-6)


def _row_norm_allocs(texels, rows, softmax=False):
    """Scheduled LayerNorm (or softmax) over ``(1, texels, 1, rows, 4)``: its root allocations as
    ``{name: scope}``."""
    from tvm import s_tir, te

    from relax_vk.legalize.tokens import token_layer_norm, token_softmax
    from relax_vk.schedules.row_norm import schedule_row_norm

    x = te.placeholder((1, texels, 1, rows, 4), name="x")
    affine = [te.placeholder((1, texels, 1, 1, 4), name=n) for n in ("g", "b")]
    y = token_softmax(x) if softmax else token_layer_norm(x, *affine, eps=1e-5, scale=True, center=True)
    func = schedule_row_norm(te.create_prim_func([x, *([] if softmax else affine), y]))
    sch = s_tir.Schedule(func)
    return {buf.name: str(buf.scope()) for buf in sch.get(sch.get_sblock("root")).alloc_buffers}


def test_rows_are_staged_in_workgroup_memory_when_they_fit():
    # read once from the texture or buffer, then by both statistics and the result from there
    assert _row_norm_allocs(24, 1030).get("x_shared") == "shared"
    assert _row_norm_allocs(96, 197, softmax=True).get("x_shared") == "shared"
    # a 6625-class row (1657 texels, 26 KiB) is not staged
    assert "x_shared" not in _row_norm_allocs(1657, 40, softmax=True)


@pytest.mark.parametrize("backend, device", BACKENDS)
@pytest.mark.parametrize("prefer", ["texture", "buffer"])
def test_softmax_over_a_prime_number_of_texels_takes_a_workgroup_per_row(backend, device, prefer):
    # PP-OCR's recognizer: softmax over 6625 classes, 1657 texels (a prime: no split divides it,
    # which left one thread per row); now a workgroup of 256 threads per row. (A Linear before it,
    # as there: a softmax of the model's own input is not packed.)
    x = tensor("x", (1, 40, 32))
    mod = module([x], lambda bb, x: relax.op.nn.softmax(bb.emit(relax.op.matmul(x, const((32, 6625), 1))), axis=-1))
    compiled = relax_vk.build(mod, target=backend, options=relax_vk.ScopeOptions(prefer=prefer))
    (kernel,) = [k for k in compiled.artifact().program["kernels"] if k.get("schedule") == "row_norm"]
    threads = kernel["local"][0]  # a workgroup of several threads per row, one row per workgroup
    assert threads > 1 and kernel["local"] == [threads, 1, 1] and kernel["global"] == [40 * threads, 1, 1], kernel
    inputs = random_inputs(mod)
    (out,) = load(compiled.artifact(), device=device).run(inputs)
    np.testing.assert_allclose(out, run_on_cpu(mod, inputs)[0], rtol=1e-4, atol=1e-7)
