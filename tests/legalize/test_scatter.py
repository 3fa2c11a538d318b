"""``relax.scatter_elements`` as relax_vk computes it (a gather over the updates), against a
sequential numpy scatter: every reduction, negative indices, repeated targets."""

import numpy as np
import pytest
from tvm import relax

from relax_vk.analysis.reference import run_on_cpu

from helpers import module, tensor


def _scatter(x, indices, updates, axis, reduction):
    out = x.copy()
    for pos in np.ndindex(*indices.shape):
        target = list(pos)
        target[axis] = indices[pos] % x.shape[axis]
        target = tuple(target)
        u = updates[pos]
        out[target] = {"update": lambda a: u, "add": lambda a: a + u, "mul": lambda a: a * u, "max": lambda a: max(a, u), "min": lambda a: min(a, u)}[reduction](out[target])
    return out


@pytest.mark.parametrize("reduction", ["update", "add", "mul", "max", "min"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements(reduction, axis):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 5)).astype("float32")
    shape = [2, 3, 4]
    n = x.shape[axis]
    indices = rng.integers(-n, n, shape).astype("int64")  # repeated targets for the reductions
    if reduction == "update":  # (duplicates are unspecified in ONNX: one update per line, one writer per target)
        shape[axis] = 1
        indices = rng.integers(-n, n, shape).astype("int64")
    updates = rng.standard_normal(indices.shape).astype("float32")
    mod = module([tensor("x", x.shape)], lambda bb, v: relax.op.scatter_elements(v, relax.const(indices), relax.const(updates), axis, reduction))
    (out,) = run_on_cpu(mod, [x])
    np.testing.assert_allclose(out, _scatter(x, indices, updates, axis % 3, reduction), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["update", "add", "max"])
def test_scatter_nd(reduction):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3, 2)).astype("float32")
    indices = np.array([[[0, 1], [-1, 2]], [[2, 0], [0, 1]]], "int64") if reduction != "update" else np.array([[[0, 1], [-1, 2]], [[2, 0], [1, 1]]], "int64")
    updates = rng.standard_normal((2, 2, 2)).astype("float32")
    mod = module([tensor("x", x.shape)], lambda bb, v: relax.op.scatter_nd(v, relax.const(indices), relax.const(updates), reduction))
    (out,) = run_on_cpu(mod, [x])
    expected = x.copy()
    for pos in np.ndindex(2, 2):
        at = tuple(int(i) % n for i, n in zip(indices[pos], x.shape))
        expected[at] = {"update": lambda a: updates[pos], "add": lambda a: a + updates[pos], "max": lambda a: np.maximum(a, updates[pos])}[reduction](expected[at])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
