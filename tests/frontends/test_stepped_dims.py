"""Run-time dims with a step (``--dim H=32:960:32``; ``relax_vk.core.dims``): a model whose sizes
only match at multiples (PP-OCR's detector: its FPN adds a 2x upsampled map to the map it came
from) from one artifact, right against onnxruntime at several sizes; a size off the step refused
by name; the step in the artifact and the ``--dim`` syntax."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import relax_vk  # noqa: E402
from relax_vk.core.errors import UnsupportedError  # noqa: E402
from relax_vk.frontends.onnx import from_onnx, parse_dim  # noqa: E402
from relax_vk.runtime import load  # noqa: E402


def _fpn():
    """Two stride-2 convs, the coarse map upsampled 2x (Resize by scales) and added to the finer
    one: the shapes agree only when H and W are multiples of 4."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array((rng.standard_normal((4, 2, 3, 3)) * 0.3).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((4, 4, 3, 3)) * 0.3).astype(np.float32), "w2")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s")
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Conv", ["c1", "w2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Resize", ["c2", "", "s"], ["up"], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Add", ["up", "c1"], ["y"]),
    ]  # fmt: skip
    graph = helper.make_graph(nodes, "fpn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, "H", "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, "h", "w"])], [w1, w2, scales])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("backend, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_a_model_whose_sizes_match_at_multiples(backend, device):
    model = _fpn()
    mod = from_onnx(model, {"x": (1, 2, "H", "W")}, dims={"H": (4, 64, 4), "W": (8, 96, 8)})
    artifact = relax_vk.build(mod, backend).artifact()
    session = load(artifact, device=device)
    reference = ort.InferenceSession(model.SerializeToString())
    for h, w in ((4, 8), (36, 16), (64, 96)):
        x = np.random.default_rng(h * w).standard_normal((1, 2, h, w)).astype(np.float32)
        (got,) = session.run([x])
        (expected,) = reference.run(None, {"x": x})
        assert got.shape == expected.shape == (1, 4, h // 2, w // 2)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"input x: axis 3 \(W\) is 20, not a multiple of W's step 8 \(declared range 8\.\.96\)"):
        session.run([np.zeros((1, 2, 8, 20), np.float32)])


def test_without_the_step_the_shapes_do_not_meet():
    """The same model over plain dims: TVM cannot prove the two maps' sizes equal."""
    with pytest.raises(UnsupportedError, match=r"node .*: TVM's importer cannot tell the shape of its output at run-time dims .* "
                                               r"--dim NAME=MIN:MAX:STEP \(now H=4:64, W=8:96\)"):  # fmt: skip
        from_onnx(_fpn(), {"x": (1, 2, "H", "W")}, dims={"H": (4, 64), "W": (8, 96)})


def test_ppocr_detector_from_one_artifact(pocl):
    """PP-OCRv4's detector at H, W multiples of 32 (bound 320 here; 960 in the benchmark)."""
    from relax_vk.zoo.packaged import packaged_model_path

    path = packaged_model_path("ppocr_det")
    mod = from_onnx(path, {"x": (1, 3, "H", "W")}, dims={"H": (32, 320, 32), "W": (32, 320, 32)})
    session = load(relax_vk.build(mod, "opencl").artifact(), device="pocl")
    reference = ort.InferenceSession(path)
    for h, w in ((32, 32), (96, 64), (64, 160)):
        x = np.random.default_rng(h + w).standard_normal((1, 3, h, w)).astype(np.float32)
        (got,) = session.run([x])
        (expected,) = reference.run(None, {"x": x})
        assert got.shape == expected.shape == (1, 1, h, w)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_the_dim_syntax():
    assert parse_dim("H=32:960:32") == ("H", (32, 960, 32))
    assert parse_dim("W=8:1280") == ("W", (8, 1280))
    for bad in ("H=30:960:32", "H=32:960:0", "H=32:950:32"):
        with pytest.raises(UnsupportedError, match="NAME=MIN:MAX:STEP"):
            parse_dim(bad)
