"""The zoo models: imported from PyTorch, compiled, run on pocl (OpenCL) or on lavapipe (Vulkan)
with real images, and compared with PyTorch eager (rtol = atol = 1e-3); their texture share and
copies are asserted. Each model runs on one API here (the ``one_api`` marker, tests/conftest.py),
and the models of :data:`FULL_ONLY` only with ``make test-full``; the conformance table
(``benchmarks/conformance.py``) runs every model on both APIs and both front doors."""

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the zoo needs the torch extra")

from helpers_build import BACKENDS, marked_full_only  # noqa: E402

import relax_vk  # noqa: E402
from relax_vk.frontends import from_torch  # noqa: E402
from relax_vk.runtime import load  # noqa: E402
from relax_vk.zoo import ZOO, build_zoo_model  # noqa: E402

# minimum share of activation bytes in textures in the compiled (fused) module, and maximum
# copies. Anchors: ExecuTorch's Vulkan backend puts 100% in textures with at most one transition on
# ResNet-18, MobileNetV2 and a small UNet, and 1.3% on a ViT whose attention uses a 5-D reshape (as
# this one does); upstream TVM 0.27 reaches 66.6% / fails / 40% / 0%. What relax_vk keeps in buffers
# is the model's NCHW output (buffer ABI) and the 2-D classifier vectors; none of them is copied.
TARGETS = {
    "resnet18": (0.997, 0),
    "mobilenet_v2": (0.995, 0),
    "unet_small": (0.979, 0),
    "rgb_stem": (0.993, 0),
    # the packed token layout: LayerNorm, Linear (1x1 convs), the 5-D qkv split, attention and GELU
    # in textures (ExecuTorch: 1.3% with this 5-D reshape, upstream TVM 0%)
    "vit_small": (0.99, 0),
    # PyTorch's fused-attention decomposition on 17 tokens: k^T scaled on its transpose, the scores
    # padded bases (softmax and the fully-masked-row guard mask their padding lanes)
    "deit_tiny": (0.99, 0),
    "mobilenet_v3": (0.991, 0),
    "efficientnet": (0.998, 0),
    # the third dense block's concatenations have 42..90 channels (not multiples of 4), which stay
    # in buffers
    "densenet": (0.949, 0),
    "inception": (0.999, 0),
    # each 5-D channel shuffle is a token view, gathered element by element into a texture
    "shufflenet_v2": (0.99, 0),
    "squeezenet": (0.999, 0),
    "resnext": (0.998, 0),
    # the NHWC part of every block (LayerNorm, Linear, GELU, layer scale) as token tensors; in
    # buffers: the LayerNorms' per-pixel statistics and the classifier vectors (2.1%)
    "convnext": (0.975, 0),
    # the buffer is the 5x64x64 NCHW output (buffer ABI), 17.5% of the activation bytes
    "deeplab_aspp": (0.825, 0),
    # windows (6-D partitions, rolls, merges) are token views; in buffers: the per-token statistics
    "swin_tiny": (0.99, 0),
    # the unfold/fold around the transformer layers are token views of the conv maps
    "mobilevit": (0.99, 0),
    # the recurrent layers' inputs, states and outputs are buffers (their kernel reads buffers),
    # the conv backbone textures
    "crnn": (0.83, 0),
    "crnn_gru": (0.85, 0),
}


_IMPORTED: dict = {}


def _imported(name):
    """``(model, example, imported Relax module, PyTorch's output)`` of a zoo model, made once per
    test process (a model's tests for both APIs sit next to each other, so mostly on one worker)."""
    if name not in _IMPORTED:
        model, example = build_zoo_model(name)
        with torch.no_grad():
            expected = model(example).numpy()
        _IMPORTED[name] = (model, example, from_torch(model, (example,)), expected)
    return _IMPORTED[name]


#: zoo models whose ops the suite's other models and tests cover, run by ``make test-full`` and the
#: conformance table: EfficientNet's SiLU squeeze-excite (MobileNetV3's hard-swish one, PP-OCR's
#: SiLU), Inception's branch concatenations (DenseNet's), ResNeXt's grouped convs (ShuffleNetV2's
#: and the conv schedule tests), DeiT's attention (ViT's), the GRU (tests/frontends/test_recurrent.py);
#: MobileNetV3's hard-sigmoid squeeze-excite (tests/passes/lower/test_isolate_broadcast_reductions.py,
#: the fuzzer's "se" nodes), MobileViT's unfold/fold and ConvNeXt's NHWC token tensors (Swin's
#: windows, tests/passes/layout/test_token_layout.py), DenseNet's concatenations (SqueezeNet's fire
#: modules, the fuzzer's concats), ShuffleNetV2's channel shuffle (the ShuffleNet unit of
#: tests/frontends/test_onnx_op_classes.py), DeepLab's dilated convs and bilinear upsampling (the
#: fuzzer's graphs, PP-OCR's detector). Each was a full model's build and driver compile, 10-31 s of
#: a cold suite.
FULL_ONLY = {"efficientnet", "inception", "resnext", "deit_tiny", "crnn_gru", "mobilenet_v3", "mobilevit", "convnext", "densenet",
             "shufflenet_v2", "deeplab_aspp"}  # fmt: skip


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", BACKENDS)
@pytest.mark.parametrize("name", marked_full_only(sorted(ZOO), FULL_ONLY, "the smaller cases named above"))
def test_zoo_model_runs_and_matches_pytorch(name, backend, device):
    model, example, mod, expected = _imported(name)
    compiled = relax_vk.build(mod, target=backend)
    assert float(np.std(expected)) > 1e-3  # a meaningful comparison, not of near-zero outputs
    out = load(compiled.artifact(), device=device).run([example.numpy()])[0]
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-3)
    plan = compiled.plan()
    share, copies = TARGETS[name]
    assert plan.activation_texture_share >= share
    assert plan.copies <= copies


def test_unknown_zoo_name():
    with pytest.raises(ValueError, match=re.escape("the zoo has: " + ", ".join(sorted(ZOO)))):
        build_zoo_model("alexnet")


def test_every_zoo_model_has_a_target():
    assert sorted(TARGETS) == sorted(ZOO)


# representative models under cut-down device limits (256-texel images of 64 layers, 1 MiB buffer
# bindings, 256 workgroups per grid axis): weights split, grids folded, textures that do not fit
# fall back to buffers; benchmarks/conformance.py --limits cut runs the whole zoo
# (UNet: maps past the cut images fall back to buffers; with RELAX_VK_TEST_FULL=1 also ResNet-18,
# whose weights split and grids fold, as tests/passes/layout/test_split_large_weights.py and
# tests/codegen/test_launch_grid.py check on small models, MobileNetV2 and ShuffleNetV2)
CUT = ["unet_small", "resnet18", "mobilenet_v2", "shufflenet_v2"]


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", BACKENDS)
@pytest.mark.parametrize("name", marked_full_only(CUT, CUT[1:], "unet_small; the split and launch-grid tests"))
def test_zoo_model_under_cut_down_limits(name, backend, device):
    from relax_vk.testing.fuzz.runner import CUT_LIMITS, make_target

    model, example, mod, expected = _imported(name)
    artifact = relax_vk.build(mod, target=make_target(backend, CUT_LIMITS)).artifact()
    for t in artifact.program["tensors"]:
        assert (t["image"] is None and t["bytes"] <= CUT_LIMITS["max_buffer_bytes"]) or (
            t["image"] and max(t["image"][:2]) <= 256 and t["image"][2] <= 64
        ), t
    assert max(g // loc for k in artifact.program["kernels"] for g, loc in zip(k["global"], k["local"])) <= 256
    out = load(artifact, device=device).run([example.numpy()])[0]
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-3)
