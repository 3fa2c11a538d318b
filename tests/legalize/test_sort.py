"""``relax.topk`` / ``relax.sort`` / ``relax.argsort`` (no upstream legalizer): largest and
smallest, any axis, ties in index order, both outputs. Checked with TVM's llvm build against numpy."""

import numpy as np
import pytest
from tvm import relax

from relax_vk.analysis.reference import run_on_cpu

from helpers import module, tensor

# ties (1.0 twice, 2.0 twice) must come out in index order (a stable order)
X = np.array([[3.0, 1.0, 2.0, 1.0, 5.0], [2.0, 2.0, -1.0, 0.5, 4.0]], "float32")


def _stable(x, axis, descending):
    return np.argsort(-x if descending else x, axis=axis, kind="stable")


@pytest.mark.parametrize("axis, k, largest", [(1, 2, True), (-1, 3, False), (0, 1, True), (1, 5, True)])
def test_topk(axis, k, largest):
    mod = module([tensor("x", X.shape)], lambda bb, v: relax.op.topk(v, k, axis, "both", largest, "int64"))
    values, indices = run_on_cpu(mod, [X])
    order = np.take(_stable(X, axis, largest), range(k), axis=axis)
    np.testing.assert_array_equal(indices, order)
    np.testing.assert_array_equal(values, np.take_along_axis(X, order, axis))
    assert indices.dtype == np.int64


@pytest.mark.parametrize("descending", [False, True])
def test_sort_and_argsort(descending):
    mod = module([tensor("x", X.shape)], lambda bb, v: relax.Tuple([relax.op.sort(v, 1, descending), relax.op.argsort(v, 1, descending, "int32")]))
    values, indices = run_on_cpu(mod, [X])
    order = _stable(X, 1, descending)
    np.testing.assert_array_equal(indices, order)
    np.testing.assert_array_equal(values, np.take_along_axis(X, order, 1))
