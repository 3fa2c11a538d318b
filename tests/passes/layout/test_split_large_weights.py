"""SplitLargeWeights: weights over one buffer binding are split, results unchanged, and a weight
that cannot be split is a clear error."""

import numpy as np
import pytest
from helpers import const, module, tensor
from tvm import relax

import relax_vk
from relax_vk.core.errors import LimitError
from relax_vk.passes import SplitLargeWeights
from relax_vk.tools.reference import random_inputs, run_on_cpu


def _ops(mod, name):
    found = []
    relax.analysis.post_order_visit(mod["main"], lambda e: found.append(e) if isinstance(e, relax.Call) and getattr(e.op, "name", "") == name else None)
    return found


@pytest.mark.parametrize("groups", [1, 2])
def test_conv_weights_split_along_output_channels(groups):
    x = tensor("x", (1, 8, 6, 6))
    mod = module([x], lambda bb, x: relax.op.nn.conv2d(x, const((24, 8 // groups, 3, 3), seed=3), padding=(1, 1), groups=groups))
    per_part = 8 if groups == 1 else 12  # a grouped conv's parts hold whole groups (12 channels each)
    limit = per_part * (8 // groups) * 9 * 4
    split = SplitLargeWeights(limit)(mod)
    convs = _ops(split, "relax.nn.conv2d")
    assert len(convs) == 24 // per_part and all(int(c.args[1].ty.shape.values[0]) == per_part for c in convs)
    assert all(c.args[1].value.numpy().nbytes <= limit for c in convs)
    inputs = random_inputs(mod)
    np.testing.assert_allclose(run_on_cpu(split, inputs)[0], run_on_cpu(mod, inputs)[0], rtol=1e-5, atol=1e-5)


def test_matmul_weights_split_along_features_and_run_on_the_gpu():
    x = tensor("x", (2, 64))
    mod = module([x], lambda bb, x: relax.op.matmul(x, const((64, 40), seed=4)))
    target = relax_vk.target.opencl(max_buffer_bytes=64 * 12 * 4)
    artifact = relax_vk.build(mod, target).artifact()
    assert max(t["bytes"] for t in artifact.program["tensors"] if t["kind"] == "constant") <= 64 * 12 * 4
    from relax_vk.runtime import load

    inputs = random_inputs(mod)
    np.testing.assert_allclose(load(artifact, device="pocl").run(inputs)[0], run_on_cpu(mod, inputs)[0], rtol=1e-4, atol=1e-5)


def test_a_weight_that_is_a_model_input_cannot_be_split():
    x, w = tensor("x", (1, 64)), tensor("w", (64, 4096))
    mod = module([x, w], lambda bb, x, w: relax.op.matmul(x, w))
    with pytest.raises(LimitError, match=r"matmul weight w takes 1048576 bytes, over the device's 4096-byte buffer binding limit"):
        SplitLargeWeights(4096)(mod)
