"""EdgeDtypes: inputs and outputs of dtypes an API cannot hold run, converted at the edges."""

import numpy as np
import pytest
from helpers_build import BACKENDS

import relax_vk
from relax_vk.runtime import load

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("backend, device", BACKENDS)
@pytest.mark.parametrize("dtype", ["float16", "int8", "int64", "bool", "uint8"])
def test_inputs_of_other_dtypes_run(tmp_path, dtype, backend, device):
    from onnx import TensorProto, helper, numpy_helper

    from relax_vk.frontends import from_onnx

    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    inp = helper.make_tensor_value_info("x", elem, [1, 4, 6, 6])
    w = numpy_helper.from_array(np.random.default_rng(1).random((4, 4, 3, 3)).astype("float32"), "w")
    nodes = [helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT), helper.make_node("Conv", ["xf", "w"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "g", [inp], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])], initializer=[w])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    x = (np.random.default_rng(2).random((1, 4, 6, 6)) * 4).astype(dtype)
    session = load(relax_vk.build(from_onnx(path), target=backend).artifact(), device=device)
    np.testing.assert_allclose(session.run([x])[0], ort.InferenceSession(path).run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=rf"input x: dtype float64, expected {dtype}"):
        session.run([x.astype("float64")])


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_half_precision_torch_models_keep_their_signature(backend, device):
    torch = pytest.importorskip("torch")
    from relax_vk.frontends import from_torch

    model = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3, padding=1), torch.nn.ReLU()).eval().half()
    x = torch.randn(1, 4, 8, 8).half()
    mod = from_torch(model, (x,))
    assert str(mod["main"].params[0].ty.dtype) == "float16"
    out = load(relax_vk.build(mod, target=backend).artifact(), device=device).run([x.numpy()])[0]
    assert out.dtype == np.float16
    with torch.no_grad():
        np.testing.assert_allclose(out.astype("float32"), model(x).float().numpy(), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("backend, device", BACKENDS)
@pytest.mark.one_api("backend")
def test_bfloat16_torch_models_take_and_return_float32(backend, device, request):
    """A bfloat16 model's artifact was refused at load ("unknown dtype 'bfloat16'") and its Vulkan
    build failed in the WGSL emitter: numpy and the GPU APIs have no bfloat16. It computes in
    float32 behind a float32 signature, with a warning that says so."""
    torch = pytest.importorskip("torch")
    from relax_vk.frontends import from_torch

    request.getfixturevalue(device)
    model = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3, padding=1), torch.nn.ReLU()).eval().to(torch.bfloat16)
    x = torch.randn(1, 4, 8, 8).to(torch.bfloat16)
    with pytest.warns(UserWarning, match="bfloat16 model computes in float32"):
        mod = from_torch(model, (x,))
    out = load(relax_vk.build(mod, target=backend).artifact(), device=device).run([x.float().numpy()])[0]
    assert out.dtype == np.float32
    with torch.no_grad():
        np.testing.assert_allclose(out, model.float()(x.float()).numpy(), rtol=1e-5, atol=1e-5)


def test_a_float64_model_tvm_cannot_import_is_refused_naming_the_tensor():
    """``model.double()``: TVM's importer failed inside ("Binary operators must have the same
    datatype"); the error names the float64 tensor and says what to do."""
    torch = pytest.importorskip("torch")
    from relax_vk.core.errors import UnsupportedError
    from relax_vk.frontends import from_torch

    model = torch.nn.Sequential(torch.nn.Linear(4, 3)).double()
    with pytest.raises(UnsupportedError, match=r"parameter 0\.weight is float64.*\.float\(\)"):
        from_torch(model, (torch.randn(2, 4).double(),))


def test_flags_cast_to_int8_inside_the_model_run_on_vulkan(lavapipe):
    """PyTorch's attention decomposition reduces bool flags cast to int8; WGSL holds no int8, so
    the cast becomes int32 (0 and 1 either way) and what reads it re-infers its dtype."""
    from tvm import relax as rx

    bb = rx.BlockBuilder()
    x = rx.Var("x", rx.TensorType((4, 9), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            flags = bb.emit(rx.op.astype(rx.op.greater(x, rx.const(0.5, "float32")), "int8"))
            anyrow = bb.emit(rx.op.astype(rx.op.max(flags, axis=[1], keepdims=True), "float32"))
            anycol = bb.emit(rx.op.astype(rx.op.max(flags, axis=[0], keepdims=True), "float32"))
            out = bb.emit_output(rx.op.add(anyrow, anycol))  # two reductions read the flags: a buffer
        bb.emit_func_output(out)
    compiled = relax_vk.build(bb.get(), "vulkan")
    assert not [t for t in compiled.artifact().program["tensors"] if t["dtype"] == "int8"]
    xs = np.random.default_rng(1).random((4, 9)).astype("float32") * 0.6
    out = load(compiled.artifact(), device=lavapipe).run([xs])[0]
    flags = xs > 0.5
    np.testing.assert_array_equal(out, flags.any(1, keepdims=True).astype("float32") + flags.any(0, keepdims=True))


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_half_precision_tuple_outputs_run(backend, device):
    """A model returning a tuple with a float16 field (the PyTorch frontend binds the tuple to a
    variable): each field cast at the edge (this raised an AttributeError)."""
    torch = pytest.importorskip("torch")
    from relax_vk.frontends import from_torch

    class TwoHeads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(4, 8, 3, padding=1)

        def forward(self, x):
            y = self.conv(x)
            return y.relu(), y.sigmoid()

    model = TwoHeads().eval().half()
    x = torch.randn(1, 4, 8, 8).half()
    outs = load(relax_vk.build(from_torch(model, (x,)), target=backend).artifact(), device=device).run([x.numpy()])
    with torch.no_grad():
        refs = model(x)
    assert [o.dtype for o in outs] == [np.float16, np.float16]
    for out, ref in zip(outs, refs):
        np.testing.assert_allclose(out.astype("float32"), ref.float().numpy(), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("backend, device", BACKENDS)
@pytest.mark.parametrize("op, axis, keepdims", [("argmax", 1, False), ("argmin", -1, True), ("argmax", 0, True)])
def test_argmax_and_argmin_run_with_int64_results(op, axis, keepdims, backend, device, request):
    """A model ending in argmax (a segmentation map, a token classifier): TVM computes the indices
    in int64, even in its reduction's temporaries, which WGSL cannot hold; on Vulkan they are
    computed in int32 and the output edge hands back int64. Ties take the first index."""
    from tvm import relax as rx

    request.getfixturevalue(device)
    bb = rx.BlockBuilder()
    x = rx.Var("x", rx.TensorType((3, 7, 5), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(getattr(rx.op, op)(x, axis=axis, keepdims=keepdims))
        bb.emit_func_output(out)
    compiled = relax_vk.build(bb.get(), backend)
    assert backend == "opencl" or not [t for t in compiled.artifact().program["tensors"] if t["dtype"] == "int64"]
    xs = np.random.default_rng(2).integers(0, 4, (3, 7, 5)).astype("float32")  # many ties
    out = load(compiled.artifact(), device=device).run([xs])[0]
    expected = getattr(np, op)(xs, axis=axis)
    expected = np.expand_dims(expected, axis) if keepdims else expected
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, expected)


def _index_ops_model(path: str):
    """One ONNX graph reading int64 indices, given as inputs and as constants (negative ones
    too), through every index op: GatherND (batch_dims 0 and 1), Gather, GatherElements,
    ScatterElements and ScatterND."""
    from onnx import TensorProto, helper, numpy_helper

    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    nd = np.array([[[0, 1], [1, -1]], [[-1, 0], [0, 2]]], dtype=np.int64)  # (2, 2, 2): tuples into data[:2, :3]
    nd_b1 = np.array([[[2], [0]], [[-1], [1]]], dtype=np.int64)  # batch_dims 1: per batch, tuples into data[b, :3]
    take = np.array([[0, 2], [-1, 1]], dtype=np.int64)
    elements = np.array([[[0, 3, -1, 1]] * 3, [[3, 2, 1, 0]] * 3], dtype=np.int64)  # (2, 3, 4) along axis 2
    scatter_nd = np.array([[1, 0], [-2, 2]], dtype=np.int64)  # (2, 2): two rows of data
    inputs = [helper.make_tensor_value_info("data", f32, [2, 3, 4]), helper.make_tensor_value_info("upd", f32, [2, 4])]
    inputs += [helper.make_tensor_value_info(n, i64, list(a.shape)) for n, a in (("nd", nd), ("elements", elements), ("scatter_nd", scatter_nd))]
    consts = [numpy_helper.from_array(a, n) for n, a in (("nd_c", nd), ("nd_b1", nd_b1), ("take", take), ("elements_c", elements))]
    nodes = [
        helper.make_node("GatherND", ["data", "nd"], ["o0"]),
        helper.make_node("GatherND", ["data", "nd_c"], ["o1"]),
        helper.make_node("GatherND", ["data", "nd_b1"], ["o2"], batch_dims=1),
        helper.make_node("Gather", ["data", "take"], ["o3"], axis=1),
        helper.make_node("GatherElements", ["data", "elements"], ["o4"], axis=2),
        helper.make_node("ScatterElements", ["data", "elements_c", "data"], ["o5"], axis=2),
        helper.make_node("ScatterND", ["data", "scatter_nd", "upd"], ["o6"]),
    ]
    outputs = [helper.make_tensor_value_info(f"o{i}", f32, None) for i in range(7)]
    graph = helper.make_graph(nodes, "index_ops", inputs, outputs, initializer=consts)
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]), strict_mode=True)
    onnx.save(model, path)
    rng = np.random.default_rng(3)
    return {"data": rng.standard_normal((2, 3, 4)).astype("float32"), "upd": rng.standard_normal((2, 4)).astype("float32"),
            "nd": nd, "elements": elements, "scatter_nd": scatter_nd}  # fmt: skip


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_int64_indices_of_every_index_op_run(tmp_path, backend, device, request):
    """GatherND's importer normalises negative indices with an int64 tensor of the data's shape,
    and relax's gather_nd takes int64 indices only; on Vulkan (no int64 buffers) the index
    operands are read as int32 and int64 constants held as int32, so no int64 tensor is left in
    the program; every result matches onnxruntime on both APIs."""
    from relax_vk.frontends import from_onnx

    request.getfixturevalue(device)
    path = str(tmp_path / "index_ops.onnx")
    feeds = _index_ops_model(path)
    compiled = relax_vk.build(from_onnx(path), target=backend)
    assert backend == "opencl" or not [t["name"] for t in compiled.artifact().program["tensors"] if t["dtype"] == "int64"]
    session = load(compiled.artifact(), device=device)
    outs = session.run([feeds[k] for k in ("data", "upd", "nd", "elements", "scatter_nd")])
    for i, (out, ref) in enumerate(zip(outs, ort.InferenceSession(path).run(None, feeds))):
        np.testing.assert_array_equal(out, ref, err_msg=f"o{i}")
    if backend == "vulkan":  # the input edge refuses indices the device cannot hold, never wraps them
        with pytest.raises(ValueError, match="input nd: int64 values outside the int32 range"):
            session.run([feeds["data"], feeds["upd"], feeds["nd"] + 2**32, feeds["elements"], feeds["scatter_nd"]])


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_int64_arithmetic_results_leave_no_int64_tensor_between_kernels(tmp_path, backend, device, request):
    """An int64 result (ONNX Mod and Div of int64 tensors, mixed signs) is cast to the device dtype
    inside its dataflow block, so the cast fuses into the kernel computing it: on Vulkan no int64
    tensor is left between kernels (a kernel writing one cannot be expressed in WGSL)."""
    from onnx import TensorProto, helper, numpy_helper

    from relax_vk.frontends import from_onnx

    request.getfixturevalue(device)
    i64 = TensorProto.INT64
    nodes = [helper.make_node("Mod", ["a", "b"], ["m"]), helper.make_node("Div", ["a", "b"], ["d"]), helper.make_node("Mod", ["a", "three"], ["m3"])]
    graph = helper.make_graph(
        nodes, "int64_arith", [helper.make_tensor_value_info(n, i64, [8]) for n in ("a", "b")],
        [helper.make_tensor_value_info(n, i64, [8]) for n in ("m", "d", "m3")], [numpy_helper.from_array(np.array(3, np.int64), "three")],
    )  # fmt: skip
    path = str(tmp_path / "int64_arith.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    a = np.array([-4, 7, 5, 4, -7, 8, -(2**30), 2**30 + 3], dtype=np.int64)
    b = np.array([2, -3, 8, -2, 3, 5, 7, -9], dtype=np.int64)
    compiled = relax_vk.build(from_onnx(path), target=backend)
    assert backend == "opencl" or not [t["name"] for t in compiled.artifact().program["tensors"] if t["dtype"] == "int64"]
    outs = load(compiled.artifact(), device=device).run([a, b])
    for out, ref in zip(outs, ort.InferenceSession(path).run(None, {"a": a, "b": b})):
        assert out.dtype == np.int64
        np.testing.assert_array_equal(out, ref)


def test_an_int64_constant_output_past_int32_is_refused_on_vulkan_not_wrapped():
    """The output's cast to the API's int32 folded into a constant of wrapped values ([1, 2**40] came
    back [1, 0]); OpenCL holds it as it is."""
    from tvm import relax as rx

    from relax_vk.core.errors import UnsupportedError

    bb = rx.BlockBuilder()
    x = rx.Var("x", rx.TensorType((2,), "int64"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(rx.const(np.array([1, 2**40], np.int64), "int64"))
        bb.emit_func_output(rx.Tuple([x, y]))
    with pytest.raises(UnsupportedError, match="output 1 is an int64 constant holding values outside int32"):
        relax_vk.build(bb.get(), "vulkan")
