"""Convolutions over run-time spatial sizes (stride 2 at odd sizes, bias, activation, a residual
add), right against onnxruntime at several sizes from one artifact on both APIs: a schedule whose
last workgroup writes past the outputs' end, or wraps around onto real ones, fails here."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import relax_vk  # noqa: E402
from relax_vk.frontends.onnx import from_onnx  # noqa: E402
from relax_vk.runtime import load  # noqa: E402


def _model(cout: int):
    """conv 3x3 stride 2 + bias -> relu, then a 1x1 conv added to it (a residual)."""
    rng = np.random.default_rng(cout)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
             for n, s in (("w1", (cout, 3, 3, 3)), ("b1", (cout,)), ("w2", (cout, cout, 1, 1)))]  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"]),
        helper.make_node("Add", ["c2", "r1"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, "h", "w"])], inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("backend, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_convs_over_run_time_sizes(backend, device):
    model = _model(12)
    artifact = relax_vk.build(from_onnx(model, {"x": (1, 3, "H", "W")}, dims={"H": (5, 80), "W": (5, 80)}), backend).artifact()
    session = load(artifact, device=device)
    reference = ort.InferenceSession(model.SerializeToString())
    for h, w in ((5, 5), (33, 17), (80, 64)):
        x = np.random.default_rng(h * w).standard_normal((1, 3, h, w)).astype(np.float32)
        (got,) = session.run([x])
        (expected,) = reference.run(None, {"x": x})
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
