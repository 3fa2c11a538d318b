"""relax_vk.build: the full pipeline, every kernel compiled by a real OpenCL compiler (pocl)."""

import pytest
from tvm import relax

import relax_vk
from relax_vk.compiler import UnsupportedTargetError
from relax_vk.models import EXAMPLES, build_example

from helpers_build import build_and_compile, image_params, kernel_scopes


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_build_and_every_kernel_compiles_on_pocl(name):
    compiled = build_and_compile(build_example(name))
    # every tensor of the final main carries a VDevice
    untyped = []

    def visit(e):
        if isinstance(e, relax.Var) and isinstance(e.ty, relax.TensorType) and e.ty.vdevice is None:
            untyped.append(e.name)

    relax.analysis.post_order_visit(compiled.main, visit)
    assert untyped == []
    kernel_scopes(compiled)  # call-site scopes == PrimFunc buffer scopes, for every kernel


def test_rfc_example_kernels():
    compiled = build_and_compile(build_example("rfc-conv2d"))
    scopes = kernel_scopes(compiled)
    assert scopes["te_layout_transform"] == (["global"], ["global.texture"])
    assert scopes["te_layout_transform1"] == (["global"], ["global.texture-weight"])
    conv = [k for k in scopes if k.startswith("conv2d_NCHWc_OIHWo")][0]
    assert scopes[conv] == (["global.texture", "global.texture-weight"], ["global.texture"])
    assert scopes["te_layout_transform2"] == (["global.texture"], ["global"])
    src = compiled.opencl_source
    # textures are real image2d_array_t parameters, written with write_imagef and read with read_imagef
    assert image_params(src, "te_layout_transform_kernel") == ["__write_only"]
    conv_kernels = [k for k in compiled.kernels if k.startswith(conv)]
    assert any(image_params(src, k) == ["__write_only", "__read_only", "__read_only"] for k in conv_kernels)
    assert image_params(src, "te_layout_transform2_kernel") == ["__read_only"]
    assert "write_imagef" in src and "READ_IMAGEF" in src


def test_other_target_kinds_are_refused_clearly():
    import tvm

    with pytest.raises(UnsupportedTargetError, match=r"\('opencl', 'vulkan'\) targets, got kind 'cuda'"):
        relax_vk.build(build_example("rfc-conv2d"), tvm.target.Target("cuda"))


def test_vulkan_build_reports_its_shader_stage():
    compiled = relax_vk.build(build_example("conv-relu-pool"), relax_vk.target.vulkan())
    assert compiled.backend == "vulkan" and set(compiled.stage_seconds) == {"scope", "lowering", "codegen", "wgsl"}
    assert sorted(compiled.shaders) == compiled.kernels and compiled.source.startswith("// relax_vk: kernel")


def test_build_reports_stage_times_and_plan():
    compiled = relax_vk.build(build_example("conv-relu-pool"))
    assert set(compiled.stage_seconds) == {"scope", "lowering", "codegen"}
    plan = compiled.plan()
    assert plan.texture_bytes > 0


def test_get_pipeline_works_with_tvm_compile():
    import tvm

    target = relax_vk.target.opencl()
    exe = tvm.compile(
        build_example("conv-relu-pool"), target, relax_pipeline=relax_vk.get_pipeline(target), tir_pipeline="relax_vk.texture"
    )
    assert isinstance(exe, relax.VMExecutable)
