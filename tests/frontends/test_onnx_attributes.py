"""ONNX attributes TVM's converters ignore (relax_vk.frontends.onnx_attributes): each read as
onnxruntime reads it, right against onnxruntime on pocl and lavapipe, or refused by node."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import relax_vk
from relax_vk.core.errors import UnsupportedError
from relax_vk.frontends.onnx import from_onnx
from relax_vk.runtime import load

ort = pytest.importorskip("onnxruntime")
BACKENDS = [("opencl", "pocl"), ("vulkan", "lavapipe")]


def _model(node, x_shape, inits=(), x_dtype=TensorProto.FLOAT, opset=18, extra_inputs=()):
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", x_dtype, x_shape), *extra_inputs],
                              [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, [None] * len(x_shape))], list(inits))  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _assert_as_onnxruntime(model, feeds, target, device):
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = load(relax_vk.build(from_onnx(model), target).artifact(), device=device).run(list(feeds.values()))[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


X = np.random.default_rng(0).standard_normal((2, 3, 9, 11)).astype("float32")


@pytest.mark.parametrize("target, device", BACKENDS)
@pytest.mark.parametrize("mode, sizes", [("linear", [2, 3, 4, 5]), ("cubic", [2, 3, 4, 5]), ("cubic", [2, 3, 14, 20]), ("linear", [2, 3, 5, 17])])
def test_antialiased_resizes_filter_as_onnxruntime(mode, sizes, target, device):
    """Down, up and mixed: onnxruntime's stretched filter, its taps past an edge reading the edge
    (TVM's converter dropped the filter: a linear 9x11 -> 4x5 came out 1.29 off)."""
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode, antialias=1)
    model = _model(node, X.shape, [numpy_helper.from_array(np.array(sizes, "int64"), "sizes")])
    _assert_as_onnxruntime(model, {"x": X}, target, device)


@pytest.mark.parametrize("target, device", BACKENDS)
def test_conv_transpose_output_shape_sets_the_pads(target, device):
    """``output_shape`` smaller than the full output (TVM's converter gave the full one): the pads
    ONNX derives from it, split as ``auto_pad`` says."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4, 5, 6)).astype("float32")
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype("float32"), "w")
    for auto_pad in ("NOTSET", "SAME_UPPER"):
        node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 3], output_shape=[10, 16], auto_pad=auto_pad)
        _assert_as_onnxruntime(_model(node, x.shape, [w]), {"x": x}, target, device)


def test_what_is_not_read_is_refused_by_node():
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), "float32"), "w")
    larger = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up", strides=[2, 3], output_shape=[12, 17])
    with pytest.raises(UnsupportedError, match="ConvTranspose node up: output_shape \\[12, 17\\] is larger than the transposed conv's full output along axis 2"):
        from_onnx(_model(larger, (3, 4, 5, 6), [w]))
    sizes = numpy_helper.from_array(np.array([2, 3, 4, 5], "int64"), "sizes")
    policy = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="fit", mode="linear", keep_aspect_ratio_policy="not_smaller")
    with pytest.raises(UnsupportedError, match="Resize node fit: keep_aspect_ratio_policy 'not_smaller' is not supported"):
        from_onnx(_model(policy, X.shape, [sizes]))
    pool = helper.make_node("MaxPool", ["x"], ["y", "indices"], name="pool", kernel_shape=[2, 2])  # (TVM's importer: an AssertionError)
    with pytest.raises(UnsupportedError, match="MaxPool node pool: its Indices output is not supported"):
        from_onnx(_model(pool, X.shape))


@pytest.mark.parametrize("target, device", BACKENDS)
def test_resize_axes_and_pow_of_an_integer_exponent(target, device):
    scales = numpy_helper.from_array(np.array([2.0, 3.0], "float32"), "scales")
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest", axes=[3, 2])  # (scales in the axes' order)
    _assert_as_onnxruntime(_model(node, X.shape, [scales]), {"x": X}, target, device)
    exponent = numpy_helper.from_array(np.array([1, 2, 3], "int64").reshape(1, 3, 1, 1), "e")
    _assert_as_onnxruntime(_model(helper.make_node("Pow", ["x", "e"], ["y"]), X.shape, [exponent]), {"x": X}, target, device)


def _graph(nodes, inputs, outputs, inits=(), opset=18):
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)), opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


@pytest.mark.one_api("target")
@pytest.mark.parametrize("target, device", BACKENDS)
def test_outputs_and_attributes_tvm_dropped(target, device, request):
    """LayerNormalization's Mean and InvStdDev (TVM: scalar zeros, which the product read),
    IsInf's detect_negative=0 (TVM reported both infinities), Dropout's mask (TVM: float32) and a
    Cast of floats to int32 (TVM's int64 wrap, which a Vulkan shader cannot hold): as onnxruntime."""
    request.getfixturevalue(device)
    f, b = TensorProto.FLOAT, TensorProto.BOOL
    nodes = [helper.make_node("LayerNormalization", ["x", "s"], ["y", "mean", "istd"], axis=-1, name="ln"),
             helper.make_node("Mul", ["mean", "istd"], ["z"]),
             helper.make_node("IsInf", ["x"], ["inf"], detect_negative=0),
             helper.make_node("Dropout", ["x"], ["d", "mask"]),
             helper.make_node("Cast", ["x"], ["i"], to=TensorProto.INT32)]  # fmt: skip
    outputs = [helper.make_tensor_value_info(n, t, [2, 6, 1 if n == "z" else 8]) for n, t in (("y", f), ("z", f), ("inf", b), ("mask", b), ("i", TensorProto.INT32))]
    model = _graph(nodes, [helper.make_tensor_value_info("x", f, [2, 6, 8])], outputs, [numpy_helper.from_array(np.linspace(0.5, 2, 8, dtype="float32"), "s")])
    x = np.random.default_rng(1).standard_normal((2, 6, 8)).astype("float32") * 3
    x[0, 0, :3] = [np.inf, -np.inf, 2.5]
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = load(relax_vk.build(from_onnx(model), target).artifact(), device=device).run([x])
    for name, a, e in zip(("y", "z", "inf", "mask", "i"), got, want):
        assert a.shape == e.shape and a.dtype == e.dtype, name
        if name in ("y", "z"):  # (the row with infinities is NaN in both)
            np.testing.assert_allclose(a[1], e[1], rtol=1e-5, atol=1e-5, err_msg=name)
        elif name == "i":  # (an infinity's int32 is undefined: TVM gives 0, onnxruntime INT_MIN)
            np.testing.assert_array_equal(a[1], e[1], err_msg=name)
        else:
            np.testing.assert_array_equal(a, e, err_msg=name)


def test_forms_tvm_would_compute_wrong_or_fail_on_are_refused_by_node():
    f = TensorProto.FLOAT
    x4 = helper.make_tensor_value_info("x", f, [1, 2, 4, 4])
    stats = [numpy_helper.from_array(np.ones(2, "float32"), n) for n in ("sc", "bi", "m", "v")]
    cases = [
        (helper.make_node("BatchNormalization", ["x", "sc", "bi", "m", "v"], ["y"], name="bn", training_mode=1), [x4], stats,
         "BatchNormalization node bn: training_mode=1", (f, [1, 2, 4, 4])),
        (helper.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], name="roi", mode="max"), [x4],
         [numpy_helper.from_array(np.array([[0, 0, 2, 2]], "float32"), "rois"), numpy_helper.from_array(np.array([0], "int64"), "idx")],
         "RoiAlign node roi: mode='max' is not supported", (f, [1, 2, 1, 1])),
        (helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["y"], name="nms"),
         [helper.make_tensor_value_info("boxes", f, [1, 3, 4]), helper.make_tensor_value_info("scores", f, [1, 1, 3])], [],
         "NonMaxSuppression node nms: NonMaxSuppression", (TensorProto.INT64, [None, 3])),
        (helper.make_node("Pow", ["a", "a"], ["y"], name="pw"), [helper.make_tensor_value_info("a", TensorProto.INT32, [3])], [],
         "Pow node pw: Pow of int32 values is not supported", (TensorProto.INT32, [3])),
        (helper.make_node("Resize", ["x", "", "scales"], ["y"], name="rs", mode="linear", coordinate_transformation_mode="half_pixel_symmetric"), [x4],
         [numpy_helper.from_array(np.array([1, 1, 2, 2], "float32"), "scales")], "Resize node rs: coordinate_transformation_mode 'half_pixel_symmetric'",
         (f, [1, 2, 8, 8])),
    ]  # fmt: skip
    for node, inputs, inits, message, (dtype, shape) in cases:
        with pytest.raises(UnsupportedError, match=message):
            from_onnx(_graph([node], inputs, [helper.make_tensor_value_info("y", dtype, shape)], inits, opset=19))
    then = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [], [helper.make_tensor_value_info("t", f, [3])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [helper.make_tensor_value_info("e", f, [3])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0), helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other)]  # fmt: skip
    model = _graph(nodes, [helper.make_tensor_value_info("x", f, [3])], [helper.make_tensor_value_info("y", f, [3])], [numpy_helper.from_array(np.array(0, "float32"), "zero")])
    with pytest.raises(UnsupportedError, match="If node\\(s\\) branch: a branch on a condition computed at run time is not supported"):
        from_onnx(model)


def test_valid_forms_tvm_refused(pocl):
    """EyeLike in another dtype than its input's and OneHot with a one-element depth tensor (TVM:
    "dtype mismatch", and a type error), and OneHot of float values with a scalar depth (TVM's
    result was float64): as onnxruntime."""
    f = TensorProto.FLOAT
    nodes = [helper.make_node("EyeLike", ["x"], ["eye"], k=1, dtype=TensorProto.INT32),
             helper.make_node("OneHot", ["ids", "depth", "values"], ["hot"], axis=-1),
             helper.make_node("OneHot", ["ids", "depth0", "values"], ["hot0"], axis=1)]  # fmt: skip
    inits = [numpy_helper.from_array(np.array([5], "int64"), "depth"), numpy_helper.from_array(np.array([0, 3], "float32"), "values"),
             numpy_helper.from_array(np.array(6, "int64"), "depth0")]  # fmt: skip
    inputs = [helper.make_tensor_value_info("x", f, [3, 4]), helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])]
    outputs = [helper.make_tensor_value_info("eye", TensorProto.INT32, [3, 4]), helper.make_tensor_value_info("hot", f, [2, 3, 5]),
               helper.make_tensor_value_info("hot0", f, [2, 6, 3])]  # fmt: skip
    model = _graph(nodes, inputs, outputs, inits, opset=13)
    feeds = {"x": np.zeros((3, 4), "float32"), "ids": np.array([[0, 4, -1], [2, 1, 3]], "int64")}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = load(relax_vk.build(from_onnx(model), "opencl").artifact(), device="pocl").run(list(feeds.values()))
    for a, e in zip(got, want):
        assert a.dtype == e.dtype
        np.testing.assert_array_equal(a, e)
