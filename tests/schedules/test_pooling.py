"""The NCHW4c pool schedule: small windows one thread per output texel, large windows (global
pools) reduced across a workgroup's threads; the numbers on pocl and lavapipe."""

import numpy as np
import pytest
from tvm import relax

import relax_vk
from relax_vk.analysis.reference import random_inputs, run_on_cpu
from relax_vk.runtime import load
from relax_vk.schedules.pooling import FEW_OUTPUT_THREADS, THREADS, WINDOW_THREADS

from helpers import const, module, tensor
from helpers_build import BACKENDS


def _pooled(channels, height, width, pool):
    x = tensor("x", (1, channels, height, width))

    def body(bb, x):
        y = bb.emit(relax.op.nn.conv2d(x, const((channels, channels, 1, 1), 1)))
        return relax.op.nn.relu(bb.emit(pool(y)))

    return module([x], body)


GLOBAL_MEAN = lambda y: relax.op.mean(y, axis=[2, 3], keepdims=True)  # noqa: E731
GLOBAL_MAX = lambda y: relax.op.max(y, axis=[2, 3], keepdims=True)  # noqa: E731
WINDOW_AVG = lambda y: relax.op.nn.avg_pool2d(y, pool_size=(3, 3), strides=(2, 2), padding=(1, 1))  # noqa: E731


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", BACKENDS)
@pytest.mark.parametrize("prefer", ["texture", "buffer"])
# windows of at least GLOBAL_WINDOW texels go across threads: a 6x80 mean (480 texels: 8 rounds of
# 64 threads, the last partial), a 9x9 max (81: one round and one thread); a 7x7 mean (49) and a
# 3x3 window stay one thread per output texel; a 40x40 mean of 8 channels (two workgroups, 1,600
# texels each) takes 256 threads a workgroup
@pytest.mark.parametrize("shape, pool, outputs, across", [((40, 6, 80), GLOBAL_MEAN, 1, WINDOW_THREADS), ((12, 9, 9), GLOBAL_MAX, 1, WINDOW_THREADS),
                                                          ((8, 40, 40), GLOBAL_MEAN, 1, FEW_OUTPUT_THREADS),
                                                          ((16, 7, 7), GLOBAL_MEAN, 1, 0), ((8, 12, 12), WINDOW_AVG, 36, 0)])  # fmt: skip
def test_pools_large_windows_across_threads(backend, device, prefer, shape, pool, outputs, across):
    mod = _pooled(*shape, pool)
    compiled = relax_vk.build(mod, target=backend, options=relax_vk.ScopeOptions(prefer=prefer))
    (kernel,) = [k for k in compiled.artifact().program["kernels"] if k.get("schedule") == "pool"]
    texels = shape[0] // 4 * outputs  # (output texels)
    if across:  # a workgroup of `across` threads per output texel
        assert kernel["local"][0] == across and kernel["global"][0] == texels * across, kernel
    else:  # a thread per output texel
        assert kernel["global"][0] == -(-texels // THREADS) * THREADS, kernel
    inputs = random_inputs(mod)
    (out,) = load(compiled.artifact(), device=device).run(inputs)
    np.testing.assert_allclose(out, run_on_cpu(mod, inputs)[0], rtol=1e-4, atol=1e-5)
