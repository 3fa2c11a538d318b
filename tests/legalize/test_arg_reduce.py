"""arg_reduce: argmax / argmin with int32 indices (the first index wins ties), as numpy computes them."""

import numpy as np
import pytest
from tvm import relax

from relax_vk.analysis.reference import run_on_cpu
from relax_vk.legalize.arg_reduce import arg_reduce

from helpers import tensor


@pytest.mark.parametrize("smallest", [False, True])
@pytest.mark.parametrize("axis, keepdims", [(0, False), (1, True), (-1, False)])
def test_arg_reduce_matches_numpy_with_ties(smallest, axis, keepdims):
    bb = relax.BlockBuilder()
    x = tensor("x", (4, 6, 5))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.call_te(arg_reduce, x, axis=axis, keepdims=keepdims, smallest=smallest))
        bb.emit_func_output(out)
    xs = np.random.default_rng(0).integers(-2, 2, (4, 6, 5)).astype("float32")  # many ties
    (got,) = run_on_cpu(bb.get(), [xs])
    expected = (np.argmin if smallest else np.argmax)(xs, axis=axis)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.expand_dims(expected, axis) if keepdims else expected)
