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
