"""Ceil-mode pools over a run-time size: max pools (relax_vk.passes.layout.ceil_mode_pools) as
floor-mode pools with more end padding where PyTorch's last-window rule cannot apply, right against
PyTorch at every size on both APIs, the others refused by name; average pools (TVM sizes them with
no condition) right at every size, counted padding or not."""

import os
import tempfile

import numpy as np
import pytest
from helpers_build import BACKENDS

import relax_vk
from relax_vk.core.errors import UnsupportedError
from relax_vk.runtime import load

torch = pytest.importorskip("torch")


def _onnx_with_run_time_dims(pool_args: dict, pool=None):
    from relax_vk.frontends import from_onnx

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), (pool or torch.nn.MaxPool2d)(**pool_args)).eval()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "pool.onnx")
        torch.onnx.export(model, (torch.randn(1, 3, 12, 17),), path, dynamo=False, opset_version=17, input_names=["x"],
                          dynamic_axes={"x": {2: "H", 3: "W"}})  # fmt: skip
        return model, from_onnx(path, dims={"H": (9, 40), "W": (9, 64)})


def _assert_right_at_sizes(model, mod, backend, device, sizes):
    """One artifact of ``mod``, run at each ``(H, W)``: PyTorch's shape and values."""
    session = load(relax_vk.build(mod, backend).artifact(), device=device)
    for h, w in sizes:
        x = torch.randn(1, 3, h, w)
        with torch.no_grad():
            want = model(x).numpy()
        got = session.run([x.numpy()])[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pool_args", [dict(kernel_size=3, stride=2), dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2, stride=2)])
@pytest.mark.parametrize("backend, device", BACKENDS)
def test_ceil_mode_max_pools_run_at_every_size(pool_args, backend, device):
    model, mod = _onnx_with_run_time_dims(dict(pool_args, ceil_mode=True))
    _assert_right_at_sizes(model, mod, backend, device, ((9, 9), (13, 17), (40, 33), (21, 64)))


def test_a_pool_whose_last_window_can_start_in_the_padding_is_refused_by_name():
    _, mod = _onnx_with_run_time_dims(dict(kernel_size=2, stride=2, padding=1, ceil_mode=True))
    with pytest.raises(UnsupportedError, match=r"max_pool2d \(\w+, model op [^)]*MaxPool[^)]*\) .*condition on the run-time dims .*step of the pool's stride"):
        relax_vk.build(mod, "opencl")


@pytest.mark.parametrize("pool_args", [dict(kernel_size=2, stride=2), dict(kernel_size=3, stride=2),
                                       dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
                                       dict(kernel_size=3, stride=2, padding=1)])  # fmt: skip
@pytest.mark.parametrize("backend, device", BACKENDS)
def test_ceil_mode_average_pools_run_at_every_size(pool_args, backend, device):
    """The last window past the input's end divides by what it covers of the input and the declared
    padding (PyTorch's rule), at odd and even sizes, from one artifact."""
    model, mod = _onnx_with_run_time_dims(dict(pool_args, ceil_mode=True), torch.nn.AvgPool2d)
    _assert_right_at_sizes(model, mod, backend, device, ((9, 9), (13, 17), (40, 33), (22, 64)))
