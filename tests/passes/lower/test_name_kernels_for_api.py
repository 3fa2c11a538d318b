"""NameKernelsForApi: a Vulkan build's kernels (lowered under an OpenCL-kind target) are named
for Vulkan in its shaders, artifact steps and profiles; an OpenCL build's names are untouched."""

import numpy as np

import relax_vk
from relax_vk.analysis.reference import random_inputs, run_on_cpu
from relax_vk.models import build_example
from relax_vk.passes.lower.name_kernels_for_api import api_name
from relax_vk.runtime import load


def test_only_whole_name_parts_are_renamed():
    assert api_name("fused_conv2d_NCHWc_OIHWo_opencl_relu", "vulkan", "opencl") == "fused_conv2d_NCHWc_OIHWo_vulkan_relu"
    assert api_name("max_pool2d_opencl", "vulkan", "opencl") == "max_pool2d_vulkan"
    assert api_name("te_layout_transform1", "vulkan", "opencl") == "te_layout_transform1"
    assert api_name("my_openclish_op", "vulkan", "opencl") == "my_openclish_op"


def test_vulkan_kernels_say_vulkan_and_opencl_kernels_keep_their_names():
    mod = build_example("conv-relu-pool")
    vk, cl = relax_vk.build(mod, "vulkan"), relax_vk.build(mod, "opencl")
    program = vk.artifact().program
    names = vk.kernels + list(vk.shaders) + [k["name"] for k in program["kernels"]] + [s["kernel"] for s in program["steps"] if s["op"] == "launch"]
    assert names and not any("opencl" in n for n in names)
    assert "opencl" not in vk.source.replace("OpenCL", "")
    # the same kernels, API part aside (the plan and the kernel set do not depend on the name)
    assert sorted(n.replace("_vulkan", "_opencl") for n in vk.kernels) == sorted(cl.kernels)
    assert any("_opencl" in n for n in cl.kernels)
    session = load(vk.artifact(), device="lavapipe", profile=True)
    inputs = random_inputs(mod)
    np.testing.assert_allclose(session.run(inputs)[0], run_on_cpu(mod, inputs)[0], rtol=1e-4, atol=1e-4)
    assert [p["name"] for p in session.last_profile] == [s["kernel"] for s in program["steps"] if s["op"] == "launch"]
