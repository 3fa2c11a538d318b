"""Half-texel textures (ScopeOptions(precision="fp16")) on both runtimes: accuracy against the
float32 PyTorch reference, memory, converting copies, and the fallback without half images."""

import numpy as np
import pytest

import relax_vk
from relax_vk.core.options import ScopeOptions
from relax_vk.runtime import load
from relax_vk.serialization.artifact import Artifact

from ..helpers_build import BACKENDS
from ..runtime_helpers import copy_program

#: the fp16 accuracy bound: max error over the output's largest magnitude
BOUND = 1e-2


@pytest.fixture(scope="module")
def zoo():
    from relax_vk.frontends import from_torch
    from relax_vk.zoo import build_zoo_model

    made = {}

    def get(name):  # (each imported at its first use: `make test` runs one of the two)
        if name not in made:
            model, x = build_zoo_model(name)
            made[name] = (from_torch(model, (x,)), x.numpy(), model(x).detach().numpy())
        return made[name]

    return get


def test_precision_is_checked():
    assert ScopeOptions(precision="fp16").texel_dtype == "float16"
    assert ScopeOptions().texel_dtype == "float32"
    with pytest.raises(ValueError, match="precision"):
        ScopeOptions(precision="int8")


# (one model an API: ``python benchmarks/fp16_accuracy.py`` measures the zoo on both; OpenCL's
# with ``make test-full``, where tests/passes/lower/test_half_arithmetic.py checks its half kernels)
@pytest.mark.parametrize("name, api, device", [pytest.param("resnet18", *BACKENDS[1].values, id="vulkan-resnet18"),
                                               pytest.param("mobilenet_v2", *BACKENDS[0].values, id="opencl-mobilenet_v2",
                                                            marks=pytest.mark.full_only("test_half_arithmetic.py"))])  # fmt: skip
def test_classifiers_agree_with_float32_within_the_fp16_bound(zoo, name, api, device, request):
    request.getfixturevalue(device)
    mod, x, reference = zoo(name)
    half = relax_vk.build(mod, api, options=ScopeOptions(precision="fp16")).artifact()
    textures = [t for t in half.program["tensors"] if t["image"]]
    assert textures and all(t["texel"] == "float16" and t["dtype"] == "float32" for t in textures)
    session = load(half, device=device)
    out = session.run([x])[0]
    error = float(np.max(np.abs(out - reference))) / float(np.max(np.abs(reference)))
    assert error < BOUND
    assert error > 1e-7  # half texels really are half: the error is not float32's
    assert out.argmax() == reference.argmax()  # top-1 agreement
    full = load(relax_vk.build(mod, api).artifact(), device=device)
    assert session.device_bytes < 0.6 * full.device_bytes  # textures (weights included) take half


@pytest.mark.parametrize("api, device", BACKENDS)
@pytest.mark.parametrize("scopes", [("global.texture",), ("global.texture", "global.texture-nhwc")], ids=["one", "two"])
def test_copies_into_and_out_of_half_textures_convert(api, device, scopes, request):
    request.getfixturevalue(device)
    artifact = copy_program((1, 2, 3, 5, 4), *scopes, target=api)
    program = dict(artifact.program)
    for t in program["tensors"]:
        if t["image"]:
            t["texel"] = "float16"
    half = Artifact(program, artifact.source)
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 5, 4)).astype("float32")
    (y,) = load(half, device=device).run([x])
    np.testing.assert_array_equal(y, y.astype("float16").astype("float32"))  # half values ...
    np.testing.assert_allclose(y, x, rtol=2.0**-10, atol=0)  # ... within one half ulp of the input (drivers round either way)
    assert not np.array_equal(y, x)


def test_opencl_without_half_images_falls_back_to_float32_with_a_warning(pocl, monkeypatch):
    """(Residual convs in textures: the fallback does not depend on the model's size.)"""
    from relax_vk.models import build_example

    mod = build_example("residual")
    shape = [int(d) for d in mod["main"].params[0].ty.shape]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    full = load(relax_vk.build(mod, "opencl").artifact(), device="pocl")
    reference = full.run([x])[0]
    half = relax_vk.build(mod, "opencl", options=ScopeOptions(precision="fp16")).artifact()
    assert any(t["image"] and t["texel"] == "float16" for t in half.program["tensors"])
    monkeypatch.setenv("RVK_OPENCL_HALF_IMAGES", "0")  # the library then takes the device for one without them
    with pytest.warns(UserWarning, match="no half-float images"):
        session = load(half, device="pocl")
    out = session.run([x])[0]
    assert float(np.max(np.abs(out - reference))) / float(np.max(np.abs(reference))) < 1e-5  # float32 texels: float32 accuracy
    assert session.device_bytes >= full.device_bytes  # float32 texels' bytes


def test_plan_and_wgsl_store_half_texels():
    from relax_vk.models import build_example

    mod = build_example("conv-relu-pool")
    full, half = relax_vk.plan(mod), relax_vk.plan(mod, texel="float16")
    assert half.texture_bytes * 2 == full.texture_bytes and half.buffer_bytes == full.buffer_bytes
    assert {t.texel for t in half.tensors if t.image} == {"float16"}
    compiled = relax_vk.build(mod, "vulkan", options=ScopeOptions(precision="fp16"))
    assert "rgba16float" in compiled.source and "rgba32float" not in compiled.source
    assert compiled.plan().to_json()["memory"]["strategies"].keys() >= {"texture:float16"}


def _onnx_conv_model(weight, returns_input=False):
    from onnx import TensorProto, helper, numpy_helper

    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    outputs = [vi("y", TensorProto.FLOAT, [1, 4, 8, 8])]
    if returns_input:  # (the input itself, as a second output)
        nodes.append(helper.make_node("Identity", ["x"], ["x_out"]))
        outputs.append(vi("x_out", TensorProto.FLOAT, [1, 4, 8, 8]))
    graph = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [1, 4, 8, 8])], outputs, [numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("api, device", BACKENDS)
@pytest.mark.one_api("api")
def test_a_weight_past_the_half_range_keeps_float32_texels(api, device, request):
    """A weight of 2.4e5 (an output of at most ~170) stored as half texels read back as infinity:
    the output was all zeros. Such a constant keeps float32 texels; the rest stay half."""
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from relax_vk.frontends import from_onnx

    request.getfixturevalue(device)
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
    weight[0, 0, 1, 1] = 2.4e5
    model = _onnx_conv_model(weight)
    x = (rng.standard_normal((1, 4, 8, 8)) * 1e-3).astype(np.float32)
    artifact = relax_vk.build(from_onnx(model), api, options=ScopeOptions(precision="fp16")).artifact()
    texels = {t["name"]: t.get("texel") for t in artifact.program["tensors"] if t["image"]}
    assert [v for k, v in texels.items() if k.startswith("const")] == [None] and "float16" in texels.values()  # (None: its dtype's)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = load(artifact, device=device).run([x])[0]
    assert np.abs(got - want).max() <= BOUND * np.abs(want).max()


@pytest.mark.parametrize("api, device", BACKENDS)
@pytest.mark.one_api("api")
def test_an_input_returned_as_an_output_keeps_its_float32_values(api, device, request):
    """The output was the unpacking of the input's packed (half) texture: rounded to half."""
    pytest.importorskip("onnx")
    from relax_vk.frontends import from_onnx

    request.getfixturevalue(device)
    rng = np.random.default_rng(1)
    model = _onnx_conv_model(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), returns_input=True)
    x = (rng.standard_normal((1, 4, 8, 8)) * 100 + 0.0123).astype(np.float32)
    session = load(relax_vk.build(from_onnx(model), api, options=ScopeOptions(precision="fp16")).artifact(), device=device)
    np.testing.assert_array_equal(session.run([x])[1], x)


@pytest.mark.parametrize("api, device", BACKENDS)
@pytest.mark.one_api("api")
def test_half_texels_alone_keep_float32_texels_where_calibration_sees_an_overflow(api, device, request):
    """A conv whose outputs reach ~6e5 in half texels (float32 arithmetic) came back infinite, NaN
    after the next op on pocl. The calibration run that half arithmetic uses now marks its texture
    float32; with calibration off it is half, as before."""
    torch = pytest.importorskip("torch")
    from relax_vk.frontends import from_torch

    request.getfixturevalue(device)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 8, 1), torch.nn.Sigmoid()).eval()
    with torch.no_grad():
        model[0].weight.mul_(1e5)
        model[1].weight.mul_(1e-5)
    x = torch.randn(1, 3, 16, 16)
    mod = from_torch(model, (x,))
    options = ScopeOptions(precision="fp16")
    artifact = relax_vk.build(mod, api, options=options).artifact()
    float32 = [t["name"] for t in artifact.program["tensors"] if t["image"] and t["kind"] != "constant" and t.get("texel") is None]
    assert float32 and any(t.get("texel") == "float16" for t in artifact.program["tensors"])
    want = model(x).detach().numpy()
    got = load(artifact, device=device).run([x.numpy()])[0]
    assert np.isfinite(got).all() and np.abs(got - want).max() <= BOUND * np.abs(want).max()
    unchecked = relax_vk.build(mod, api, options=options, calibration=False).artifact()
    assert not [t for t in unchecked.program["tensors"] if t["image"] and t["kind"] != "constant" and t.get("texel") is None]


@pytest.mark.parametrize("api, device, arithmetic", [("opencl", "pocl", "fp32"), ("vulkan", "lavapipe", "fp32"), ("vulkan", "lavapipe", "fp16")])
def test_an_input_past_half_in_the_calibration_keeps_its_packing_float32(api, device, arithmetic, request):
    """An input of 1e5 packed into half texels came back inf on pocl and 0.67 off on lavapipe:
    calibration read the ops' outputs, not the inputs. The ops reading an input the calibration
    inputs take past float16's range, and the input's packing, keep float32 texels."""
    torch = pytest.importorskip("torch")
    from relax_vk.frontends import from_torch

    request.getfixturevalue(device)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU()).eval()
    with torch.no_grad():
        model[0].weight.mul_(1e-3)
    x = torch.randn(1, 3, 16, 16) * 1e5
    artifact = relax_vk.build(from_torch(model, (x,)), api, options=ScopeOptions(precision="fp16", arithmetic=arithmetic), calibration=[x.numpy()]).artifact()
    want = model(x).detach().numpy()
    got = load(artifact, device=device).run([x.numpy()])[0]
    assert np.isfinite(got).all() and np.abs(got - want).max() <= BOUND * np.abs(want).max()
