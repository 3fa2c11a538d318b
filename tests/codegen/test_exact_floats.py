"""ExactFloatConstants: OpenCL kernels compute with the model's float constants exactly. TVM prints a
float with 7 digits; float32's lowest value (a max reduction's start) printed above itself, and a
softmax over a row of it (masked scores) returned NaN on pocl."""

import numpy as np
import pytest
from tvm import relax

import relax_vk
from relax_vk.codegen.exact_floats import _exact_in_7_digits
from relax_vk.runtime import Session


def test_which_constants_need_their_bits():
    assert not _exact_in_7_digits(float(np.finfo(np.float32).min)) and not _exact_in_7_digits(1 / 3)
    assert _exact_in_7_digits(0.5) and _exact_in_7_digits(0.1) and _exact_in_7_digits(float("-inf"))


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_a_softmax_over_a_row_of_float32s_lowest_value_is_uniform(target, device, request):
    request.getfixturevalue(device)
    x = relax.Var("x", relax.TensorType((2, 8), "float32"))
    bb = relax.BlockBuilder()
    lowest = relax.const(np.finfo(np.float32).min)
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.nn.softmax(relax.op.where(relax.op.greater(x, relax.const(100.0)), x, lowest), axis=-1))
        bb.emit_func_output(y)
    session = Session(relax_vk.build(bb.get(), target).artifact(), device=device)
    out = session.run([np.array([[1000.0] * 4 + [0.0] * 4, [0.0] * 8], np.float32)])[0]
    np.testing.assert_array_equal(out, [[0.25] * 4 + [0.0] * 4, [0.125] * 8])
