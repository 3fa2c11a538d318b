"""Shader modules without wgpu's runtime checks (relax_vk.runtime.vulkan.shader_modules): the same
results as checked shaders on real models, and a clear error for an unknown mode."""

import numpy as np
import pytest

import relax_vk
from relax_vk.analysis.reference import random_inputs, run_on_cpu
from relax_vk.models import build_example
from relax_vk.runtime import load
from relax_vk.runtime.vulkan.shader_modules import CHECKS, create_shader_module
from relax_vk.zoo import build_zoo_model


@pytest.fixture(scope="module")
def built():
    """(name, module, Vulkan artifact) of an RFC example and MobileNetV2 (depthwise, 1x1 and strided
    convs, residual adds, a global pool), built once for the module."""
    from relax_vk.frontends import from_torch

    model, example = build_zoo_model("mobilenet_v2")
    mods = [("rfc-conv2d", build_example("rfc-conv2d")), ("mobilenet_v2", from_torch(model, (example,)))]
    return [(name, mod, relax_vk.build(mod, target="vulkan").artifact()) for name, mod in mods]


def test_unchecked_shaders_give_the_checked_results(built, lavapipe):
    """Every access of relax_vk's kernels lies inside its binding, so dropping wgpu's clamps changes
    nothing: the outputs equal the checked shaders' and TVM's llvm build."""
    for name, mod, artifact in built:
        inputs = random_inputs(mod)
        checked = load(artifact, device=lavapipe).run(inputs)
        refs = run_on_cpu(mod, inputs)
        for checks in ("loops", "none"):
            session = load(artifact, device=lavapipe, shader_checks=checks)
            assert session.shader_checks == checks
            for a, b, ref in zip(session.run(inputs), checked, refs):
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, err_msg=f"{name} {checks}")
                np.testing.assert_allclose(a, ref, rtol=1e-4, atol=1e-4, err_msg=f"{name} {checks}")


def test_unknown_checks_are_refused(lavapipe):
    device = lavapipe.request_device_sync()
    with pytest.raises(ValueError, match="shader checks must be one of"):
        create_shader_module(device, "@compute @workgroup_size(1) fn main() {}", "some")
    assert CHECKS == ("bounds", "loops", "none")
    artifact = relax_vk.build(build_example("rfc-conv2d")).artifact()  # OpenCL
    with pytest.raises(ValueError, match="Vulkan artifacts only"):
        load(artifact, device="pocl", shader_checks="none")
