"""QuantizedWeightTexels: int8 conv weights held in snorm8 textures (one byte a channel, read as
byte / 127 by the texture unit), right on pocl and lavapipe; the cases that keep int8 in buffers;
the OpenCL runtime's fallback for a device without such images."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs the onnx extra")
torch = pytest.importorskip("torch", reason="the reference conv is PyTorch's")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import relax_vk  # noqa: E402
from relax_vk.storage.lifetimes import snorm8_values  # noqa: E402
from relax_vk.core.options import ScopeOptions  # noqa: E402
from relax_vk.frontends import from_onnx  # noqa: E402
from relax_vk.passes.scope.quantized_weight_texels import snorm8_weight  # noqa: E402
from relax_vk.runtime import load  # noqa: E402

CIN, COUT, SIZE = 6, 8, 9


def _weights(lowest: int = -127) -> np.ndarray:
    q = np.random.default_rng(1).integers(-127, 128, size=(COUT, CIN, 3, 3)).astype(np.int8)
    q[0, 0, 0, 0] = lowest
    return q


def _qdq_conv(q: np.ndarray):
    """``Conv(x, DequantizeLinear(q, per-channel scales))`` with a bias, as onnxruntime's QDQ form
    writes a conv's weight; the module and its float reference (dequantized weight)."""
    scales = np.linspace(0.01, 0.03, COUT).astype(np.float32)
    bias = np.linspace(-0.5, 0.5, COUT).astype(np.float32)
    nodes = [
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=0),
        helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1]),
    ]
    inits = [numpy_helper.from_array(q, "wq"), numpy_helper.from_array(scales, "ws"),
             numpy_helper.from_array(np.zeros(COUT, np.int8), "wz"), numpy_helper.from_array(bias, "b")]  # fmt: skip
    graph = helper.make_graph(nodes, "qdq_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, CIN, SIZE, SIZE])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, COUT, SIZE, SIZE])], inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(2).standard_normal((1, CIN, SIZE, SIZE)).astype(np.float32)
    w = torch.tensor(q.astype(np.float64) * scales.astype(np.float64)[:, None, None, None])
    reference = torch.nn.functional.conv2d(torch.tensor(x, dtype=torch.float64), w, torch.tensor(bias, dtype=torch.float64), padding=1)
    return from_onnx(model), x, reference.numpy()


def _conv_weights(artifact):
    """``(texel, stored dtype, scope)`` of each 5-D constant (the packed conv weights)."""
    return [(t.get("texel"), str(artifact.constants[f"t{t['id']}"].dtype), t["scope"])
            for t in artifact.program["tensors"] if t["kind"] == "constant" and len(t["shape"]) == 5 and t["shape"][2:4] == [3, 3]]  # fmt: skip


def _relative_error(out, reference) -> float:
    return float(np.abs(out - reference).max() / np.abs(reference).max())


def test_snorm8_bytes_are_exactly_the_values_k_over_127():
    k = np.arange(-127, 128, dtype=np.int8)
    values = snorm8_weight(k)
    np.testing.assert_array_equal(snorm8_values(values), k)
    assert snorm8_weight(np.array([-128, 0], np.int8)) is None  # byte / 127 cannot give -128 / 127 ... -1 is -127
    assert snorm8_values(np.array([0.5, 1.0], np.float32)) is None  # 63.5 / 127: not a byte's value
    assert snorm8_values(np.array([2.0], np.float32)) is None  # beyond a byte
    assert snorm8_values(values.astype(np.float16)) is None  # float32 constants only


@pytest.mark.parametrize("backend, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_int8_conv_weights_are_snorm8_textures_and_right(backend, device, request):
    request.getfixturevalue(device)
    q = _weights()
    mod, x, reference = _qdq_conv(q)
    compiled = relax_vk.build(mod, target=backend)
    artifact = compiled.artifact()
    assert _conv_weights(artifact) == [("snorm8", "int8", "global.texture-weight")]
    stored = next(artifact.constants[f"t{t['id']}"] for t in artifact.program["tensors"] if t.get("texel") == "snorm8")
    assert sorted(np.unique(stored)) == sorted(np.unique(np.concatenate([q.reshape(-1), [0]])))  # the model's integers (channels padded with 0)
    kinds = {str(f.attrs["relax_vk.conv2d_memory"]) for _, f in compiled.lowered.functions_items()
             if getattr(f, "attrs", None) is not None and "relax_vk.conv2d_memory" in f.attrs}  # fmt: skip
    assert kinds == {"texture"}  # a float conv's schedule and tuning records
    session = load(artifact, device=device)
    assert _relative_error(session.run([x])[0], reference) < 1e-5
    weight = next(t for t in artifact.program["tensors"] if t.get("texel") == "snorm8")
    np.testing.assert_array_equal(session.read_tensor(weight["id"]), artifact.constants[f"t{weight['id']}"].astype(np.float32) / np.float32(127))
    plan = compiled.plan()  # the plan shows the weight's texels and bytes as the device holds them
    (planned,) = [t for t in plan.tensors if t.kind == "constant" and t.texel == "snorm8"]
    assert planned.bytes == int(np.prod(planned.image)) * 4
    assert f"{planned.name}  constant" in plan.table() and "float32 (snorm8 texels)" in plan.table()
    # a quarter of the float32 weight's bytes: the image's texels are 4 bytes
    assert next(a for a in artifact.program["storage"] if a["id"] == weight["storage"])["bytes"] * 4 == int(np.prod(weight["image"])) * 16


@pytest.mark.parametrize("case", ["minus-128", "weights-in-buffers", "device-without-snorm8"])
def test_int8_weights_stay_in_buffers_where_snorm8_cannot_hold_them(case, db_dir, pocl):
    target = "opencl"
    options = ScopeOptions(weights_in_texture=False) if case == "weights-in-buffers" else None
    if case == "device-without-snorm8":
        from relax_vk.schedules.tuning import Database, clear_cache

        db_dir.mkdir(parents=True, exist_ok=True)
        Database("no-snorm-gpu", storage={"opencl": {"snorm8_images": False, "evidence": "a test"}}).save(str(db_dir / "no-snorm-gpu.json"))
        clear_cache()
        target = relax_vk.target.opencl(device_name="no-snorm-gpu")
    mod, x, reference = _qdq_conv(_weights(-128 if case == "minus-128" else -127))
    artifact = relax_vk.build(mod, target=target, options=options).artifact()
    assert _conv_weights(artifact) == [(None, "int8", "global")]
    assert _relative_error(load(artifact, device=pocl).run([x])[0], reference) < 1e-5


def _weight_parameter(artifact) -> str:
    """The name of the OpenCL kernel parameter the snorm8 weight is bound to."""
    import re

    weight = next(t["id"] for t in artifact.program["tensors"] if t.get("texel") == "snorm8")
    step = next(s for s in artifact.program["steps"] if s["op"] == "launch" and weight in s["args"])
    kernel = next(k for k in artifact.program["kernels"] if k["name"] == step["kernel"])
    params = re.search(r"__kernel void " + kernel.get("entry", kernel["name"]) + r"\(([^)]*)\)", artifact.source).group(1).split(",")
    tensors = [p.split()[-1] for p in params if "image" in p or "*" in p]
    return tensors[step["args"].index(weight)]


def test_opencl_without_snorm8_images_reads_the_bytes_as_signed_integers(pocl, monkeypatch):
    """A device without CL_SNORM_INT8 images (NVIDIA's OpenCL) holds the same bytes in
    CL_SIGNED_INT8 images, and the kernels read them with read_imagei: the same values up to float32
    rounding, one byte a channel, no warning."""
    import warnings

    mod, x, reference = _qdq_conv(_weights())
    artifact = relax_vk.build(mod, target="opencl").artifact()
    snorm = load(artifact, device=pocl)
    monkeypatch.setenv("RVK_OPENCL_SNORM_IMAGES", "0")  # the library then takes the device for one without them
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        session = load(artifact, device="pocl")
    out, expected = session.run([x])[0], snorm.run([x])[0]
    assert _relative_error(out, reference) < 1e-5 and _relative_error(out, expected) < 1e-6
    assert session.device_bytes == snorm.device_bytes  # one byte a channel, as snorm8 texels
    weight = next(t for t in artifact.program["tensors"] if t.get("texel") == "snorm8")
    np.testing.assert_array_equal(session.read_tensor(weight["id"]), snorm.read_tensor(weight["id"]))


def test_opencl_without_snorm8_or_int8_images_falls_back_to_float32_texels(pocl, monkeypatch):
    mod, x, reference = _qdq_conv(_weights())
    artifact = relax_vk.build(mod, target="opencl").artifact()
    held = load(artifact, device=pocl).device_bytes
    monkeypatch.setenv("RVK_OPENCL_SNORM_IMAGES", "0")
    monkeypatch.setenv("RVK_OPENCL_INT8_IMAGES", "0")
    with pytest.warns(UserWarning, match="no signed normalized 8-bit images .and the device has no signed 8-bit images"):
        session = load(artifact, device="pocl")
    assert _relative_error(session.run([x])[0], reference) < 1e-5
    weight = next(t for t in artifact.program["tensors"] if t.get("texel") == "snorm8")
    assert session.device_bytes == held + 3 * int(np.prod(weight["image"])) * 4  # its texels as float32


def test_a_kernel_that_uses_the_weight_otherwise_keeps_float32_texels(pocl, monkeypatch):
    """The integer reads replace READ_IMAGEF of the parameter only: a kernel that uses it in any
    other way is left as it is, and the weight takes float32 texels, with a warning naming it."""
    from relax_vk.serialization.artifact import Artifact

    mod, x, reference = _qdq_conv(_weights())
    artifact = relax_vk.build(mod, target="opencl").artifact()
    name = _weight_parameter(artifact)
    source = artifact.source.replace(f"READ_IMAGEF({name},", f"READ_IMAGEF(({name}),", 1)
    assert source != artifact.source
    monkeypatch.setenv("RVK_OPENCL_SNORM_IMAGES", "0")
    with pytest.warns(UserWarning, match=f"uses {name} otherwise than reading it through READ_IMAGEF"):
        session = load(Artifact(artifact.program, source, artifact.constants), device=pocl)
    assert _relative_error(session.run([x])[0], reference) < 1e-5


def test_snorm8_texels_of_a_tensor_kernels_write_are_refused_by_name(pocl):
    from relax_vk.serialization.artifact import Artifact

    mod, _, _ = _qdq_conv(_weights())
    artifact = relax_vk.build(mod, target="opencl").artifact()
    program = dict(artifact.program, tensors=[dict(t) for t in artifact.program["tensors"]])
    written = next(t for t in program["tensors"] if t["kind"] == "intermediate" and t["image"])
    written["texel"] = "snorm8"
    with pytest.raises(Exception, match=f"{written['name']}.*texel 'snorm8'.*snorm8 texels of a float32 constant texture"):
        load(Artifact(program, artifact.source, artifact.constants), device=pocl)


def test_the_dynamic_forms_integer_sums_keep_int8_weights(tmp_path, pocl):
    """quantize_dynamic's ConvInteger sums integers (``conv(x_q - zp, w_q)``, scale 1): exact in
    float32 with int8 weights, so they stay int8 (``W / 127`` would round every product)."""
    ort = pytest.importorskip("onnxruntime")
    from onnxruntime.quantization import quantize_dynamic

    w = np.random.default_rng(3).standard_normal((COUT, CIN, 3, 3)).astype(np.float32) * 0.1
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "conv",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, CIN, SIZE, SIZE])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, COUT, SIZE, SIZE])], [numpy_helper.from_array(w, "w")])  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "f.onnx"))
    quantize_dynamic(str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx"), op_types_to_quantize=["Conv"])
    assert "ConvInteger" in {n.op_type for n in onnx.load(str(tmp_path / "q.onnx")).graph.node}
    artifact = relax_vk.build(from_onnx(str(tmp_path / "q.onnx")), target="opencl").artifact()
    assert _conv_weights(artifact) == [(None, "int8", "global")]
    x = np.random.default_rng(4).standard_normal((1, CIN, SIZE, SIZE)).astype(np.float32)
    (want,) = ort.InferenceSession(str(tmp_path / "q.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert _relative_error(load(artifact, device=pocl).run([x])[0], want) < 1e-6
