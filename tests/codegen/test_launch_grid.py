"""FoldLaunchGrid: no grid axis over the target's workgroup limit, on both APIs, with the right numbers."""

import numpy as np
import pytest
from helpers_build import BACKENDS

import relax_vk
from relax_vk.runtime import load

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_grids_fold_to_a_cut_down_limit(backend, device):
    from relax_vk.frontends import from_torch

    model = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.AvgPool2d(2), torch.nn.Conv2d(16, 8, 1)).eval()
    x = torch.randn(1, 8, 40, 36)
    make = relax_vk.target.opencl if backend == "opencl" else relax_vk.target.vulkan
    artifact = relax_vk.build(from_torch(model, (x,)), make(max_workgroups=8)).artifact()
    groups = [g // loc for k in artifact.program["kernels"] for g, loc in zip(k["global"], k["local"])]
    assert max(groups) <= 8
    unfolded = relax_vk.build(from_torch(model, (x,)), make()).artifact()
    assert max(g // loc for k in unfolded.program["kernels"] for g, loc in zip(k["global"], k["local"])) > 8  # it had to fold
    out = load(artifact, device=device).run([x.numpy()])[0]
    with torch.no_grad():
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-4, atol=1e-5)
