"""``relax.nn.rms_norm``: relax_vk computes the norms over every axis (TVM's legalizer mis-indexes
them); the others stay TVM's. Checked with TVM's llvm build against numpy."""

import numpy as np
import pytest
from tvm import relax

from relax_vk.analysis.reference import run_on_cpu
from relax_vk.legalize import LEGALIZE_MAP

from helpers import module, tensor


def _rms_norm(x, w, axes, eps=1e-5):
    return x / np.sqrt(np.mean(x.astype("float64") ** 2, axis=tuple(axes), keepdims=True) + eps) * w


@pytest.mark.parametrize("shape, axes", [((7,), [0]), ((3, 4), [0, 1]), ((2, 3, 4), [0, 1, 2]), ((2, 3, 4, 5), [-4, -3, -2, -1]), ((2, 3, 4, 5), [1, 2, 3]), ((3, 4), [1])])
def test_rms_norm_over_any_axes(shape, axes):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype("float32")
    w = (rng.random([shape[a] for a in axes]) + 0.5).astype("float32")
    mod = module([tensor("x", shape)], lambda bb, v: relax.op.nn.rms_norm(v, relax.const(w), axes, 1e-5))
    (out,) = run_on_cpu(mod, [x])
    np.testing.assert_allclose(out, _rms_norm(x, w, [a % len(shape) for a in axes]), rtol=1e-5, atol=1e-6)


def test_only_the_norms_over_every_axis_are_relax_vks():
    legalize = LEGALIZE_MAP["relax.nn.rms_norm"]
    names = {}
    for shape, axes in (((3, 4), [0, 1]), ((3, 4), [1])):
        bb = relax.BlockBuilder()
        x = tensor("x", shape)
        with bb.function("main", [x]):
            out = legalize(bb, relax.op.nn.rms_norm(x, relax.const(np.ones([shape[a] for a in axes], "float32")), axes))
            bb.emit_func_output(out)
        kernels = [f for f in bb.get().functions.values() if not isinstance(f, relax.Function)]
        names[len(axes)] = any("rms_norm_square_sum" in f.script() for f in kernels)  # relax_vk's sum block
    assert names == {2: True, 1: False}
