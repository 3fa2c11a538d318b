"""The token-matmul and channel-statistics schedules: which kernels they take, the tiles and
thread counts they pick, and the numbers their kernels compute on pocl and lavapipe (textures and
buffers; head sizes, token counts and widths that are not multiples of the tiles)."""

import numpy as np
import pytest
from tvm import relax

import relax_vk
from relax_vk.runtime import load
from relax_vk.schedules.channel_reduce import threads_for
from relax_vk.schedules.matmul import _threads, tile
from relax_vk.tools.reference import random_inputs, run_on_cpu

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


def test_tiles_stay_inside_a_batch_and_the_output():
    # the largest tile that divides a batch's rows and the output texels and leaves enough threads
    assert tile(4096, 64) == (4, 2) and tile(4095, 64) == (1, 2) and tile(4096, 63) == (4, 1)
    assert tile(196, 49, batches=6) == (2, 1) and tile(196, 16, batches=6) == (1, 1) and tile(50, 8) == (1, 1)
    # a batch's row tiles: all in one workgroup when they fit, else an exact divisor (several
    # batches) or a partial last workgroup (one batch); None sends the kernel to the safe schedule
    assert _threads(49, 256, exact=True) == 49
    assert _threads(515, 256, exact=True) == 103
    assert _threads(1031, 256, exact=True) is None and _threads(1031, 256, exact=False) == 64
    assert [threads_for(n) for n in (8, 16, 17, 96, 1000)] == [8, 16, 32, 32, 32]


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
    # the LayerNorm's statistics (dim/4 >= 8 texels) reduce across a workgroup; softmax's over
    # 13 or 36 score columns too once they span 8 texels
    stats = {name: r for name, r in rules.items() if "token_channel" in name}
    assert "channel_reduce" in stats.values(), stats
    inputs = random_inputs(mod)
    (out,) = load(compiled.artifact(), device=device).run(inputs)
    np.testing.assert_allclose(out, run_on_cpu(mod, inputs)[0], rtol=1e-4, atol=1e-5)
