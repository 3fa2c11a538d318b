"""Quantized PyTorch models as PyTorch's own tools make them (``relax_vk.frontends.torch_quant``):
pt2e with XNNPACKQuantizer (static per channel and per tensor, dynamic) and torchao's configs
(weight-only int4 per group and int8 per channel, ``Int8WeightOnlyConfig``, int8 dynamic
activations with int4 weights), built for OpenCL and Vulkan,
run on pocl and lavapipe against the quantized model run by PyTorch itself; the weights stay
integers in the artifact (a linear's packed, read by the matmul as it multiplies, with no float
copy). Each model is quantized once per module and built once per API."""

import copy
import importlib.util
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if importlib.util.find_spec("torchao") is None:
    pytest.skip("the quantizers are torchao's (test extra)", allow_module_level=True)
# (torchao itself is imported by the module fixture, not at collection: a worker that never runs
# these tests never loads it)

import torch.ao.quantization.fx._decomposed  # noqa: E402,F401  (torch.ops.quantized_decomposed, PyTorch's own)

import relax_vk  # noqa: E402
from relax_vk.core.errors import UnsupportedError  # noqa: E402
from relax_vk.frontends.torch import from_torch, load_pt2  # noqa: E402
from relax_vk.runtime import load  # noqa: E402

APIS = [("opencl", "pocl"), ("vulkan", "lavapipe")]


class CNN(torch.nn.Module):
    """conv 3x3 -> relu -> conv 3x3 + residual -> global mean -> linear."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2, self.fc = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.Linear(8, 10)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        return self.fc((self.c2(y) + y).mean((2, 3)))


class MLP(torch.nn.Module):
    """A transformer MLP block over tokens: linear + bias -> relu -> linear (no bias) + residual;
    96 inputs to the second linear (not a power of two: its blocks are padded)."""

    def __init__(self):
        super().__init__()
        self.up, self.down = torch.nn.Linear(64, 96), torch.nn.Linear(96, 64, bias=False)

    def forward(self, x):
        return self.down(torch.relu(self.up(x))) + x


def _pt2e(model, x, **config):
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.testing.pt2e._xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    model = torch.export.export(model.eval(), (x,)).module()
    prepared = prepare_pt2e(model, XNNPACKQuantizer().set_global(get_symmetric_quantization_config(**config)))
    gen = torch.Generator().manual_seed(5)
    for _ in range(3):
        prepared(torch.randn(x.shape, generator=gen))
    return convert_pt2e(prepared)


def _torchao(model, config):
    from torchao.quantization import quantize_

    model = copy.deepcopy(model).eval()
    quantize_(model, config)
    return model


#: form -> the weights' bytes (codes and scales) at most this fraction of float32's
BOUNDS = {"int4_group32": 0.16, "int8_channel": 0.29, "int8_weight_only": 0.29, "pt2e_dynamic": 0.29, "int8_dynamic_int4": 0.16}


@pytest.fixture(scope="module")
def models():
    """{form: (quantized torch module, example input)}."""
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, Int8WeightOnlyConfig, IntxWeightOnlyConfig, PerAxis, PerGroup

    torch.manual_seed(0)
    cnn, mlp = CNN().eval(), MLP().eval()
    xc, xm = torch.randn(1, 3, 12, 12), torch.randn(2, 8, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "pt2e_channel": (_pt2e(cnn, xc, is_per_channel=True), xc),
            "pt2e_tensor": (_pt2e(cnn, xc, is_per_channel=False), xc),
            "pt2e_dynamic": (_pt2e(mlp, xm, is_per_channel=True, is_dynamic=True), xm),
            "int4_group32": (_torchao(mlp, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32))), xm),
            "int8_channel": (_torchao(mlp, IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0))), xm),
            "int8_weight_only": (_torchao(mlp, Int8WeightOnlyConfig()), xm),
            "int8_dynamic_int4": (_torchao(mlp, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(32))), xm),
        }


@pytest.fixture(scope="module")
def imported(models):
    return {form: from_torch(model, (x,)) for form, (model, x) in models.items()}


def _launches(artifact):
    return sum(1 for s in artifact.program["steps"] if s["op"] == "launch")


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", APIS)
@pytest.mark.parametrize("form", ["pt2e_channel", "pt2e_tensor", "pt2e_dynamic", "int4_group32", "int8_channel", "int8_weight_only", "int8_dynamic_int4"])
def test_quantized_torch_models_match_pytorch(models, imported, form, backend, device, request):
    request.getfixturevalue(device)
    model, x = models[form]
    with torch.no_grad():
        want = model(x).numpy()
    artifact = relax_vk.build(imported[form], target=backend).artifact()
    got = load(artifact, device=device).run([x.numpy()])[0]
    assert got.shape == want.shape
    # the same fake quantization and integer weights as PyTorch's: float32 rounding apart
    assert np.abs(got - want).max() <= 1e-5 * np.ptp(want), f"max error {np.abs(got - want).max()} of range {np.ptp(want)}"
    constants = [t for t in artifact.program["tensors"] if t.get("kind") == "constant"]
    if form.startswith("pt2e_") and form != "pt2e_dynamic":
        # the convs' int8 weights packed at compile time, still int8 bytes (OIHW4o: [O/4, I, 3, 3, 4]):
        # in snorm8 textures, or int8 buffers
        stored = {tuple(t["shape"]) for t in constants if str(artifact.constants[f"t{t['id']}"].dtype) == "int8"}
        assert stored >= {(2, 4, 3, 3, 4), (2, 8, 3, 3, 4)}
        assert (want.argmax(-1) == got.argmax(-1)).all()
    else:
        # each linear one kernel over its packed codes: no float32 constant of a weight's size
        weights = [(64, 96), (96, 64)]
        assert not [t for t in constants if t["dtype"] == "float32" and int(np.prod(t["shape"])) in {k * n for k, n in weights}]
        codes = sum(t["bytes"] for t in constants if t["dtype"] in ("uint8", "uint32"))  # (packed codes, read as words)
        scales = sum(t["bytes"] for t in constants if t["dtype"] == "float32" and int(np.prod(t["shape"])) not in (96, 64))
        float_bytes = sum(4 * k * n for k, n in weights)
        assert codes + scales <= BOUNDS[form] * float_bytes, (codes, scales, float_bytes)
        assert codes == sum(n * -(-k // 32) * 32 for k, n in weights) // (2 if "int4" in form else 1)


def test_weight_only_linears_are_one_kernel_each(imported):
    """torchao's int4 weight-only MLP: two launches (bias, relu and residual fused after them)."""
    assert _launches(relax_vk.build(imported["int4_group32"], target="opencl").artifact()) == 2


class _Rounding(torch.nn.Module):
    """quantize -> dequantize at values halfway between two steps, and an int8 output."""

    def forward(self, x):
        q = torch.ops.quantized_decomposed.quantize_per_tensor.default(x, 0.5, 3, -128, 127, torch.int8)
        back = torch.ops.quantized_decomposed.dequantize_per_tensor.default(q, 0.5, 3, -128, 127, torch.int8)
        return back * 2.0, torch.ops.quantized_decomposed.quantize_per_tensor.default(x, 0.25, -2, -128, 127, torch.int8)


def test_quantize_rounds_halves_to_even_and_keeps_integer_outputs(pocl):
    x = torch.tensor([[-70.25, -1.25, -0.75, -0.25, 0.25, 0.75, 1.25, 2.75, 63.25, 64.0]])
    want = _Rounding()(x)
    artifact = relax_vk.build(from_torch(_Rounding(), (x,)), target="opencl").artifact()
    got = load(artifact, device="pocl").run([x.numpy()])
    np.testing.assert_array_equal(got[0], want[0].numpy())
    assert got[1].dtype == np.int8
    np.testing.assert_array_equal(got[1], want[1].numpy())


def test_a_saved_pt2e_archive_builds(models, tmp_path, pocl):
    """``.pt2`` of a pt2e model: the quantized ops are registered before the archive is read."""
    model, x = models["pt2e_channel"]
    path = str(tmp_path / "q.pt2")
    torch.export.save(torch.export.export(model, (x,)), path)
    artifact = relax_vk.build(load_pt2(path), target="opencl").artifact()
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(load(artifact, device="pocl").run([x.numpy()])[0], want, rtol=0, atol=1e-5 * np.ptp(want))


class _Symmetric(torch.nn.Module):
    def forward(self, x):
        scale, zp = torch.ops.quantized_decomposed.choose_qparams_symmetric.tensor(x, -128, 127, 1e-5, torch.int8)
        return torch.ops.quantized_decomposed.quantize_per_tensor.tensor(x, scale, zp, -128, 127, torch.int8)


def test_unconverted_quantized_ops_are_refused_by_node():
    with pytest.raises(UnsupportedError, match=r"choose_qparams_symmetric \(node choose_qparams_symmetric\w*\): symmetric dynamic"):
        from_torch(_Symmetric(), (torch.randn(2, 4),))


class _PerChannel(torch.nn.Module):
    """quantize / dequantize per channel of an activation (axis 1), scales and zero points buffers."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scales", torch.tensor([0.5, 0.25, 0.125, 1.0]))
        self.register_buffer("zps", torch.tensor([0, 3, -2, 1]))

    def forward(self, x):
        q = torch.ops.quantized_decomposed.quantize_per_channel.default(x, self.scales, self.zps, 1, -128, 127, torch.int8)
        return torch.ops.quantized_decomposed.dequantize_per_channel.default(q, self.scales, self.zps, 1, -128, 127, torch.int8)


def test_per_channel_activation_quantization_matches_pytorch(pocl):
    x = torch.randn(1, 4, 5, 5) * 8
    x[0, :, 0, :4] = torch.tensor([0.25, 0.375, -0.0625, 2.5])  # (exact halves of a step in each channel)
    want = _PerChannel()(x).numpy()
    artifact = relax_vk.build(from_torch(_PerChannel(), (x,)), target="opencl").artifact()
    np.testing.assert_array_equal(load(artifact, device="pocl").run([x.numpy()])[0], want)


class _AffinePerToken:
    """torchao's choose_qparams_affine + quantize_affine + dequantize_affine per row of 64, as a
    module for ``mapping`` (made on demand: the ops are registered by importing torchao)."""

    @staticmethod
    def make(mapping: str):
        import torchao  # noqa: F401

        class Affine(torch.nn.Module):
            def forward(self, x):
                block = [1, 1, 64]
                scale, zp = torch.ops.torchao.choose_qparams_affine(x, mapping, block, torch.int8, -128, 127, None, None, None)
                q = torch.ops.torchao.quantize_affine(x, block, scale, zp, torch.int8, -128, 127)
                return torch.ops.torchao.dequantize_affine(q, block, scale, zp, torch.int8, -128, 127)

        return Affine()


@pytest.mark.parametrize("mapping", ["ASYMMETRIC", "SYMMETRIC"])
def test_torchao_affine_activation_quantization_matches_pytorch(mapping, pocl):
    model = _AffinePerToken.make(mapping)
    x = torch.randn(2, 8, 64, generator=torch.Generator().manual_seed(4)) * 3
    want = model(x).numpy()
    artifact = relax_vk.build(from_torch(model, (x,)), target="opencl").artifact()
    np.testing.assert_array_equal(load(artifact, device="pocl").run([x.numpy()])[0], want)
