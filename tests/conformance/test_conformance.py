"""The 30 upstream texture-scoping conformance cases, built with relax_vk: each builds, every
kernel compiles on pocl (clBuildProgram), the compiled model runs on pocl with real images and
matches TVM's llvm target (rtol = atol = 1e-4), and the scope of every kernel argument and output
is asserted. Each case is also built for Vulkan (same scopes), its WGSL shaders created on
lavapipe, and run there against the same reference. Where relax_vk differs from upstream, the
comment says why.
(Kernel names are TVM's; "tex" = global.texture, "wt" = global.texture-weight, "G" = global.)"""

import pytest

from conformance.cases import CASES
import numpy as np

from relax_vk.analysis.reference import random_inputs, run_on_cpu
from relax_vk.passes.lower.name_kernels_for_api import api_name
from relax_vk.runtime import load
from helpers_build import BACKENDS, build_for, kernel_scopes

G, TEX, WT = "global", "global.texture", "global.texture-weight"

EXPECTED = {
    # the (26, 26) bias broadcasts in 5-D (reshaped to (1, 1, 26, 26, 1)), so the add fuses into the conv (upstream: separate NCHW add after a transform)
    "binary_broadcast": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "reshape": ([G], [G]),
        "fused_conv2d_NCHWc_OIHWo_opencl_add": ([TEX, WT, G], [TEX]),
        "te_layout_transform2": ([TEX], [G]),
    },
    "binary_ewise_scalar": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "fused_conv2d_NCHWc_OIHWo_opencl_add": ([TEX, WT], [TEX]),
        "te_layout_transform2": ([TEX], [G]),
    },
    # upstream: activation texture-nhwc; relax_vk: global.texture (the mapping rule keeps H, W as image axes)
    "conv2d": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "te_layout_transform2": ([TEX], [G]),
    },
    # the full-size bias is packed (a texture); the add fuses into the conv, whose texture output the final transform reads (upstream: bias texture-weight, conv output buffer); no copies
    "conv2d_add": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "te_layout_transform2": ([G], [TEX]),
        "fused_conv2d_NCHWc_OIHWo_opencl_add": ([TEX, WT, TEX], [TEX]),
        "te_layout_transform3": ([TEX], [G]),
    },
    # as maxpool
    "conv2d_avgpool2d": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "adaptive_avg_pool2d_opencl": ([TEX], [TEX]),
        "te_layout_transform2": ([TEX], [G]),
    },
    # the convs write textures that the fused concat + unpacking transform reads (upstream: textures read by the concat, then a buffer concat result); no copies
    "conv2d_conv2d_conv2d_concat": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "te_layout_transform2": ([G], [TEX]),
        "fused_conv2d_NCHWc_OIHWo_opencl_add_relu": ([TEX, WT, TEX], [TEX]),
        "te_layout_transform3": ([G], [WT]),
        "conv2d_NCHWc_OIHWo1_opencl": ([TEX, WT], [TEX]),
        "te_layout_transform4": ([G], [WT]),
        "conv2d_NCHWc_OIHWo2_opencl": ([TEX, WT], [TEX]),
        "fused_concatenate_te_layout_transform5": ([TEX, TEX], [G]),
    },
    # upstream keeps the 5-output conv in NCHW (buffers); relax_vk pads it to 8 channels and packs it (texture input), then slices the padding off before the channel concat, which needs exact channels
    "conv2d_conv2d_fallback_to_buffer_conv2d": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "te_layout_transform2": ([G], [TEX]),
        "fused_conv2d_NCHWc_OIHWo_opencl_add_relu": ([TEX, WT, TEX], [TEX]),
        "te_layout_transform3": ([G], [WT]),
        "conv2d_NCHWc_OIHWo1_opencl": ([TEX, WT], [TEX]),
        "pad": ([G], [G]),
        "te_layout_transform4": ([G], [WT]),
        "conv2d_NCHWc_OIHWo2_opencl": ([TEX, WT], [TEX]),
        "fused_te_layout_transform5_te_layout_transform6_strided_slice_concatenate": ([TEX, TEX], [G]),
    },
    "conv2d_expand_dims": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "fused_te_layout_transform2_expand_dims": ([TEX], [G]),
    },
    # ewise_fma has no upstream legalizer (upstream leaves it opaque and cannot build); relax_vk legalizes it
    "conv2d_fma_relu_conv2d": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "fused_te_layout_transform2_ewise_fma_relu": ([TEX, G, G], [G]),
        "te_layout_transform3": ([G], [TEX]),
        "te_layout_transform4": ([G], [WT]),
        "conv2d_NCHWc_OIHWo1_opencl": ([TEX, WT], [TEX]),
        "te_layout_transform5": ([TEX], [G]),
    },
    "conv2d_layernorm": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "te_layout_transform2": ([TEX], [G]),
        "layer_norm": ([G, G, G], [G]),
    },
    # the pool reads the conv's texture and writes a texture that the final transform reads (upstream: pool output buffer after FoldVDeviceScopeChange)
    "conv2d_maxpool2d": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "max_pool2d_opencl": ([TEX], [TEX]),
        "te_layout_transform2": ([TEX], [G]),
    },
    # upstream: activation texture-weight ("weight first"); relax_vk: global.texture
    "conv2d_nchw": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "te_layout_transform2": ([TEX], [G]),
    },
    # NHWC data / OHWI kernel pack straight to NCHW4c; the OHWI parameter is transposed first
    "conv2d_nhwc": {
        "te_layout_transform": ([G], [TEX]),
        "transpose": ([G], [G]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "te_layout_transform2": ([TEX], [G]),
    },
    "conv2d_relu": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "fused_conv2d_NCHWc_OIHWo_opencl_relu": ([TEX, WT], [TEX]),
        "te_layout_transform2": ([TEX], [G]),
    },
    # upstream: conv output texture-weight read by the concat; relax_vk: texture, and the relu + concat fuse with the unpacking transform that reads it; no copies either way
    "conv2d_relu_concat": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "fused_relu_concatenate_te_layout_transform2": ([TEX], [G]),
    },
    # split outputs are packed textures, each unpacked into the tuple result (upstream: buffers)
    "conv2d_relu_concat_split": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "fused_relu_concatenate_split": ([TEX], [TEX, TEX]),
        "fused_te_layout_transform2": ([TEX], [G]),
        "fused_te_layout_transform3": ([TEX], [G]),
    },
    # the unpacking transforms are injective, so relu, concat, split, the NCHW transposes and the final concat fuse into one kernel reading the conv's texture
    "conv2d_relu_concat_split_transpose_concat": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "fused_relu_concatenate_split_te_layout_transform2_transpose_te_layout_transform3_transpose1_concatenate1": ([TEX], [G]),
    },
    "conv2d_relu_tanh": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "fused_conv2d_NCHWc_OIHWo_opencl_relu_tir_tanh": ([TEX, WT], [TEX]),
        "te_layout_transform2": ([TEX], [G]),
    },
    "conv2d_softmax": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "te_layout_transform2": ([TEX], [G]),
        "softmax": ([G], [G]),
    },
    "conv2d_squeeze": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        # the squeeze of the packed map is a token view, unpacked as a reshape
        "fused_te_layout_transform2_reshape": ([TEX], [G]),
    },
    "conv2d_strided_slice": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "fused_te_layout_transform2_strided_slice": ([TEX], [G]),
    },
    "conv2d_sum": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "sum": ([TEX], [TEX]),
        "fused_te_layout_transform2_reshape": ([TEX], [G]),
    },
    "conv2d_sum_keepdims": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "sum": ([TEX], [TEX]),
        "te_layout_transform2": ([TEX], [G]),
    },
    "conv2d_sum_reduce": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "te_layout_transform2": ([TEX], [G]),
        "sum": ([G], [G]),
    },
    "conv2d_transpose": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "fused_te_layout_transform2_transpose": ([TEX], [G]),
    },
    # conv1 feeds conv2 and three synced elementwise consumers fused into conv2, all textures: no copies (upstream: conv1 a buffer with one copy to a texture for conv2)
    "injective_inputs1": {
        "mean": ([G], [G]),
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "te_layout_transform2": ([G], [WT]),
        "reshape": ([G], [G]),
        "fused_conv2d_NCHWc_OIHWo_opencl_add_add1_multiply_add2": ([TEX, WT, G], [TEX]),
        "te_layout_transform3": ([TEX], [G]),
    },
    # as injective_inputs1
    "injective_nwo_inputs2": {
        "mean": ([G], [G]),
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "te_layout_transform2": ([G], [WT]),
        "reshape": ([G], [G]),
        "fused_conv2d_NCHWc_OIHWo_opencl_add_add1_multiply_add2": ([TEX, WT, G], [TEX]),
        "te_layout_transform3": ([TEX], [G]),
    },
    # the pool output is a texture read by three convs, as upstream; the branch adds fuse into the convs and their packed biases are textures
    "pooling_branching_texture_params": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "conv2d_NCHWc_OIHWo_opencl": ([TEX, WT], [TEX]),
        "max_pool2d_opencl": ([TEX], [TEX]),
        "te_layout_transform2": ([G], [WT]),
        "te_layout_transform3": ([G], [WT]),
        "conv2d_NCHWc_OIHWo2_opencl": ([TEX, WT], [TEX]),
        "fused_conv2d_NCHWc_OIHWo1_opencl_add": ([TEX, WT, TEX], [TEX]),
        "te_layout_transform4": ([G], [WT]),
        "fused_conv2d_NCHWc_OIHWo3_opencl_add1": ([TEX, WT, TEX], [TEX]),
        "te_layout_transform5": ([TEX], [G]),
    },
    # the leading relu reads the NCHW input: it stays NCHW in a buffer, as upstream
    "relu_conv2d_relu": {
        "relu": ([G], [G]),
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "fused_conv2d_NCHWc_OIHWo_opencl_relu1": ([TEX, WT], [TEX]),
        "te_layout_transform2": ([TEX], [G]),
    },
    # activations in global.texture, weights in global.texture-weight; the scaled bias multiply stays a small buffer kernel, as upstream
    "residual_block": {
        "te_layout_transform": ([G], [TEX]),
        "te_layout_transform1": ([G], [WT]),
        "te_layout_transform2": ([G], [TEX]),
        "fused_conv2d_NCHWc_OIHWo_opencl_add_relu": ([TEX, WT, TEX], [TEX]),
        "te_layout_transform3": ([G], [WT]),
        "multiply": ([G], [G]),
        "te_layout_transform4": ([G], [TEX]),
        "fused_conv2d_NCHWc_OIHWo1_opencl_add1_relu1": ([TEX, WT, TEX], [TEX]),
        "te_layout_transform5": ([G], [WT]),
        "fused_conv2d_NCHWc_OIHWo2_opencl_relu2": ([TEX, WT], [TEX]),
        "te_layout_transform6": ([TEX], [G]),
    },
}


def test_every_upstream_case_is_covered():
    assert sorted(CASES) == sorted(EXPECTED) and len(CASES) == 30


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", BACKENDS)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_conformance_case(name, backend, device):
    mod = CASES[name]()
    compiled = build_for(mod, backend)
    scopes = kernel_scopes(compiled)
    if backend == "vulkan":  # Vulkan kernels are named for Vulkan (NameKernelsForApi); upstream's names are OpenCL's
        assert not any("opencl" in k for k in scopes)
        scopes = {api_name(k, "opencl", "vulkan"): v for k, v in scopes.items()}
    assert scopes == EXPECTED[name]
    # run the compiled kernels with real images and compare with TVM's llvm target
    inputs = random_inputs(mod)
    outputs = load(compiled.artifact(), device=device).run(inputs)
    for out, ref in zip(outputs, run_on_cpu(mod, inputs)):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
