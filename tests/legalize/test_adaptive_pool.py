"""Adaptive pools with uneven windows (a 13 x 13 map to 6 x 6): relax_vk writes them as
reductions of static extent (TOPI's nested windows fit no schedule when both axes are uneven);
right against PyTorch on both APIs, average and max, at shapes real heads use."""

import numpy as np
import pytest
from helpers_build import BACKENDS

import relax_vk
from relax_vk.runtime import load

torch = pytest.importorskip("torch")


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize("shape, size", [((1, 8, 13, 13), (6, 6)), ((1, 5, 10, 4), (3, 3)), ((2, 3, 7, 9), (4, 2)), ((1, 4, 12, 8), (3, 4))])
@pytest.mark.parametrize("backend, device", BACKENDS)
def test_adaptive_pools_are_right_with_any_windows(kind, shape, size, backend, device):
    from relax_vk.frontends import from_torch

    model = (torch.nn.AdaptiveAvgPool2d if kind == "avg" else torch.nn.AdaptiveMaxPool2d)(size).eval()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    artifact = relax_vk.build(from_torch(model, (x,)), backend).artifact()
    out = load(artifact, device=device).run([x.numpy()])[0]
    with torch.no_grad():
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-5, atol=1e-6)


def test_the_windows_are_pytorchs():
    from relax_vk.legalize.adaptive_pool import _windows

    assert _windows(13, 6) == ([(0, 3), (2, 5), (4, 7), (6, 9), (8, 11), (10, 13)], 3)
    assert _windows(10, 3) == ([(0, 4), (3, 7), (6, 10)], 4)
