"""ONNX op cases of the structural crash classes (per-channel PReLU, normalisation over leading
axes, constant outputs, zero-extent slices, a channel shuffle before a grouped conv), end to end on
pocl and lavapipe against onnxruntime. Each test packs several cases of its class into one model
(one build per backend)."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs the onnx extra")
ort = pytest.importorskip("onnxruntime", reason="the reference needs onnxruntime (test extra)")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import relax_vk  # noqa: E402

from relax_vk.core.errors import UnsupportedError  # noqa: E402
from relax_vk.frontends import from_onnx  # noqa: E402
from relax_vk.runtime import load  # noqa: E402

from helpers_build import BACKENDS, build_for  # noqa: E402

F = TensorProto.FLOAT
RNG = np.random.RandomState(0)


def _value(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def _model(nodes, inputs, outputs, inits=(), opset=18):
    """A model; ``inputs``/``outputs``: ``{name: shape}`` (float32, or ``(dtype, shape)`` for an
    output; an output shape of None is left to ONNX's shape inference)."""
    def out(name, shape):  # ``shape``, or ``("int64", shape)``
        if shape is not None and shape and isinstance(shape[0], str):
            return _value(name, list(shape[1]), helper.np_dtype_to_tensor_dtype(np.dtype(shape[0])))
        return _value(name, None if shape is None else list(shape))

    graph = helper.make_graph(nodes, "g", [_value(n, list(s)) for n, s in inputs.items()],
                              [out(n, s) for n, s in outputs.items()], initializer=list(inits))  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    inferred = onnx.shape_inference.infer_shapes(model).graph
    known = {v.name: v.type for v in list(inferred.value_info) + list(inferred.output) if v.type.tensor_type.HasField("shape")}
    for out in model.graph.output:
        if not out.type.tensor_type.HasField("shape"):
            out.type.CopyFrom(known[out.name])
    return model


def _array(name, values, dtype="float32"):
    return numpy_helper.from_array(np.asarray(values, dtype), name)


def _onnxruntime(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _run(model, feeds, backend, device, kernels=True):
    mod = from_onnx(model)
    compiled = build_for(mod, backend) if kernels else relax_vk.build(mod, target=backend)
    return load(compiled.artifact(), device=device).run(list(feeds.values()))


def _assert_outputs(got, expected, tol=1e-5):
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g.shape == e.shape, f"output {i}: shape {g.shape}, expected {e.shape}"
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol, err_msg=f"output {i}")


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_prelu_slopes_per_channel_scalar_and_broadcast(backend, device):
    """PRelu slopes of every broadcast: per channel of NCHW / NCL inputs, one scalar, along the last
    axis, along the last two axes, and one per element of a matrix."""
    x4, x3, x2 = RNG.randn(2, 3, 4, 5), RNG.randn(2, 3, 4), RNG.randn(3, 4)
    slopes = {"c4": RNG.rand(3, 1, 1), "one": [0.25], "w": RNG.rand(5), "hw": RNG.rand(4, 5), "c3": RNG.rand(3, 1), "m": RNG.rand(3, 4)}
    uses = [("x4", "c4"), ("x4", "one"), ("x4", "w"), ("x4", "hw"), ("x3", "c3"), ("x2", "m"), ("x3", "one")]
    nodes = [helper.make_node("PRelu", [x, s], [f"y{i}"]) for i, (x, s) in enumerate(uses)]
    model = _model(nodes, {"x4": x4.shape, "x3": x3.shape, "x2": x2.shape}, {f"y{i}": None for i in range(len(uses))},
                   [_array(k, v) for k, v in slopes.items()])  # fmt: skip
    feeds = {"x4": x4.astype("float32"), "x3": x3.astype("float32"), "x2": x2.astype("float32")}
    _assert_outputs(_run(model, feeds, backend, device), _onnxruntime(model, feeds))


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_legacy_per_channel_prelu_and_axis_broadcast(backend, device):
    """Opset 6 (PyTorch's ``nn.PReLU(C)`` exports, ONNX's pytorch-converted test_PReLU_*d_multiparam):
    a 1-D slope is one value per channel (axis 1) of 1-D, 2-D and 3-D maps; ``Add`` with
    ``broadcast=1`` aligns its second input at ``axis``. onnxruntime runs no opset 6 PRelu: the
    reference is the same graph at opset 13 with the slopes shaped ``(C, 1, ...)``."""
    shapes = [(2, 3, 4), (2, 3, 4, 5), (2, 3, 4, 5, 6)]
    slope = RNG.rand(3)
    xs = {f"x{i}": RNG.randn(*s).astype("float32") for i, s in enumerate(shapes)}
    nodes = [helper.make_node("PRelu", [n, "slope"], [f"y{i}"]) for i, n in enumerate(xs)]
    bias = RNG.randn(3, 4)
    nodes.append(helper.make_node("Add", ["x1", "bias"], ["y3"], broadcast=1, axis=1))
    legacy = _model(nodes, {n: a.shape for n, a in xs.items()}, {f"y{i}": None for i in range(4)}, [_array("slope", slope), _array("bias", bias)], opset=6)
    got = _run(legacy, xs, backend, device)
    modern = [helper.make_node("PRelu", [n, f"slope{i}"], [f"y{i}"]) for i, n in enumerate(xs)]
    reference = _model(modern, {n: a.shape for n, a in xs.items()}, {f"y{i}": None for i in range(3)},
                       [_array(f"slope{i}", slope.reshape((3,) + (1,) * (len(s) - 2))) for i, s in enumerate(shapes)], opset=13)  # fmt: skip
    expected = _onnxruntime(reference, xs) + [xs["x1"] + bias.reshape(3, 4, 1).astype("float32")]
    _assert_outputs(got, expected)


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_normalisations_over_leading_axes(backend, device):
    """RMSNormalization (opset 23) over axis 0 of 2-D, 3-D and 4-D inputs, over axis -3 (all of a
    3-D input) and axis 1; LayerNormalization over axis 0 and 1; a mean over every axis to a 0-d
    tensor."""
    x2, x3, x4 = RNG.randn(3, 4), RNG.randn(2, 3, 4), RNG.randn(2, 3, 4, 5)
    feeds = {"x2": x2.astype("float32"), "x3": x3.astype("float32"), "x4": x4.astype("float32")}
    cases = [("RMSNormalization", "x2", 0), ("RMSNormalization", "x3", 0), ("RMSNormalization", "x4", 0), ("RMSNormalization", "x3", -3),
             ("RMSNormalization", "x4", 1), ("LayerNormalization", "x4", 0), ("LayerNormalization", "x4", 1)]  # fmt: skip
    nodes, inits = [], []
    for i, (op, x, axis) in enumerate(cases):
        normalized = feeds[x].shape[axis:]
        inits.append(_array(f"s{i}", RNG.rand(*normalized) + 0.5))
        extra = [f"s{i}"]
        if op == "LayerNormalization":
            inits.append(_array(f"b{i}", RNG.randn(*normalized)))
            extra.append(f"b{i}")
        nodes.append(helper.make_node(op, [x] + extra, [f"y{i}"], axis=axis))
    nodes.append(helper.make_node("ReduceMean", ["x3"], ["mean"], keepdims=0))
    outputs = {f"y{i}": None for i in range(len(cases))}
    outputs["mean"] = None
    model = _model(nodes, {k: v.shape for k, v in feeds.items()}, outputs, inits, opset=23)
    _assert_outputs(_run(model, feeds, backend, device), _onnxruntime(model, feeds))


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_constant_outputs(backend, device):
    """Graph outputs that are a Constant node, an initializer, the input itself, or the Shape of a
    static tensor (an int64 tensor; TVM's importer leaves a shape value), beside a computed one;
    and a model of constants alone (no inputs)."""
    x = RNG.randn(2, 3).astype("float32")
    const = numpy_helper.from_array(RNG.randn(2, 3).astype("float32"), "c")
    nodes = [helper.make_node("Constant", [], ["k"], value=const), helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Shape", ["x"], ["s"])]
    model = _model(nodes, {"x": x.shape}, {"k": (2, 3), "r": (2, 3), "w": (4,), "x": (2, 3), "s": ("int64", (2,))}, [_array("w", RNG.randn(4))])
    _assert_outputs(_run(model, {"x": x}, backend, device), _onnxruntime(model, {"x": x}))
    alone = _model([helper.make_node("Constant", [], ["k"], value=const)], {}, {"k": (2, 3)})
    _assert_outputs(_run(alone, {}, backend, device, kernels=False), _onnxruntime(alone, {}))


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_zero_extent_slices(backend, device):
    """Slices that leave nothing (starts == ends, a start past the end, a negative step the
    wrong way) give empty outputs of the right shape, also after an elementwise op; an empty slice
    concatenated with the input is the input; a Split with an empty part; a MatMul over an empty
    inner dimension is zeros."""
    x, x4 = RNG.randn(4, 6).astype("float32"), RNG.randn(1, 8, 4, 4).astype("float32")
    inits = [_array(n, v, "int64") for n, v in [("two", [2]), ("five", [5]), ("zero", [0]), ("three", [3]), ("one", [1]), ("neg", [-1])]]
    nodes = [
        helper.make_node("Slice", ["x", "two", "two", "one"], ["y0"]),
        helper.make_node("Slice", ["x", "five", "zero", "one", "one"], ["y1"]),
        helper.make_node("Slice", ["x", "zero", "three", "one", "neg"], ["y2"]),
        helper.make_node("Relu", ["y0"], ["y3"]),
        helper.make_node("Concat", ["y0", "x", "y1"], ["y4"], axis=1),
        helper.make_node("Slice", ["x4", "three", "three", "one"], ["y5"]),
        helper.make_node("Concat", ["x4", "y5"], ["y6"], axis=1),
        helper.make_node("Split", ["x", "cuts"], ["y7", "y8", "y9"], axis=1),  # an empty middle part
        helper.make_node("Transpose", ["y0"], ["t"], perm=[1, 0]),
        helper.make_node("MatMul", ["y0", "t"], ["y10"]),  # an empty inner dimension: zeros
    ]
    inits.append(_array("cuts", [2, 0, 4], "int64"))
    model = _model(nodes, {"x": x.shape, "x4": x4.shape}, {f"y{i}": None for i in range(11)}, inits, opset=13)
    feeds = {"x": x, "x4": x4}
    got = _run(model, feeds, backend, device)
    expected = _onnxruntime(model, feeds)
    assert [e.shape for e in expected] == [(4, 0), (4, 0), (4, 0), (4, 0), (4, 6), (1, 0, 4, 4), (1, 8, 4, 4), (4, 2), (4, 0), (4, 4), (4, 4)]
    _assert_outputs(got, expected)


def _shuffle_net():
    torch = pytest.importorskip("torch", reason="needs the torch extra")

    class ShuffleBlock(torch.nn.Module):
        """ShuffleNet's unit: a conv, the channel shuffle (reshape to (N, g, C/g, H, W), swap,
        flatten back), then a grouped 1x1 conv whose groups hold 3 texels (12 channels) each."""

        def __init__(self, channels=24, groups=2):
            super().__init__()
            self.groups = groups
            self.stem = torch.nn.Conv2d(3, channels, 3, padding=1)
            self.mix = torch.nn.Conv2d(channels, channels, 1, groups=groups)

        def forward(self, x):
            y = torch.relu(self.stem(x))
            n, c, h, w = y.shape
            y = y.reshape(n, self.groups, c // self.groups, h, w).transpose(1, 2).reshape(n, c, h, w)
            return self.mix(y)

    torch.manual_seed(0)
    return torch, ShuffleBlock().eval(), torch.randn(1, 3, 8, 8)


@pytest.mark.parametrize("frontend", ["onnx", "torch"])
@pytest.mark.parametrize("backend, device", BACKENDS)
def test_channel_shuffle_before_a_grouped_conv(frontend, backend, device, tmp_path):
    """The grouped conv's output-channel tile straddled two groups: its input rows are bounded only
    per thread, and the conv schedule asked to unroll that loop ("Cannot unroll non-constant
    loop")."""
    torch, net, x = _shuffle_net()
    if frontend == "onnx":
        path = str(tmp_path / "shuffle.onnx")
        torch.onnx.export(net, (x,), path, dynamo=False, opset_version=13)
        mod = from_onnx(path)
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        expected = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    else:
        from relax_vk.frontends import from_torch

        mod = from_torch(net, (x,))
        with torch.no_grad():
            expected = [net(x).numpy()]
    got = load(build_for(mod, backend).artifact(), device=device).run([x.numpy()])
    _assert_outputs(got, expected, tol=1e-4)


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_cumulative_sums(backend, device):
    """CumSum (TVM imports it, but no legalizer lowers it: "CodeGenVM cannot emit this Relax
    operator") over a leading and a trailing axis, exclusive and reversed."""
    x = RNG.randn(2, 3, 4).astype("float32")
    cases = [(0, 0, 0), (1, 1, 0), (2, 0, 1), (-1, 1, 1)]
    nodes = [helper.make_node("CumSum", ["x", f"a{i}"], [f"y{i}"], exclusive=ex, reverse=rev) for i, (_, ex, rev) in enumerate(cases)]
    inits = [_array(f"a{i}", axis, "int64") for i, (axis, _, _) in enumerate(cases)]
    model = _model(nodes, {"x": x.shape}, {f"y{i}": None for i in range(len(cases))}, inits, opset=14)
    _assert_outputs(_run(model, {"x": x}, backend, device), _onnxruntime(model, {"x": x}))


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_top_k(backend, device):
    """TopK (no legalizer lowers it either), largest and smallest, over both axes, with ties:
    values and int64 indices."""
    x = np.array([[3.0, 1.0, 2.0, 1.0, 5.0], [2.0, 2.0, -1.0, 0.5, 4.0], [0.0, 7.0, 7.0, -3.0, 1.0]], "float32")
    cases = [(1, 2, 1), (1, 3, 0), (0, 2, 1)]
    nodes = [helper.make_node("TopK", ["x", f"k{i}"], [f"v{i}", f"i{i}"], axis=axis, largest=largest) for i, (axis, _, largest) in enumerate(cases)]
    inits = [_array(f"k{i}", [k], "int64") for i, (_, k, _) in enumerate(cases)]
    outputs = {}
    for i, (axis, k, _) in enumerate(cases):
        shape = tuple(k if d == axis else n for d, n in enumerate(x.shape))
        outputs[f"v{i}"], outputs[f"i{i}"] = shape, ("int64", shape)
    model = _model(nodes, {"x": x.shape}, outputs, inits, opset=13)
    _assert_outputs(_run(model, {"x": x}, backend, device), _onnxruntime(model, {"x": x}))


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_scatters_and_gather_elements(backend, device):
    """ScatterElements (TOPI's kernel has no block a GPU rule can bind: "no schedule fits it")
    without and with reductions, negative indices, updates smaller than the data; ScatterND (its
    TOPI kernel failed export); GatherElements beside them, all with constant int64 indices (int32
    on the device)."""
    x = RNG.randn(2, 3, 4).astype("float32")
    inits = [_array("i", [[[0, 1, -1, 0]], [[2, 1, 0, 1]]], "int64"), _array("u", RNG.randn(2, 1, 4)),
             _array("j", [[[1, 0], [0, 1]]], "int64"), _array("v", RNG.randn(1, 2, 2))]  # fmt: skip
    nodes = [helper.make_node("ScatterElements", ["x", "i", "u"], ["y0"], axis=1),
             helper.make_node("ScatterElements", ["x", "i", "u"], ["y1"], axis=1, reduction="add"),
             helper.make_node("ScatterElements", ["x", "i", "u"], ["y2"], axis=-2, reduction="max"),
             helper.make_node("ScatterElements", ["x", "j", "v"], ["y3"], axis=0, reduction="mul"),
             helper.make_node("GatherElements", ["x", "i"], ["y4"], axis=1),
             helper.make_node("ScatterND", ["x", "nd", "w"], ["y5"]),
             helper.make_node("ScatterND", ["x", "nd", "w"], ["y6"], reduction="add")]  # fmt: skip
    inits += [_array("nd", [[[0, 1]], [[-1, 2]]], "int64"), _array("w", RNG.randn(2, 1, 4))]
    model = _model(nodes, {"x": x.shape}, {f"y{i}": None for i in range(7)}, inits, opset=18)
    _assert_outputs(_run(model, {"x": x}, backend, device), _onnxruntime(model, {"x": x}))


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", BACKENDS)
def test_variadic_sums_and_extrema_fold_pairwise(backend, device):
    """Sum of three maps and a broadcast bias (a residual as the ONNX model zoo's ResNet-50 writes
    it), Mean, Max and Min (relax_vk.frontends.onnx_variadic): right against onnxruntime, and no
    stacked tensor, so the conv maps around them stay packed textures."""
    x = RNG.randn(1, 8, 6, 6).astype("float32")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Sum", ["c", "r", "x", "b"], ["s"]),
             helper.make_node("Mean", ["s", "x"], ["m"]),
             helper.make_node("Max", ["s", "m", "b"], ["hi"]),
             helper.make_node("Min", ["hi", "r"], ["lo"]),
             helper.make_node("Sum", ["lo"], ["one"]),  # (one input: itself)
             helper.make_node("Conv", ["one", "w"], ["y"], pads=[1, 1, 1, 1])]  # fmt: skip
    inits = [_array("w", RNG.randn(8, 8, 3, 3) * 0.2), _array("b", RNG.randn(1, 8, 1, 1))]
    model = _model(nodes, {"x": x.shape}, {"m": None, "y": None}, inits, opset=9)
    compiled = relax_vk.build(from_onnx(model), target=backend)
    assert not [k["name"] for k in compiled.artifact().program["kernels"] if "stack" in k["name"]]
    assert compiled.plan().activation_texture_share > 0.7  # (0.78; stacked, the plan of this module: 0.14)
    _assert_outputs(load(compiled.artifact(), device=device).run([x]), _onnxruntime(model, {"x": x}))


def _lrn_reference(x, size, alpha, beta, bias):
    """ONNX's LRN, window ``c - floor((size-1)/2) .. c + ceil((size-1)/2)`` (onnxruntime refuses an
    even size)."""
    sq, out, C = x.astype(np.float64) ** 2, np.empty_like(x), x.shape[1]
    for c in range(C):
        s = sq[:, max(0, c - (size - 1) // 2) : min(C, c + size // 2 + 1)].sum(1)
        out[:, c] = x[:, c] / (bias + alpha / size * s) ** beta
    return out


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", BACKENDS)
def test_local_response_norms_of_any_size_stay_in_textures(backend, device):
    """LRN (relax_vk.frontends.onnx_lrn) after a conv, over 6 channels (a texel cut): an odd size
    against onnxruntime, an even one (TVM's converter failed on it, onnxruntime refuses it) against
    the operator's definition; no 5-D view, the maps in textures."""
    x = RNG.randn(1, 4, 5, 7).astype("float32")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("LRN", ["c"], ["odd"], size=5, alpha=0.3, beta=0.75, bias=2.0),
             helper.make_node("LRN", ["odd"], ["even"], size=4, alpha=0.5, beta=0.6, bias=1.5)]  # fmt: skip
    model = _model(nodes, {"x": x.shape}, {"odd": None, "even": None}, [_array("w", RNG.randn(6, 4, 3, 3) * 0.5)], opset=13)
    compiled = relax_vk.build(from_onnx(model), target=backend)
    assert all(len(t["shape"]) != 5 or t["image"] for t in compiled.artifact().program["tensors"])
    assert compiled.plan().activation_texture_share > 0.5  # (the two outputs are buffers: the model's ABI)
    odd, even = load(compiled.artifact(), device=device).run([x])
    (want_odd,) = _onnxruntime(helper.make_model(helper.make_graph(nodes[:2], "g", model.graph.input, [model.graph.output[0]], model.graph.initializer),
                                                 opset_imports=model.opset_import), {"x": x})  # fmt: skip
    np.testing.assert_allclose(odd, want_odd, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(even, _lrn_reference(odd, 4, 0.5, 0.6, 1.5), rtol=1e-5, atol=1e-5)


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", BACKENDS)
def test_upsample_of_older_opsets(backend, device):
    """Upsample (opsets 7 to 9: YOLOv3-era models), which TVM's importer fails on: nearest and
    linear by scales as an input (opset 9) and as an attribute (opset 7), against onnxruntime; a
    scale that gives a fractional size refused by name."""
    x = RNG.randn(1, 4, 5, 7).astype("float32")
    nodes = [helper.make_node("Upsample", ["x", "s2"], ["near"], mode="nearest"),
             helper.make_node("Upsample", ["x", "s23"], ["lin"], mode="linear")]  # fmt: skip
    model = _model(nodes, {"x": x.shape}, {"near": (1, 4, 10, 14), "lin": (1, 4, 10, 21)}, [_array("s2", [1, 1, 2, 2]), _array("s23", [1, 1, 2, 3])], opset=9)
    _assert_outputs(_run(model, {"x": x}, backend, device), _onnxruntime(model, {"x": x}))
    seven = _model([helper.make_node("Upsample", ["x"], ["y"], mode="nearest", scales=[1.0, 1.0, 3.0, 2.0])], {"x": x.shape}, {"y": (1, 4, 15, 14)}, opset=7)
    _assert_outputs(_run(seven, {"x": x}, backend, device), _onnxruntime(seven, {"x": x}))
    half = _model([helper.make_node("Upsample", ["x", "s"], ["y"], mode="nearest")], {"x": x.shape}, {"y": (1, 4, 7, 14)}, [_array("s", [1, 1, 1.5, 2])], opset=9)
    with pytest.raises(UnsupportedError, match=r"Upsample.*scale 1.5 of axis 2 \(5\) gives 7.5 rows"):
        from_onnx(half)


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", BACKENDS)
def test_lp_normalization_and_celu(backend, device):
    """LpNormalization (p 1 and 2; a zero vector gives 0, as onnxruntime's) and Celu, which TVM's
    importer has no converter for (relax_vk.frontends.onnx_compositions), against onnxruntime."""
    x = RNG.randn(1, 8, 5, 6).astype("float32")
    x[0, :, 2, 3] = 0.0
    nodes = [helper.make_node("LpNormalization", ["x"], ["l2"], axis=1, p=2),
             helper.make_node("LpNormalization", ["x"], ["l1"], axis=-1, p=1),
             helper.make_node("Celu", ["x"], ["celu"], alpha=0.7)]  # fmt: skip
    model = _model(nodes, {"x": x.shape}, {"l2": x.shape, "l1": x.shape, "celu": x.shape}, opset=13)
    _assert_outputs(_run(model, {"x": x}, backend, device), _onnxruntime(model, {"x": x}))


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_index_and_shape_ops_at_run_time_sizes(backend, device):
    """Ops whose import reads a shape, over a map of run-time height and width, in one model:
    a Gather at constant channels (its negative-index wrap read the channel count as an int64
    kernel, which no WGSL shader binds), an Expand to a constant shape (TVM's converter read the
    run-time dims as numbers), a TopK over the flattened map (the axis of run-time length), and
    a ReduceProd of the map's own size on OpenCL (a whole reduction to one value: its loop
    enclosed the thread bindings of the safe schedule; on Vulkan its int64 result between kernels
    is refused by name, WGSL having no 64-bit buffers)."""
    C = 4
    nodes = [
        helper.make_node("Gather", ["x", "idx"], ["g"], axis=1),
        helper.make_node("Slice", ["x", "zero", "one", "one"], ["first"]),
        helper.make_node("Expand", ["first", "shape"], ["e"]),
        helper.make_node("Add", ["e", "x"], ["expanded"]),
        helper.make_node("Flatten", ["x"], ["flat"], axis=1),
        helper.make_node("TopK", ["flat", "k"], ["top", "top_i"], axis=1),
    ]
    if backend == "opencl":
        nodes += [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "hw"], ["sizes"], axis=0),
                  helper.make_node("ReduceProd", ["sizes"], ["count"], keepdims=0), helper.make_node("Cast", ["count"], ["count_f"], to=F),
                  helper.make_node("Mul", ["x", "count_f"], ["scaled"])]  # fmt: skip
    inits = [_array("idx", [3, 1, -4], "int64"), _array("zero", [0], "int64"), _array("one", [1], "int64"),
             _array("shape", [1, C, 1, 1], "int64"), _array("k", [3], "int64"), _array("hw", [2, 3], "int64")]  # fmt: skip
    outputs = {"g": (1, 3, "H", "W"), "expanded": (1, C, "H", "W"), "top": (1, 3), **({"scaled": (1, C, "H", "W")} if backend == "opencl" else {})}
    graph = helper.make_graph(nodes, "g", [_value("x", [1, C, "H", "W"])], [_value(n, list(s)) for n, s in outputs.items()], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    compiled = build_for(from_onnx(model, {"x": (1, C, "H", "W")}, dims={"H": (2, 24), "W": (2, 24)}), backend)
    session = load(compiled.artifact(), device=device)
    for h, w in ((5, 7), (24, 3)):
        x = RNG.randn(1, C, h, w).astype("float32")
        _assert_outputs(session.run([x]), _onnxruntime(model, {"x": x}))
