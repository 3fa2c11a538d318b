"""The packed token layout (ConvertToPackedLayout's transformer half): attention, LayerNorm, Linear,
softmax and their rearrangements stay packed, and compute what the original module computes."""

import numpy as np
import pytest
from tvm import relax

import relax_vk
from relax_vk.analysis.reference import random_inputs, run_on_cpu
from relax_vk.runtime import load

from helpers import assert_same_numbers, const, module, op_count, tensor
from helpers_build import BACKENDS


def packed(mod):
    out = relax_vk.layout_stage()(mod)
    relax.analysis.well_formed(out)
    return out


def kernels_named(mod, prefix):
    return sum(1 for gv in mod.functions if gv.name_hint.startswith(prefix))


def attention_block(tokens=16, dim=32, heads=2, classes=None):
    """A ViT block on [1, tokens, dim]: LayerNorm, qkv Linear, the 5-D qkv reshape, q @ k^T,
    softmax, @ v, head merge, projection, residual, GELU MLP (and a classifier with softmax)."""
    x = tensor("x", (1, tokens, dim))
    d = dim // heads

    def body(bb, x):
        h = bb.emit(relax.op.nn.layer_norm(x, const((dim,), 1), const((dim,), 2), axes=[-1]))
        qkv = bb.emit(relax.op.add(bb.emit(relax.op.matmul(h, const((dim, 3 * dim), 3))), const((3 * dim,), 4)))
        qkv = bb.emit(relax.op.permute_dims(bb.emit(relax.op.reshape(qkv, (1, tokens, 3, heads, d))), [2, 0, 3, 1, 4]))
        q, k, v = (bb.emit(relax.op.squeeze(bb.emit(relax.op.strided_slice(qkv, [0], [i], [i + 1])), [0])) for i in range(3))
        scores = bb.emit(relax.op.matmul(q, bb.emit(relax.op.permute_dims(k, [0, 1, 3, 2]))))
        attn = bb.emit(relax.op.nn.softmax(bb.emit(relax.op.multiply(scores, relax.const(d**-0.5, "float32"))), axis=-1))
        out = bb.emit(relax.op.permute_dims(bb.emit(relax.op.matmul(attn, v)), [0, 2, 1, 3]))
        out = bb.emit(relax.op.matmul(bb.emit(relax.op.reshape(out, (1, tokens, dim))), const((dim, dim), 5)))
        y = bb.emit(relax.op.add(x, out))
        y = bb.emit(relax.op.nn.gelu(bb.emit(relax.op.matmul(y, const((dim, dim), 6)))))
        if classes is None:
            return y
        return relax.op.nn.softmax(bb.emit(relax.op.matmul(y, const((dim, classes), 7))), axis=-1)

    return module([x], body)


def test_attention_stays_packed_and_computes_the_same():
    mod = attention_block()
    out = packed(mod)
    # one transform packs the input (straight from its logical [1, N, C]), one unpacks the result;
    # no matmul, LayerNorm or softmax left
    assert op_count(out, "relax.layout_transform") == 2
    main = out["main"]
    packs = [b.value for b in main.body.blocks[0].bindings if isinstance(b.value, relax.Call) and b.value.op.name == "relax.layout_transform"]
    assert packs[0].args[0].same_as(main.params[0])
    assert op_count(out, "relax.matmul") == op_count(out, "relax.nn.layer_norm") == op_count(out, "relax.nn.softmax") == 0
    assert op_count(out, "relax.nn.conv2d") == 3  # the Linears (qkv, projection, MLP): 1x1 convs
    assert kernels_named(out, "token_matmul") == 2  # q @ k^T (k read transposed) and attn @ v
    assert_same_numbers(mod, out, rtol=1e-4, atol=1e-5)


def test_head_dims_and_outputs_that_are_not_multiples_of_four():
    # 8 heads of 15 (PP-OCRv4's recognizer) and a 10-class head: zero-padded gathers, a padded
    # Linear output and a softmax that masks its padding lanes
    mod = attention_block(tokens=12, dim=120, heads=8, classes=10)
    out = packed(mod)
    assert op_count(out, "relax.matmul") == op_count(out, "relax.nn.softmax") == 0
    assert kernels_named(out, "token_element_gather") >= 1
    assert_same_numbers(mod, out, rtol=1e-4, atol=1e-5)


def sdpa_block(tokens=9, dim=24, heads=3, causal=True):
    """What ``torch.export`` makes of ``F.scaled_dot_product_attention`` (PyTorch's math path):
    q and k^T each scaled by sqrt(scale), an additive causal mask, softmax, then the guard for
    fully masked rows (``equal(-inf)``, an int8 ``max`` over the keys, ``where`` to zeros)."""
    x = tensor("x", (1, tokens, dim))
    d = dim // heads
    mask = np.where(np.tril(np.ones((tokens, tokens), bool)), 0.0, -np.inf).astype("float32")

    def body(bb, x):
        qkv = bb.emit(relax.op.matmul(x, const((dim, 3 * dim), 3)))
        qkv = bb.emit(relax.op.permute_dims(bb.emit(relax.op.reshape(qkv, (1, tokens, 3, heads, d))), [2, 0, 3, 1, 4]))
        q, k, v = (bb.emit(relax.op.squeeze(bb.emit(relax.op.strided_slice(qkv, [0], [i], [i + 1])), [0])) for i in range(3))
        root = relax.const(d**-0.25, "float32")
        q = bb.emit(relax.op.multiply(q, root))
        kt = bb.emit(relax.op.multiply(bb.emit(relax.op.permute_dims(k, [0, 1, 3, 2])), root))  # last axis: the tokens
        scores = bb.emit(relax.op.matmul(q, kt))
        if causal:
            scores = bb.emit(relax.op.add(scores, relax.const(mask)))
        attn = bb.emit(relax.op.nn.softmax(scores, axis=-1))
        alive = bb.emit(relax.op.astype(bb.emit(relax.op.logical_not(bb.emit(relax.op.equal(scores, relax.const(-np.inf, "float32"))))), "int8"))
        dead = bb.emit(relax.op.logical_not(bb.emit(relax.op.astype(bb.emit(relax.op.max(alive, axis=[-1], keepdims=True)), "bool"))))
        attn = bb.emit(relax.op.where(dead, bb.emit(relax.op.zeros_like(attn)), attn))
        out = bb.emit(relax.op.permute_dims(bb.emit(relax.op.matmul(attn, v)), [0, 2, 1, 3]))
        return relax.op.matmul(bb.emit(relax.op.reshape(out, (1, tokens, dim))), const((dim, dim), 5))

    return module([x], body)


@pytest.mark.parametrize("tokens", [9, 16])
def test_fused_attention_of_any_token_count_stays_packed(tokens):
    # 9 tokens: k^T scaled on its transpose, the scores a padded base (the mask packed to it, the
    # int8 max over the keys masking the padding lanes, a per-token where); 16: no padding
    mod = sdpa_block(tokens=tokens)
    out = packed(mod)
    assert op_count(out, "relax.matmul") == op_count(out, "relax.nn.softmax") == op_count(out, "relax.max") == 0
    assert kernels_named(out, "token_matmul") == 2
    assert_same_numbers(mod, out, rtol=1e-4, atol=1e-5)


def masked_block(batch=2, tokens=13, dim=16, heads=2):
    """Attention masked by a bool key-mask input: ``scores.masked_fill(~mask[:, None, None, :],
    -inf)`` (the mask broadcast to the scores and packed beside them, with padding lanes)."""
    x, mask = tensor("x", (batch, tokens, dim)), tensor("mask", (batch, tokens), "bool")
    d = dim // heads

    def body(bb, x, mask):
        qkv = bb.emit(relax.op.matmul(x, const((dim, 3 * dim), 3)))
        qkv = bb.emit(relax.op.permute_dims(bb.emit(relax.op.reshape(qkv, (batch, tokens, 3, heads, d))), [2, 0, 3, 1, 4]))
        q, k, v = (bb.emit(relax.op.squeeze(bb.emit(relax.op.strided_slice(qkv, [0], [i], [i + 1])), [0])) for i in range(3))
        scores = bb.emit(relax.op.matmul(q, bb.emit(relax.op.permute_dims(k, [0, 1, 3, 2]))))
        hidden = bb.emit(relax.op.bitwise_not(bb.emit(relax.op.expand_dims(mask, [1, 2]))))
        attn = bb.emit(relax.op.nn.softmax(bb.emit(relax.op.where(hidden, relax.const(-np.inf, "float32"), scores)), axis=-1))
        out = bb.emit(relax.op.permute_dims(bb.emit(relax.op.matmul(attn, v)), [0, 2, 1, 3]))
        return relax.op.matmul(bb.emit(relax.op.reshape(out, (batch, tokens, dim))), const((dim, dim), 5))

    return module([x, mask], body)


def test_attention_masked_by_a_bool_input_stays_packed():
    mod = masked_block()
    out = packed(mod)
    assert op_count(out, "relax.matmul") == op_count(out, "relax.nn.softmax") == 0
    mask = np.ones((2, 13), bool)
    mask[1, -3:] = False
    x = np.random.default_rng(0).standard_normal((2, 13, 16)).astype("float32")
    np.testing.assert_allclose(run_on_cpu(out, [x, mask])[0], run_on_cpu(mod, [x, mask])[0], rtol=1e-4, atol=1e-5)


def odd_width_block(tokens=16, dim=30):
    """A ViT block of a width that is not a multiple of 4 on a plain input: a class token
    concatenated, position embeddings, LayerNorm with and without affine terms, Linears, a
    residual with the plain stream, and a token-mixing Linear over the 17 tokens."""
    x = tensor("x", (1, tokens, dim))

    def body(bb, x):
        t = bb.emit(relax.op.concat([const((1, 1, dim), 1), x], axis=1))
        t = bb.emit(relax.op.add(t, const((1, tokens + 1, dim), 2)))
        h = bb.emit(relax.op.nn.layer_norm(t, relax.const(np.linspace(0.5, 2, dim).astype("float32")), const((dim,), 3), axes=[-1]))
        t = bb.emit(relax.op.add(t, bb.emit(relax.op.matmul(h, const((dim, dim), 4)))))
        ones, zeros = relax.const(np.ones(dim, "float32")), relax.const(np.zeros(dim, "float32"))  # (TVM's own legalization applies them)
        h = bb.emit(relax.op.nn.layer_norm(t, ones, zeros, axes=[-1], center=False, scale=False))
        mixed = bb.emit(relax.op.matmul(bb.emit(relax.op.permute_dims(h, [0, 2, 1])), const((tokens + 1, tokens + 1), 7)))
        return relax.op.matmul(bb.emit(relax.op.permute_dims(mixed, [0, 2, 1])), const((dim, 10), 8))

    return module([x], body)


def test_widths_that_are_not_multiples_of_four_stay_packed():
    # padded bases throughout: LayerNorm masks the padding lanes of its statistics and writes them
    # as zeros; a Linear of 30 or 17 inputs reads zero lanes against zero weights
    mod = odd_width_block()
    out = packed(mod)
    assert op_count(out, "relax.matmul") == op_count(out, "relax.nn.layer_norm") == 0
    assert kernels_named(out, "token_layer_norm") == 2
    assert_same_numbers(mod, out, rtol=1e-4, atol=1e-5)


def test_batch_norm_over_tokens_stays_packed():
    """LeViT's Linear + BatchNorm1d on flattened tokens: the inference batch norm leaves a tuple
    ``(y, mean, var)`` read through ``[0]``, which must not end the token layout."""
    x = tensor("x", (1, 12, 16))

    def body(bb, x):
        y = bb.emit(relax.op.reshape(bb.emit(relax.op.matmul(x, const((16, 32), 1))), (12, 32)))
        stats = [const((32,), seed) for seed in (2, 3, 4)] + [relax.const(np.linspace(0.5, 1.5, 32).astype("float32"))]
        normed = bb.emit(relax.TupleGetItem(bb.emit(relax.op.nn.batch_norm(y, *stats, axis=1, training=False)), 0))
        return relax.op.matmul(bb.emit(relax.op.reshape(normed, (1, 12, 32))), const((32, 8), 5))

    mod = module([x], body)
    out = packed(mod)
    assert op_count(out, "relax.matmul") == 0 and op_count(out, "relax.layout_transform") == 2
    assert_same_numbers(mod, out, rtol=1e-4, atol=1e-5)


def test_window_roll_split_and_channel_concat_stay_views():
    x = tensor("x", (1, 4, 4, 16))

    def body(bb, x):
        h = bb.emit(relax.op.nn.layer_norm(x, const((16,), 1), const((16,), 2), axes=[-1]))
        rolled = bb.emit(relax.op.concat([bb.emit(relax.op.strided_slice(h, [2], [1], [4])), bb.emit(relax.op.strided_slice(h, [2], [0], [1]))], axis=2))
        parts = bb.emit(relax.op.split(rolled, 2, axis=-1))
        a, b = bb.emit(relax.TupleGetItem(parts, 0)), bb.emit(relax.TupleGetItem(parts, 1))
        merged = bb.emit(relax.op.concat([b, a], axis=-1))
        return relax.op.matmul(merged, const((16, 8), 3))

    mod = module([x], body)
    out = packed(mod)
    assert op_count(out, "relax.layout_transform") == 2 and op_count(out, "relax.matmul") == 0
    assert_same_numbers(mod, out)


def test_a_plain_matmul_of_two_inputs_is_left_alone():
    a, b = tensor("a", (2, 8, 16)), tensor("b", (2, 16, 8))
    mod = module([a, b], lambda bb, a, b: relax.op.matmul(a, b))
    out = packed(mod)
    assert op_count(out, "relax.matmul") == 1 and op_count(out, "relax.layout_transform") == 0


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", BACKENDS)
@pytest.mark.parametrize("block", ["vit", "sdpa", "odd_width", "many_tokens"])
def test_attention_runs_in_textures(backend, device, block):
    blocks = {"vit": lambda: attention_block(tokens=12, dim=120, heads=8, classes=10), "sdpa": lambda: sdpa_block(tokens=13, dim=32, heads=2),
              "many_tokens": lambda: attention_block(tokens=64, dim=32, heads=2)}  # fmt: skip
    mod = blocks.get(block, odd_width_block)()
    compiled = relax_vk.build(mod, target=backend)
    plan = compiled.plan()
    # in buffers: the unpacked output (buffer ABI) and the per-token statistics
    assert plan.activation_texture_share > 0.85 and plan.copies == 0
    artifact = compiled.artifact()
    # token textures sit at origins of shared images (codegen.texture_origins), like NCHW4c ones
    tokens = [t for t in artifact.program["tensors"] if t["scope"] == "global.texture-nhwc" and "origin" in t]
    assert tokens
    if block == "many_tokens":  # 64 tokens x 8 texel rows: each row over two lines (core.scope.folded_width), 32 x 16
        assert any(t["image"][:2] == [32, 16] for t in tokens)
    inputs = random_inputs(mod)
    (out,) = load(artifact, device=device).run(inputs)
    np.testing.assert_allclose(out, run_on_cpu(mod, inputs)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_masked_attention_runs_in_textures(backend, device):
    mod = masked_block()
    compiled = relax_vk.build(mod, target=backend)
    assert compiled.plan().activation_texture_share > 0.75 and compiled.plan().copies == 0
    mask = np.ones((2, 13), bool)
    mask[1, -3:] = False
    x = np.random.default_rng(0).standard_normal((2, 13, 16)).astype("float32")
    (out,) = load(compiled.artifact(), device=device).run([x, mask])
    np.testing.assert_allclose(out, run_on_cpu(mod, [x, mask])[0], rtol=1e-4, atol=1e-5)


def window_block(size=8, window=4, dim=16):
    """Swin's window round trip on [1, size*size, dim] tokens: LayerNorm, window partition, a
    Linear per window, window reverse, residual add; then patch merging (the four 2x2 phases
    concatenated along the channels) and a LayerNorm."""
    x = tensor("x", (1, size * size, dim))
    n = size // window

    def body(bb, x):
        h = bb.emit(relax.op.nn.layer_norm(x, const((dim,), 1), const((dim,), 2), axes=[-1]))
        w = bb.emit(relax.op.reshape(h, (1, n, window, n, window, dim)))
        w = bb.emit(relax.op.reshape(bb.emit(relax.op.permute_dims(w, [0, 1, 3, 2, 4, 5])), (n * n, window * window, dim)))
        w = bb.emit(relax.op.matmul(w, const((dim, dim), 3)))
        w = bb.emit(relax.op.permute_dims(bb.emit(relax.op.reshape(w, (1, n, n, window, window, dim))), [0, 1, 3, 2, 4, 5]))
        y = bb.emit(relax.op.add(x, bb.emit(relax.op.reshape(w, (1, size * size, dim)))))
        g = bb.emit(relax.op.reshape(y, (1, size, size, dim)))
        phases = [bb.emit(relax.op.strided_slice(g, [1, 2], [i, j], [size, size], [2, 2])) for i, j in ((0, 0), (1, 0), (0, 1), (1, 1))]
        merged = bb.emit(relax.op.reshape(bb.emit(relax.op.concat(phases, axis=-1)), (1, (size // 2) ** 2, 4 * dim)))
        return relax.op.nn.layer_norm(merged, const((4 * dim,), 4), const((4 * dim,), 5), axes=[-1])

    return module([x], body)


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_gathers_fuse_with_their_elementwise_and_gather_neighbours(backend, device):
    # a texel gather is injective (as TVM's take is): the window reverse runs inside the residual
    # add, the four phases of the patch merge and their concat are one kernel (here also the add:
    # seven computations in one launch)
    mod = window_block()
    compiled = relax_vk.build(mod, target=backend, options=relax_vk.ScopeOptions(prefer="texture"))
    names = [k["name"] for k in compiled.artifact().program["kernels"]]
    assert any("token_gather" in n and "add" in n for n in names), names
    assert any(n.count("token_gather") >= 4 and "concatenate" in n for n in names), names
    assert compiled.plan().copies == 0
    inputs = random_inputs(mod)
    (out,) = load(compiled.artifact(), device=device).run(inputs)
    np.testing.assert_allclose(out, run_on_cpu(mod, inputs)[0], rtol=1e-4, atol=1e-5)
