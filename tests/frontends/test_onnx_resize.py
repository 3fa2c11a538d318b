"""``Resize`` by scales (``relax_vk.frontends.onnx_resize``): integer scales of run-time dims as
integer expressions, one artifact right against onnxruntime at three sizes on pocl and lavapipe;
scales whose sampling TVM's resize would get wrong are refused by name."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import relax_vk  # noqa: E402
from relax_vk.core.errors import UnsupportedError  # noqa: E402
from relax_vk.frontends.onnx import from_onnx  # noqa: E402
from relax_vk.runtime import load  # noqa: E402


def _model(scales_a=(1, 1, 2, 2), scales_b=(1, 1, 4, 1)):
    """``x`` upsampled (nearest, asymmetric, floor) and resampled (linear, half_pixel), both outputs."""
    inits = [numpy_helper.from_array(np.array(scales_a, np.float32), "sa"), numpy_helper.from_array(np.array(scales_b, np.float32), "sb")]
    nodes = [
        helper.make_node("Resize", ["x", "", "sa"], ["up"], name="up", mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Resize", ["x", "", "sb"], ["re"], name="re", mode="linear"),
    ]  # fmt: skip
    graph = helper.make_graph(nodes, "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, "H", "W"])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, ["a", "b", "c", "d"]) for o in ("up", "re")], inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("backend, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_resize_by_scales_of_run_time_dims(backend, device):
    model = _model()
    mod = from_onnx(model, {"x": (1, 2, "H", "W")}, dims={"H": (4, 96), "W": (4, 96)})
    session = load(relax_vk.build(mod, backend).artifact(), device=device)
    reference = ort.InferenceSession(model.SerializeToString())
    for h, w in ((4, 4), (13, 37), (96, 50)):
        x = np.random.default_rng(h * w).standard_normal((1, 2, h, w)).astype(np.float32)
        got, expected = session.run([x]), reference.run(None, {"x": x})
        assert [g.shape for g in got] == [e.shape for e in expected] == [(1, 2, 2 * h, 2 * w), (1, 2, 4 * h, w)]
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_a_fractional_scale_of_a_run_time_dim_is_refused():
    with pytest.raises(UnsupportedError, match=r"Resize node re: scale 0\.5 of the run-time dim H: only integer scales"):
        from_onnx(_model(scales_b=(1, 1, 0.5, 2)), {"x": (1, 2, "H", "W")}, dims={"H": (4, 96), "W": (4, 96)})


def test_a_scale_whose_rows_are_not_an_integer_is_refused():
    """13 rows at 0.5: onnxruntime samples rows 0.5, 2.5, ...; TVM's resize would sample at 13/6
    (1.79 off, no error, before this check)."""
    with pytest.raises(UnsupportedError, match=r"Resize node re: scale 0\.5 of axis 2 \(13\) gives 6\.5 rows"):
        from_onnx(_model(scales_b=(1, 1, 0.5, 2)), {"x": (1, 2, 13, 8)})


def test_a_static_scale_that_divides_stays_with_tvm():
    model = _model(scales_b=(1, 1, 0.5, 1.5))
    session = load(relax_vk.build(from_onnx(model, {"x": (1, 2, 14, 6)}), "opencl").artifact(), device="pocl")
    x = np.random.default_rng(0).standard_normal((1, 2, 14, 6)).astype(np.float32)
    for g, e in zip(session.run([x]), ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.one_api("backend")
def test_align_corners_to_a_size_of_one_at_run_time_dims(backend, device, request):
    """``align_corners`` to an output axis of 1 (a pooled column: PyTorch and ONNX take source 0)
    over an input of run-time size: TOPI divided by ``out - 1`` (a crash, "Divide by zero", that the
    fuzzer found: seed 944643)."""
    request.getfixturevalue(device)
    sizes = numpy_helper.from_array(np.array([1, 2, 3, 1], np.int64), "sizes")
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear", coordinate_transformation_mode="align_corners")
    graph = helper.make_graph([node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, "H", "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 1])], [sizes])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    session = load(relax_vk.build(from_onnx(model, {"x": (1, 2, "H", "W")}, dims={"H": (2, 20), "W": (2, 20)}), backend).artifact(), device=device)
    reference = ort.InferenceSession(model.SerializeToString())
    for h, w in ((6, 7), (2, 19), (20, 2)):
        x = np.random.default_rng(h + w).standard_normal((1, 2, h, w)).astype(np.float32)
        np.testing.assert_allclose(session.run([x])[0], reference.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
