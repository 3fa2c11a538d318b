"""``relax.cumsum`` / ``relax.cumprod`` (no upstream legalizer): inclusive and exclusive, any
axis, the flattened input, an output dtype. Checked with TVM's llvm build against numpy."""

import numpy as np
import pytest
from tvm import relax

from relax_vk.analysis.reference import run_on_cpu

from helpers import module, tensor


def _exclusive(y, x, axis, product):
    """numpy's inclusive scan shifted by one along ``axis`` (identity first)."""
    first = np.ones_like(np.take(y, [0], axis)) if product else np.zeros_like(np.take(y, [0], axis))
    return np.concatenate([first, np.take(y, range(x.shape[axis] - 1), axis)], axis)


@pytest.mark.parametrize("product", [False, True])
@pytest.mark.parametrize("axis, exclusive", [(0, False), (1, True), (-1, False), (None, False)])
def test_cumulative_scans(product, axis, exclusive):
    x = np.random.default_rng(0).uniform(0.5, 1.5, (2, 3, 4)).astype("float32")
    op = relax.op.cumprod if product else relax.op.cumsum
    mod = module([tensor("x", x.shape)], lambda bb, v: op(v, axis=axis, exclusive=exclusive))
    (out,) = run_on_cpu(mod, [x])
    expected = (np.cumprod if product else np.cumsum)(x, axis=axis)
    if exclusive:
        expected = _exclusive(expected, x, axis, product)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_output_dtype():
    x = np.arange(6, dtype="int32").reshape(2, 3)
    mod = module([tensor("x", x.shape, "int32")], lambda bb, v: relax.op.cumsum(v, axis=1, dtype="float32"))
    (out,) = run_on_cpu(mod, [x])
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.cumsum(x, axis=1).astype("float32"))
