"""Quantized ONNX models as onnxruntime's tools write them (QDQ per tensor and per channel, int8
and uint8, symmetric and not; QOperator; dynamic; MatMulNBits), built for OpenCL and Vulkan, run
on pocl and lavapipe, against onnxruntime's CPU run of the same quantized model; the weights stay
int8 / packed 4-bit in the artifact. Each model is quantized once per module and built once per
API."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs the onnx extra")
ort = pytest.importorskip("onnxruntime", reason="the reference needs onnxruntime (test extra)")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, quantize_static  # noqa: E402

import relax_vk  # noqa: E402
from relax_vk.core.errors import UnsupportedError  # noqa: E402
from relax_vk.frontends import from_onnx  # noqa: E402
from relax_vk.frontends.onnx_quant import rewrite_quantized  # noqa: E402
from relax_vk.runtime import load  # noqa: E402
from relax_vk.serialization.artifact import Artifact  # noqa: E402
from helpers import assert_clear_error, cli_in_process  # noqa: E402

SHAPE = (1, 3, 8, 8)


def _cnn(full: bool) -> "onnx.ModelProto":
    """``full``: conv 3x3 -> relu -> max pool -> conv 1x1 -> leaky relu, + residual, concat,
    x * sigmoid(x), global average pool, MatMul + bias, Gemm: what QOperator turns into
    QLinearConv, int8 MaxPool, QLinearLeakyRelu, QLinearAdd, QLinearConcat, QLinearSigmoid,
    QLinearMul, QLinearGlobalAveragePool, QLinearMatMul and QGemm. Else conv 3x3 -> relu -> global
    average pool -> Gemm (fewer kernels to build: the forms that differ only in their scales, zero
    points and signedness). The Gemm's alpha and beta are not 1: QOperator's QGemm holds its bias
    at ``alpha * a_scale * b_scale`` (read at ``a_scale * b_scale``, the output was 5-11% of its
    range off)."""
    rng = np.random.RandomState(0)
    w = lambda name, *shape: numpy_helper.from_array((rng.randn(*shape) * 0.3).astype("float32"), name)  # noqa: E731
    inits = [w("w1", 8, 3, 3, 3), w("b1", 8), w("w2", 8, 8, 1, 1), w("b2", 8), w("m", 16, 12), w("mb", 12), w("g", 10, 12), w("gb", 10)]
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), n("Relu", ["c1"], ["r1"]),
        n("MaxPool", ["r1"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p", "w2", "b2"], ["c2"]), n("LeakyRelu", ["c2"], ["l2"], alpha=0.1),
        n("Add", ["p", "l2"], ["a"]), n("Concat", ["a", "p"], ["cat"], axis=1),
        n("Sigmoid", ["cat"], ["sg"]), n("Mul", ["cat", "sg"], ["sw"]),
        n("GlobalAveragePool", ["sw"], ["gap"]), n("Flatten", ["gap"], ["f"]),
        n("MatMul", ["f", "m"], ["mm"]), n("Add", ["mm", "mb"], ["h"]),
        n("Gemm", ["h", "g", "gb"], ["y"], transB=1, alpha=0.7, beta=0.5),  # (QGemm's bias scale carries alpha)
    ]  # fmt: skip
    if not full:
        inits[-2] = w("g", 10, 8)
        nodes = nodes[:2] + [n("GlobalAveragePool", ["r1"], ["gap"]), n("Flatten", ["gap"], ["h"]), nodes[-1]]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _block() -> "onnx.ModelProto":
    """A transformer MLP block (MatMul + bias -> ReLU -> MatMul + residual) over 8 tokens."""
    rng = np.random.RandomState(1)
    inits = [numpy_helper.from_array((rng.randn(*s) * 0.2).astype("float32"), k) for k, s in (("w1", (64, 96)), ("b1", (96,)), ("w2", (96, 64)))]
    n = helper.make_node
    nodes = [n("MatMul", ["x", "w1"], ["h"]), n("Add", ["h", "b1"], ["hb"]), n("Relu", ["hb"], ["r"]),
             n("MatMul", ["r", "w2"], ["o"]), n("Add", ["o", "x"], ["y"])]  # fmt: skip
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 64])], inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class _Reader(CalibrationDataReader):
    def __init__(self):
        rng = np.random.RandomState(2)
        self.feeds = iter([{"x": rng.randn(*SHAPE).astype("float32")} for _ in range(4)])

    def get_next(self):
        return next(self.feeds, None)


STATIC = {
    "qdq_s8_tensor": dict(quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8),
    "qdq_u8_channel": dict(quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8, weight_type=QuantType.QUInt8, per_channel=True),
    "qdq_s8_symmetric": dict(quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True,
                             extra_options={"ActivationSymmetric": True, "WeightSymmetric": True}),  # fmt: skip
    "qoperator_u8": dict(quant_format=QuantFormat.QOperator),
    "qoperator_s8_channel": dict(quant_format=QuantFormat.QOperator, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True),
}
FORMS = [*STATIC, "dynamic", "nbits_asym", "nbits_sym", "nbits_level4"]
FULL = ("qoperator_u8", "qoperator_s8_channel")  # the forms quantized from the full network


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """{form: quantized ModelProto}, each written by onnxruntime.quantization."""
    tmp = tmp_path_factory.mktemp("quantized")
    full, small = str(tmp / "cnn.onnx"), str(tmp / "small.onnx")
    onnx.save(_cnn(True), full)
    onnx.save(_cnn(False), small)
    made = {}
    for form, options in STATIC.items():
        quantize_static(full if form in FULL else small, str(tmp / f"{form}.onnx"), _Reader(), **options)
    quantize_dynamic(full, str(tmp / "dynamic.onnx"))
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    # (accuracy_level 4 lets onnxruntime's CPU kernel quantize the activations to int8 on the fly:
    # relax_vk computes in float32, 0.3% of the range away)
    for form, symmetric, level in (("nbits_asym", False, None), ("nbits_sym", True, None), ("nbits_level4", False, 4)):
        quantizer = MatMulNBitsQuantizer(_block(), bits=4, block_size=32, is_symmetric=symmetric, accuracy_level=level)
        quantizer.process()
        onnx.save(quantizer.model.model, str(tmp / f"{form}.onnx"))
    for form in FORMS:
        made[form] = onnx.load(str(tmp / f"{form}.onnx"))
    return made


def _input(model):
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    return np.random.RandomState(3).randn(*shape).astype("float32")


def _onnxruntime(model, x, optimized=True):
    options = ort.SessionOptions()
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_the_forms_are_what_onnxruntime_writes(models):
    ops = {form: {n.op_type for n in m.graph.node} for form, m in models.items()}
    assert {"QLinearConv", "QLinearMatMul", "QGemm", "QLinearAdd", "QLinearMul", "QLinearConcat", "QLinearSigmoid",
            "QLinearLeakyRelu", "QLinearGlobalAveragePool", "MaxPool"} <= ops["qoperator_u8"]  # fmt: skip
    assert {"DynamicQuantizeLinear", "ConvInteger", "MatMulInteger"} <= ops["dynamic"]
    assert "MatMulNBits" in ops["nbits_asym"] and "QuantizeLinear" in ops["qdq_u8_channel"]
    scales = {i.name: numpy_helper.to_array(i) for i in models["qdq_u8_channel"].graph.initializer}
    assert scales["w1_scale"].shape == (8,)  # per channel


@pytest.mark.parametrize("form", [f for f in FORMS if not f.startswith("nbits")])
def test_rewrite_keeps_onnxruntimes_numbers(models, form):
    """The rewritten graph (float ops, DequantizeLinear of weights only), run by onnxruntime itself,
    computes what the quantized model computes: the fake quantization rounds as QuantizeLinear does."""
    model = onnx.ModelProto()
    model.CopyFrom(models[form])
    rewrite_quantized(model)
    left = {n.op_type for n in model.graph.node} & {"QuantizeLinear", "QLinearConv", "ConvInteger", "MatMulInteger", "DynamicQuantizeLinear", "QGemm"}
    assert not left, left
    x = _input(model)
    want, got = _onnxruntime(models[form], x, optimized=False), _onnxruntime(model, x, optimized=False)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.ptp(want))


@pytest.fixture(scope="module")
def imported(models):
    return {form: from_onnx(model) for form, model in models.items()}


@pytest.mark.parametrize("backend, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_4bit_weights_stay_packed_on_the_device(models, imported, backend, device, request):
    """MatMulNBits: one kernel per matmul reads the packed blocks; no float32 tensor of a weight's
    size exists, and the session holds the packed weights plus the activations."""
    request.getfixturevalue(device)
    compiled = relax_vk.build(imported["nbits_sym"], target=backend)
    program = compiled.artifact().program
    weights = [(64, 96), (96, 64)]  # (K, N) of the block's two MatMuls
    assert sum(1 for s in program["steps"] if s["op"] == "launch") == 2  # (bias, ReLU, residual fused in)
    assert not [t for t in program["tensors"] if t["dtype"] == "float32" and int(np.prod(t["shape"])) in {k * n for k, n in weights}]
    float_bytes = sum(4 * k * n for k, n in weights)
    scales = {n * k // 32 for k, n in weights}  # (one float32 per block of 32)
    quantized = sum(t["bytes"] for t in program["tensors"] if t.get("kind") == "constant"
                    and (t["dtype"] in ("uint8", "uint32") or int(np.prod(t["shape"])) in scales))  # fmt: skip
    assert quantized <= 0.16 * float_bytes, (quantized, float_bytes)  # 4 bits + a float32 scale per 32 weights
    session = load(compiled.artifact(), device=device)
    activations = sum(t["bytes"] for t in program["tensors"] if t.get("kind") != "constant")
    assert session.device_bytes <= quantized + activations + 4096, (session.device_bytes, quantized, activations)


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.parametrize("form", FORMS)
def test_quantized_models_match_onnxruntime(models, imported, form, backend, device, request):
    request.getfixturevalue(device)
    model = models[form]
    compiled = relax_vk.build(imported[form], target=backend)
    artifact = compiled.artifact()
    x = _input(model)
    got = load(artifact, device=device).run([x])[0]
    want = _onnxruntime(model, x)
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 0.01 * np.ptp(want), f"max error {np.abs(got - want).max()} of range {np.ptp(want)}"
    if want.ndim == 2:  # the classifier: the same class
        assert (got.argmax(-1) == want.argmax(-1)).all()
    # the weights stay quantized: every quantized weight is a constant of its dtype (or int8,
    # centred) and size (a conv's packed to OIHW4o at compile time, its channels padded to
    # texels), with no float copy. What counts is the bytes the artifact stores: a conv weight in a
    # texture is a float32 tensor whose data are snorm8 bytes (``texel``), its values byte / 127
    constants = [(str(artifact.constants[f"t{t['id']}"].dtype), int(np.prod(t["shape"]))) for t in artifact.program["tensors"] if t.get("kind") == "constant"]
    for init in model.graph.initializer:
        if init.data_type in (TensorProto.INT8, TensorProto.UINT8) and len(init.dims) >= 2:
            dtype = "int8" if init.data_type == TensorProto.INT8 else "uint8"
            dims, up = list(init.dims), lambda n: -(-n // 4) * 4  # noqa: E731
            sizes = {int(np.prod(dims))} | ({up(dims[0]) * c * int(np.prod(dims[2:])) for c in (dims[1], up(dims[1]))} if len(dims) == 4 else set())
            if len(dims) == 2:  # a matmul's: packed codes read by the matmul kernel, no float copy anywhere
                assert any((d == "uint8" and n >= int(np.prod(dims))) or (d == "uint32" and 4 * n >= int(np.prod(dims))) for d, n in constants), f"{init.name} {dtype}{dims} not kept as codes"
                floats = [t for t in artifact.program["tensors"] if t["dtype"] == "float32" and sorted(t["shape"]) == sorted(dims)]
                assert not floats, f"{init.name}: a float32 copy {floats}"
                continue
            # (a uint8 weight whose q - zero point fits int8 is kept centred, as int8; MatMulNBits' packed
            # blocks are read as 32-bit words)
            kept_as = {(kept, n) for n in sizes for kept in {dtype, "int8"}} | ({("uint32", n // 4) for n in sizes} if len(dims) == 3 else set())
            assert kept_as & set(constants), f"{init.name} {dtype}{dims} not kept in the artifact"
            assert len(dims) != 4 or not any(("float32", n) in constants for n in sizes), f"{init.name}: a float32 copy in the artifact"


def _blocked_model():
    """A DequantizeLinear with block_size (blocked QDQ, opset 21)."""
    w = numpy_helper.from_array(np.ones((4, 32), "int8"), "w")
    s = numpy_helper.from_array(np.ones((4, 2), "float32"), "s")
    nodes = [helper.make_node("DequantizeLinear", ["w", "s"], ["wf"], name="blocked_dq", axis=1, block_size=16),
             helper.make_node("MatMul", ["x", "wf"], ["y"])]  # fmt: skip
    graph = helper.make_graph(nodes, "blocked", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 32])], [w, s])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_blocked_qdq_and_quantized_attention_are_refused_by_node():
    with pytest.raises(UnsupportedError, match=r"node 'blocked_dq' \(DequantizeLinear\): blocked quantization \(block_size=16\)"):
        from_onnx(_blocked_model())
    node = helper.make_node("QAttention", ["x"], ["y"], name="attn", domain="com.microsoft")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(UnsupportedError, match=r"node 'attn' \(com.microsoft::QAttention\): quantized QAttention is not supported"):
        rewrite_quantized(model)


def test_4bit_qdq_weights_take_the_8bit_path_exactly(pocl):
    """An INT4 weight and zero point under DequantizeLinear (quantize_static(weight_type=QInt4), opset
    21) are the same values as INT8 (TVM's importer failed on the packed tensor): equal to
    onnxruntime's unoptimized run on pocl. A 4-bit tensor another op reads is refused by node."""
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    q = rng.integers(-8, 8, size=(16, 12))
    nodes = [helper.make_node("DequantizeLinear", ["w_q", "w_s", "w_z"], ["w"], name="w_dq", axis=1), helper.make_node("MatMul", ["x", "w"], ["y"])]
    inits = [helper.make_tensor("w_q", TensorProto.INT4, [16, 12], q.flatten().tolist()), numpy_helper.from_array(np.full(12, 0.05, np.float32), "w_s"),
             helper.make_tensor("w_z", TensorProto.INT4, [12], rng.integers(-2, 3, size=12).tolist())]  # fmt: skip
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 12])], inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    x = rng.standard_normal((4, 16)).astype(np.float32)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = load(relax_vk.build(from_onnx(model), "opencl").artifact(), device="pocl").run([x])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    model.graph.node.insert(0, helper.make_node("Identity", ["w_q"], ["w_copy"], name="reads_int4"))
    with pytest.raises(UnsupportedError, match="node 'reads_int4' \\(Identity\\) reads the 4-bit tensor 'w_q'"):
        from_onnx(model)


def test_16bit_integers_are_refused_for_vulkan_by_model_op():
    """16-bit QDQ (QUInt16 weights) builds for OpenCL; for Vulkan, whose kernels hold no 16-bit
    integers, it is refused by the model op (the WGSL emitter refused it by a kernel's name)."""
    nodes = [helper.make_node("DequantizeLinear", ["w_q", "w_s"], ["w"], name="w_dq"), helper.make_node("MatMul", ["x", "w"], ["y"])]
    inits = [numpy_helper.from_array(np.arange(24, dtype=np.uint16).reshape(4, 6), "w_q"), numpy_helper.from_array(np.float32(0.1), "w_s")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6])], inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    relax_vk.build(from_onnx(model), "opencl")
    with pytest.raises(UnsupportedError, match="w_dq: a uint16 tensor; Vulkan kernels hold 32-bit values and 8-bit ones"):
        relax_vk.build(from_onnx(model), "vulkan")


# --------------------------------------------------------------------------- relax-vk build --quantize
# A float ONNX model quantized by onnxruntime's own tools (relax_vk.frontends.quantize), then built,
# run and compared with onnxruntime's CPU run of the very model the build wrote.


@pytest.fixture(scope="module")
def float_models(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("float")
    paths = {"cnn": str(tmp / "cnn.onnx"), "block": str(tmp / "block.onnx")}
    onnx.save(_cnn(False), paths["cnn"])
    onnx.save(_block(), paths["block"])
    return paths


def _samples(folder, shape, n=4, seed=5):
    folder.mkdir()
    rng = np.random.RandomState(seed)
    for i in range(n):
        np.save(folder / f"{i}.npy", rng.randn(*shape).astype("float32"))
    return folder


def _against_onnxruntime(quantized, artifact, device, shape):
    x = np.random.RandomState(9).randn(*shape).astype("float32")
    expected = _onnxruntime(onnx.load(str(quantized)), x)
    (out,) = load(Artifact.read(str(artifact)), device=device).run([x])
    assert np.max(np.abs(out - expected)) <= 0.01 * float(np.ptp(expected)), np.max(np.abs(out - expected))


def _ops(path):
    return {n.op_type for n in onnx.load(str(path)).graph.node}


def test_int8_with_calibration_runs_like_onnxruntime(float_models, tmp_path, pocl):
    calib = _samples(tmp_path / "calib", SHAPE)
    out = tmp_path / "cnn.rvk"
    proc = cli_in_process("build", float_models["cnn"], "--quantize", "int8", "--calibrate", calib, "--target", "opencl", "-o", out)
    assert proc.returncode == 0, proc.stderr[-2000:]
    quantized = tmp_path / "cnn.int8.onnx"  # (beside the output)
    assert {"QuantizeLinear", "DequantizeLinear", "Conv"} <= _ops(quantized)
    weights = [list(i.dims) for i in onnx.load(str(quantized)).graph.initializer if i.data_type == onnx.TensorProto.INT8 and len(i.dims) == 4]
    assert weights == [[8, 3, 3, 3]]  # the conv's weight, int8
    _against_onnxruntime(quantized, out, "pocl", SHAPE)


def test_int4_weights_only_on_vulkan(float_models, tmp_path, lavapipe):
    out, quantized = tmp_path / "block.rvk", tmp_path / "q" / "block4.onnx"
    proc = cli_in_process("build", float_models["block"], "--quantize", "int4", "--quantized-model", quantized, "--target", "vulkan", "-o", out)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "MatMulNBits" in _ops(quantized) and "MatMul" not in _ops(quantized)
    _against_onnxruntime(quantized, out, "lavapipe", (1, 8, 64))


def test_4bit_products_whose_output_shape_feeds_a_split(tmp_path, lavapipe):
    """``linear(x).chunk(3, -1)`` as torch.onnx writes it: ``Shape -> Gather -> Div -> Slice`` of the
    product's output. ONNX's shape inference knows no ``MatMulNBits``, so the chain was left
    unfolded and the build failed ("relax.tensor_to_shape has no runtime step")."""
    torch = pytest.importorskip("torch")
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    class Chunks(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(32, 96)

        def forward(self, x):
            q, k, v = self.linear(x).chunk(3, -1)
            return q * k + v

    torch.manual_seed(0)
    path = str(tmp_path / "chunks.onnx")
    torch.onnx.export(Chunks(), (torch.randn(1, 8, 32),), path, input_names=["x"], dynamo=False)
    quantizer = MatMulNBitsQuantizer(onnx.load(path), bits=4, block_size=32, is_symmetric=True)
    quantizer.process()
    assert {"MatMulNBits", "Shape", "Slice"} <= {n.op_type for n in quantizer.model.model.graph.node}
    onnx.save(quantizer.model.model, path)
    x = np.random.RandomState(0).randn(1, 8, 32).astype("float32")
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = load(relax_vk.build(from_onnx(path, {"x": (1, 8, 32)}), "vulkan").artifact(), device="lavapipe").run([x])[0]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.ptp(want))


def test_calibration_that_does_not_fit_is_a_clear_error(float_models, tmp_path):
    out = tmp_path / "m.rvk"
    assert_clear_error(cli_in_process("build", float_models["cnn"], "--quantize", "int8", "-o", out), "--calibrate")
    wrong = _samples(tmp_path / "wrong", (1, 3, 8, 9), n=1)
    assert_clear_error(cli_in_process("build", float_models["cnn"], "--quantize", "int8", "--calibrate", wrong, "-o", out), "0.npy", "'x'", "1x3x8x9", "1x3x8x8")
    named = tmp_path / "named"
    named.mkdir()
    np.savez(named / "a.npz", y=np.zeros(SHAPE, "float32"))
    assert_clear_error(cli_in_process("build", float_models["cnn"], "--quantize", "int8", "--calibrate", named, "-o", out), "a.npz", "missing x", "not inputs: y")
    assert_clear_error(cli_in_process("build", float_models["cnn"], "--quantize", "int4", "--calibrate", wrong, "-o", out), "no calibration")
    assert_clear_error(cli_in_process("build", "conv20", "--quantize", "int8-dynamic", "-o", out), "ONNX models")
    assert not list(tmp_path.glob("*.onnx")) and not out.exists()  # nothing half-written


def _padded_convs(tmp_path, with_value: bool) -> str:
    """Conv -> Pad (constant mode, a pad value or none) -> Conv, in float, saved to ``tmp_path``."""
    r = np.random.RandomState(0)
    pad_inputs = ["c1", "pads"] + (["pv"] if with_value else [])
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]), helper.make_node("Pad", pad_inputs, ["pd"], mode="constant", name="pad"),
             helper.make_node("Conv", ["pd", "w2"], ["y"])]  # fmt: skip
    inits = [numpy_helper.from_array((r.randn(4, 3, 3, 3) * 0.3).astype("float32"), "w1"), numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads"),
             numpy_helper.from_array((r.randn(4, 4, 3, 3) * 0.3).astype("float32"), "w2")] + ([numpy_helper.from_array(np.float32(0.25), "pv")] if with_value else [])  # fmt: skip
    graph = helper.make_graph(nodes, "padded", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], inits)  # fmt: skip
    path = str(tmp_path / f"padded_{with_value}.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("form, with_value", [(QuantFormat.QDQ, True), (QuantFormat.QOperator, True), (QuantFormat.QOperator, False)])
def test_a_quantized_pad_value_is_a_constant(tmp_path, form, with_value, pocl):
    """A constant-mode Pad's value reaches TVM's converter as ``DequantizeLinear`` of a quantized
    scalar (QDQ: the model's; QOperator: the rewrite's, the zero point where the Pad has none),
    which TVM read as a constant and failed on ("'Call' object has no attribute 'value'"); it is
    now the float constant it computes: right against onnxruntime's unoptimized run."""

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.samples = iter([{"x": np.random.RandomState(i).randn(1, 3, 8, 8).astype("float32")} for i in range(2)])

        def get_next(self):
            return next(self.samples, None)

    quantized = str(tmp_path / "q.onnx")
    quantize_static(_padded_convs(tmp_path, with_value), quantized, Reader(), quant_format=form, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    model = onnx.load(quantized)
    x = _input(model)
    want = _onnxruntime(model, x, optimized=False)
    got = load(relax_vk.build(from_onnx(model), "opencl").artifact(), device="pocl").run([x])[0]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.ptp(want))


def _nbits_with_g_idx(g_idx: np.ndarray, K: int = 32, N: int = 16, block: int = 16):
    r = np.random.RandomState(0)
    inits = [numpy_helper.from_array(r.randint(0, 256, size=(N, K // block, block // 2)).astype(np.uint8), "B"),
             numpy_helper.from_array((r.rand(N * K // block) * 0.05).astype(np.float32), "S"), numpy_helper.from_array(g_idx.astype(np.int32), "g")]  # fmt: skip
    node = helper.make_node("MatMulNBits", ["x", "B", "S", "", "g"], ["y"], domain="com.microsoft", name="nbits", K=K, N=N, bits=4, block_size=block)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, K])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, N])], inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])


def test_matmul_nbits_g_idx_in_order_runs_and_reordered_is_refused_by_node(pocl):
    """A ``g_idx`` of the blocks in order (``k // block_size``) is what no ``g_idx`` means: right
    against onnxruntime. A reordered one (act-order) is refused, naming the node (converter
    refusals did not say which node)."""
    model = _nbits_with_g_idx(np.arange(32) // 16)
    x = np.random.RandomState(1).randn(2, 32).astype(np.float32)
    want = _onnxruntime(model, x)
    np.testing.assert_allclose(load(relax_vk.build(from_onnx(model), "opencl").artifact(), device="pocl").run([x])[0], want, rtol=1e-5, atol=1e-5)
    with pytest.raises(UnsupportedError, match=r"MatMulNBits node nbits: MatMulNBits with g_idx \(act-order"):
        from_onnx(_nbits_with_g_idx(np.arange(32)[::-1] // 16))
