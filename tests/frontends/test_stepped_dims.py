"""Run-time dims with a step (``--dim H=32:960:32``; ``relax_vk.core.dims``): a model whose sizes
only match at multiples (PP-OCR's detector: its FPN adds a 2x upsampled map to the map it came
from) from one artifact, right against onnxruntime at several sizes; a size off the step refused
by name; the step in the artifact and the ``--dim`` syntax. (PP-OCRv4's detector itself, one
artifact at H, W multiples of 32: tests/examples/test_ocr.py.)"""

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


def test_the_dim_syntax():
    assert parse_dim("H=32:960:32") == ("H", (32, 960, 32))
    assert parse_dim("W=8:1280") == ("W", (8, 1280))
    for bad in ("H=30:960:32", "H=32:960:0", "H=32:950:32"):
        with pytest.raises(UnsupportedError, match="NAME=MIN:MAX:STEP"):
            parse_dim(bad)


# ---------------------------------------------------------------- PyTorch's 32 * Dim("h")
class _TorchFPN:
    """Two stride-2 convs, the coarse map upsampled 2x (``interpolate``, nearest) and concatenated
    with the finer one: exported with ``32 * Dim("h")`` axes (a torch module, made on demand)."""

    @staticmethod
    def make():
        torch = pytest.importorskip("torch")

        class FPN(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.c1, self.c2 = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.Conv2d(8, 8, 3, stride=2, padding=1)
                self.head = torch.nn.Conv2d(16, 1, 1)

            def forward(self, x):
                a = torch.relu(self.c1(x))
                up = torch.nn.functional.interpolate(torch.relu(self.c2(a)), scale_factor=2, mode="nearest")
                return torch.sigmoid(self.head(torch.cat([a, up], 1)))

        torch.manual_seed(0)
        return torch, FPN().eval()


@pytest.mark.parametrize("backend, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_torch_multiples_of_a_dim_from_one_artifact(backend, device, request):
    """``dynamic_shapes={"x": {2: 32 * Dim("h"), 3: 32 * Dim("w")}}``: the input takes every multiple
    of 32 in range (a dim ``h_x32`` with step 32 in the artifact), right against PyTorch at three
    sizes; an off-step size is refused by name."""
    request.getfixturevalue(device)
    torch, model = _TorchFPN.make()
    from torch.export import Dim

    from relax_vk.frontends.torch import from_torch

    h, w = Dim("h", min=2, max=30), Dim("w", min=2, max=30)
    mod = from_torch(model, (torch.randn(1, 3, 64, 96),), dynamic_shapes={"x": {2: 32 * h, 3: 32 * w}})
    artifact = relax_vk.build(mod, target=backend).artifact()
    steps = {d["name"]: d.get("step") for d in artifact.program["dims"]} if "dims" in artifact.program else None
    session = load(artifact, device=device)
    for H, W in ((64, 96), (160, 64), (320, 224)):
        x = torch.randn(1, 3, H, W)
        with torch.no_grad():
            want = model(x).numpy()
        got = session.run([x.numpy()])[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match=r"input x: axis 2 \((s\d+)_x32\) is 100, not a multiple of \1_x32's step 32 \(declared range 64..960\)"):
        session.run([np.zeros((1, 3, 100, 64), np.float32)])
    assert steps is not None and sorted(v for v in steps.values() if v) == [32, 32], steps


def test_torch_fractional_upsampling_of_a_run_time_dim_is_refused():
    torch = pytest.importorskip("torch")
    from torch.export import Dim

    from relax_vk.frontends.torch import from_torch

    class Up(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.interpolate(x, scale_factor=1.5, mode="nearest")

    with pytest.raises(UnsupportedError, match=r"upsample_nearest2d \(node \w+\): scale 1.5 of the run-time size .*integer scales only"):
        from_torch(Up(), (torch.randn(1, 2, 8, 8),), dynamic_shapes={"x": {3: Dim("w", min=2, max=64)}})


def test_a_token_slice_beside_stepped_dims(pocl, tmp_path):
    """A patch embedding over H, W multiples of 8, a class token prepended and dropped again
    (``t[:, 1:]``): the slice's bounds are made exact after the import, where ``main`` derives the
    quotients from the plain dims. Bounded over the quotients at import (the first version of the
    ONNX Slice converter), the build failed in TVM's VM codegen."""
    torch = pytest.importorskip("torch")
    import onnxruntime as ort

    class Tokens(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Conv2d(3, 16, 8, 8)
            self.cls = torch.nn.Parameter(torch.randn(1, 1, 16))

        def forward(self, x):
            t = self.embed(x).flatten(2).transpose(1, 2)
            return torch.cat([self.cls.expand(t.shape[0], -1, -1), t], 1)[:, 1:].mean(1)

    torch.manual_seed(0)
    path = str(tmp_path / "tokens.onnx")
    torch.onnx.export(Tokens().eval(), (torch.randn(1, 3, 32, 40),), path, input_names=["x"], dynamic_axes={"x": {2: "H", 3: "W"}}, dynamo=False)
    session = load(relax_vk.build(from_onnx(path, {"x": (1, 3, "H", "W")}, dims={"H": (32, 64, 8), "W": (32, 64, 8)}), "opencl").artifact(), device="pocl")
    reference = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for h, w in ((32, 32), (40, 56), (64, 48)):
        x = np.random.RandomState(h + w).randn(1, 3, h, w).astype("float32")
        np.testing.assert_allclose(session.run([x])[0], reference.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
