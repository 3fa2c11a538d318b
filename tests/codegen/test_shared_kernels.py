"""Kernels whose device code is the same are compiled once (relax_vk.codegen.shared_kernels): on
OpenCL a repeated block's kernels name one function as their entry, on Vulkan they share one
shader; every kernel keeps its own name, and the numbers stay right on both APIs."""

import re

import numpy as np
import pytest
from helpers_build import BACKENDS

import relax_vk
from relax_vk.runtime import load

torch = pytest.importorskip("torch")


def _repeated_blocks():
    torch.manual_seed(0)
    layers = []
    for _ in range(3):
        layers += [torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers).eval(), torch.randn(1, 8, 12, 10)


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_a_repeated_block_is_compiled_once_and_runs_right(backend, device):
    from relax_vk.frontends import from_torch

    model, x = _repeated_blocks()
    artifact = relax_vk.build(from_torch(model, (x,)), backend).artifact()
    kernels = artifact.program["kernels"]
    names = [k["name"] for k in kernels]
    assert len(set(names)) == len(names)
    if backend == "opencl":
        shared = [k for k in kernels if "entry" in k]
        assert shared and all(k["entry"] in names and k["entry"] != k["name"] for k in shared)
        functions = re.findall(r"^__kernel void (\w+)\(", artifact.source, re.MULTILINE)
        assert sorted(functions) == sorted({k.get("entry", k["name"]) for k in kernels})  # each once, no forward declarations
    else:
        spans = {(k["shader"]["offset"], k["shader"]["length"]) for k in kernels}
        assert len(spans) < len(kernels)
        assert sum(length for _, length in spans) == len(artifact.source)
    out = load(artifact, device=device).run([x.numpy()])[0]
    with torch.no_grad():
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-4, atol=1e-5)


def test_kernels_that_differ_are_not_shared():
    from relax_vk.frontends import from_torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.Sigmoid()).eval()
    x = torch.randn(1, 8, 12, 10)
    kernels = relax_vk.build(from_torch(model, (x,)), "opencl").artifact().program["kernels"]
    sigmoid = [k for k in kernels if "sigmoid" in k["name"]]
    assert sigmoid and all("entry" not in k for k in sigmoid)
    assert not any("sigmoid" in k.get("entry", "") for k in kernels)
