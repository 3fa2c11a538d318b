"""Run-time dims from the PyTorch front door: ``torch.export``'s ``Dim`` kept symbolic, its range
on ``main``, one artifact right at three widths on pocl, a width past the range refused."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import relax_vk  # noqa: E402
from relax_vk.core.dims import LOWER_ATTR, UPPER_ATTR  # noqa: E402
from relax_vk.frontends.torch import from_torch  # noqa: E402
from relax_vk.runtime import load  # noqa: E402


class _ConvThenLinear(torch.nn.Module):
    """A conv feature map averaged over height, read as a sequence along the width (OCR-shaped)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.linear = torch.nn.Linear(8, 5)

    def forward(self, x):
        return self.linear(torch.relu(self.conv(x)).mean(dim=2).transpose(1, 2))


def test_a_torch_export_dim_is_a_run_time_dim():
    torch.manual_seed(0)
    model = _ConvThenLinear().eval()
    width = torch.export.Dim("W", min=8, max=256)
    mod = from_torch(model, (torch.randn(1, 3, 16, 32),), dynamic_shapes={"x": {3: width}})
    (name,) = [str(k) for k in mod["main"].attrs[UPPER_ATTR]]
    assert int(mod["main"].attrs[UPPER_ATTR][name]) == 256 and int(mod["main"].attrs[LOWER_ATTR][name]) == 8
    session = load(relax_vk.build(mod, "opencl").artifact(), device="pocl")
    for w in (8, 100, 256):
        x = torch.randn(1, 3, 16, w)
        (out,) = session.run([x.numpy()])
        with torch.no_grad():
            expected = model(x).numpy()
        assert out.shape == (1, w, 5)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=rf"input x: axis 3 \({name}\) is 300, outside {name}'s declared range 8\.\.256"):
        session.run([np.zeros((1, 3, 16, 300), np.float32)])


def test_adaptive_pools_of_a_run_time_size_reduce_over_the_bounds_windows():
    """An adaptive pool of a run-time size reduces over the largest window its dims' range allows
    (one kernel, right at every size; before, the average failed deep in scheduling and the max
    pool's converter crashed reading the size as an integer); a global one is TVM's."""
    width, example = torch.export.Dim("W", min=8, max=64), torch.randn(1, 2, 10, 21)
    pools = (torch.nn.AdaptiveAvgPool2d((3, 5)), torch.nn.AdaptiveAvgPool2d(1), torch.nn.AdaptiveMaxPool2d((2, 3)), torch.nn.AdaptiveMaxPool2d((4, 7)))
    for pool in pools:
        pool = pool.eval()
        mod = from_torch(pool, (example,), dynamic_shapes={"input": {3: width}})
        session = load(relax_vk.build(mod, "opencl").artifact(), device="pocl")
        for w in (8, 21, 37, 64):
            x = torch.randn(1, 2, 10, w)
            np.testing.assert_allclose(session.run([x.numpy()])[0], pool(x).numpy(), rtol=1e-5, atol=1e-6)
