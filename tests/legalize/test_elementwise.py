"""relax_vk's elementwise legalizers: ``round`` rounds halves to even on both APIs, as ONNX
``Round``, ``torch.round`` and ``QuantizeLinear`` define it (upstream's C ``round`` rounds them
away from zero)."""

import numpy as np
import pytest
from tvm import relax

import relax_vk
from relax_vk.runtime import load


@pytest.mark.parametrize("backend, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_round_takes_halves_to_even(backend, device, request):
    request.getfixturevalue(device)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, 8), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.round(x))
        bb.emit_func_output(out)
    values = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 3.7], [126.5, 127.5, -127.5, -128.5, 1e8, -3.2, 0.0, 8388609.0]], "float32")
    got = load(relax_vk.build(bb.get(), target=backend).artifact(), device=device).run([values])[0]
    np.testing.assert_array_equal(got, np.round(values))  # numpy rounds halves to even too
