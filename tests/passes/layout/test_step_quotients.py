"""StepQuotients: over stepped run-time dims (``4 * Dim("w")``, ``--dim H=8:32:2``), a grid built
with ``arange`` (a YOLO detect head), a strided slice (YOLOv5's Focus) and an adaptive max pool
fused with the op after it stopped the build inside TVM (``slot_map_``, ``VarRemapGet``, "All
shape inputs are expected to be single tirx var", "Parameter expression 2 expected ..."):
``arange``'s size argument kept the quotient ``w`` where every shape said ``W // 4``
(StepQuotients), and FuseTIR takes no computed size argument (IsolateComputedSizes). One artifact
each, right at several sizes."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.export import Dim  # noqa: E402

import relax_vk  # noqa: E402
from relax_vk.frontends import from_torch  # noqa: E402
from relax_vk.runtime import load  # noqa: E402


class _Grid(torch.nn.Module):
    def forward(self, x):
        h, w = x.shape[-2:]
        yv, xv = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing="ij")
        return (x + xv + yv * 100).sigmoid() * 4


class _Focus(torch.nn.Module):
    def forward(self, x):
        return torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]], 1)


class _Pools(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.adaptive_max_pool2d(x, 1) + torch.nn.functional.adaptive_avg_pool2d(x, 1)


@pytest.mark.one_api("api")
@pytest.mark.parametrize("api, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.parametrize("model", [_Grid, _Focus, _Pools], ids=["grid", "focus", "pools"])
def test_stepped_dims_build_and_run_at_every_size(model, api, device, request):
    request.getfixturevalue(device)
    dims = {"x": {2: 2 * Dim("h", min=2, max=12), 3: 4 * Dim("w", min=1, max=6)}}
    mod = from_torch(model(), (torch.randn(1, 3, 8, 8),), dynamic_shapes=dims)
    session = load(relax_vk.build(mod, api).artifact(), device=device)
    for size in ((8, 8), (22, 12), (4, 24)):
        x = torch.randn(1, 3, *size, generator=torch.Generator().manual_seed(size[0]))
        np.testing.assert_allclose(session.run([x.numpy()])[0], model()(x).numpy(), rtol=1e-5, atol=1e-5)


def test_onnx_stepped_dims_grid(pocl, tmp_path):
    """The same grid exported to ONNX, declared ``--dim H=8:32:2``."""
    pytest.importorskip("onnx")
    from relax_vk.frontends import from_onnx

    path = str(tmp_path / "grid.onnx")
    torch.onnx.export(_Grid(), (torch.randn(1, 3, 8, 8),), path, input_names=["x"], dynamic_axes={"x": {2: "H", 3: "W"}}, dynamo=False, opset_version=17)
    mod = from_onnx(path, {"x": (1, 3, "H", "W")}, dims={"H": (8, 32, 2), "W": (8, 32, 2)})
    session = load(relax_vk.build(mod, "opencl").artifact(), device="pocl")
    for size in ((8, 8), (10, 30)):
        x = torch.randn(1, 3, *size)
        np.testing.assert_allclose(session.run([x.numpy()])[0], _Grid()(x).numpy(), rtol=1e-5, atol=1e-5)
