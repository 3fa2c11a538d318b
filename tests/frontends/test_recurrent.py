"""LSTM, GRU and RNN with the sequence length a run-time dim (``relax_vk.frontends.recurrent``):
ONNX's operators against onnxruntime, PyTorch's ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` through
``torch.export`` and through ONNX (the zoo's CRNN recognizers: conv backbone, 2-layer BiLSTM or
BiGRU, CTC head), each one artifact right at three lengths on pocl and lavapipe; per-row lengths; the CPU reference
form; refusals by name."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import relax_vk  # noqa: E402
from relax_vk.analysis.reference import run_on_cpu  # noqa: E402
from relax_vk.core.errors import UnsupportedError  # noqa: E402
from relax_vk.frontends.onnx import from_onnx  # noqa: E402
from relax_vk.frontends.torch import from_exported, from_torch  # noqa: E402
from relax_vk.runtime import load  # noqa: E402

APIS = [("opencl", "pocl"), ("vulkan", "lavapipe")]
LENGTHS = (1, 6, 40)
I = 5


def _outputs(names):
    """Value infos of a node's outputs (Y of rank 4, the states of rank 3; dims left to inference)."""
    return [helper.make_tensor_value_info(o, TensorProto.FLOAT, [f"{o}_{i}" for i in range(4 if o.endswith("_y") else 3)]) for o in names]


def _node(kind, name, x, H, D, rng, inits, extra_inputs=(), **attrs):
    """A recurrent node reading ``x`` with seeded weights; returns its node and output names."""
    G = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    for tag, shape in (("W", (D, G * H, I)), ("R", (D, G * H, H)), ("B", (D, 2 * G * H))):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(H)).astype(np.float32), f"{name}_{tag}"))
    outs = [f"{name}_y", f"{name}_yh"] + ([f"{name}_yc"] if kind == "LSTM" else [])
    inputs = [x, f"{name}_W", f"{name}_R", f"{name}_B", *extra_inputs]
    return helper.make_node(kind, inputs, outs, name=name, hidden_size=H, **attrs), outs


def _recurrent_graph():
    """Every recurrent node kind reading one sequence ``x [T, 2, I]``, the attribute variants
    onnxruntime runs: a bidirectional LSTM with given initial states and peepholes over more units
    than a workgroup's threads, a reverse LSTM with clip and other activations, a bidirectional GRU
    with linear_before_reset=0 (ONNX's default; PyTorch's is 1), a forward GRU with it 1, and a
    bidirectional ReLU RNN."""
    rng = np.random.default_rng(7)
    B, inits, nodes, outputs = 2, [], [], []
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", B, I]),
           helper.make_tensor_value_info("h0", TensorProto.FLOAT, [2, B, 150]),
           helper.make_tensor_value_info("c0", TensorProto.FLOAT, [2, B, 150])]  # fmt: skip
    inits.append(numpy_helper.from_array((rng.standard_normal((2, 450)) * 0.4).astype(np.float32), "lstm_P"))
    specs = [
        ("LSTM", "lstm", 150, 2, ["", "h0", "c0", "lstm_P"], dict(direction="bidirectional")),
        # (clip below the cell states' size: onnxruntime clips the gates' inputs, never h(C)'s)
        ("LSTM", "lstm_rev", 9, 1, [], dict(direction="reverse", clip=0.3, activations=["Sigmoid", "Relu", "Tanh"])),
        ("GRU", "gru", 16, 2, [], dict(direction="bidirectional")),
        ("GRU", "gru_lbr", 12, 1, [], dict(linear_before_reset=1)),
        ("RNN", "rnn", 10, 2, [], dict(direction="bidirectional", activations=["Relu", "Relu"])),
    ]
    for kind, name, H, D, extra, attrs in specs:
        node, outs = _node(kind, name, "x", H, D, rng, inits, extra, **attrs)
        nodes.append(node)
        outputs += _outputs(outs)
    model = helper.make_model(helper.make_graph(nodes, "recurrent", ins, outputs, inits), opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


def _feeds(T, seed=0):
    rng = np.random.default_rng(seed + T)
    return {"x": rng.standard_normal((T, 2, I)).astype(np.float32),
            "h0": rng.standard_normal((2, 2, 150)).astype(np.float32) * 0.5,
            "c0": rng.standard_normal((2, 2, 150)).astype(np.float32) * 0.5}  # fmt: skip


@pytest.fixture(scope="module")
def recurrent_onnx():
    model = _recurrent_graph()
    return model, from_onnx(model, {"x": ("T", 2, I), "h0": (2, 2, 150), "c0": (2, 2, 150)}, dims={"T": (1, 40)})


@pytest.mark.parametrize("backend, device", APIS)
def test_onnx_recurrent_ops_match_onnxruntime_at_every_length(recurrent_onnx, backend, device):
    model, mod = recurrent_onnx
    session = load(relax_vk.build(mod, backend).artifact(), device=device)
    reference = ort.InferenceSession(model.SerializeToString())
    for T in LENGTHS:
        feeds = _feeds(T)
        got = session.run([feeds["x"], feeds["h0"], feeds["c0"]])
        expected = reference.run(None, feeds)
        assert len(got) == len(expected) == 12
        for name, a, e in zip([o.name for o in model.graph.output], got, expected):
            assert a.shape == e.shape, (name, T)
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=2e-5, err_msg=f"{name} at T={T}")


def test_the_cpu_reference_runs_the_serial_form(recurrent_onnx):
    """llvm cannot compile the GPU kernel (threads, workgroup memory): bisect and fp16 calibration
    run its serial form, which computes the same."""
    model, mod = recurrent_onnx
    feeds = _feeds(6, seed=1)
    got = run_on_cpu(mod, [feeds["x"], feeds["h0"], feeds["c0"]])
    for a, e in zip(got, ort.InferenceSession(model.SerializeToString()).run(None, feeds)):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=2e-5)


def test_batch_first_layout():
    """``layout=1`` (onnxruntime refuses it; ONNX's reference evaluator runs it)."""
    from onnx.reference import ReferenceEvaluator

    rng, inits = np.random.default_rng(3), []
    node, outs = _node("GRU", "g", "x", 7, 2, rng, inits, direction="bidirectional", layout=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, "T", I])],
                              _outputs(outs), inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    session = load(relax_vk.build(from_onnx(model, {"x": (3, "T", I)}, dims={"T": (1, 9)}), "opencl").artifact(), device="pocl")
    for T in (2, 9):
        x = rng.standard_normal((3, T, I)).astype(np.float32)
        for a, e in zip(session.run([x]), ReferenceEvaluator(model).run(None, {"x": x})):
            assert a.shape == e.shape
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


def _export(model, example, path, axes):
    torch.onnx.export(model, (example,), str(path), dynamo=False, input_names=["x"], output_names=["y"], dynamic_axes=axes)
    return str(path)


@pytest.fixture(scope="module")
def exported_onnx(tmp_path_factory):
    """The zoo's CRNN recognizers (2-layer BiLSTM, 2-layer BiGRU) exported by ``torch.onnx.export``
    with the line's width a dynamic axis."""
    from relax_vk.zoo import build_zoo_model

    folder = tmp_path_factory.mktemp("recurrent")
    out = {}
    for name in ("crnn", "crnn_gru"):
        model, example = build_zoo_model(name)
        path = _export(model, example, folder / f"{name}.onnx", {"x": {3: "W"}, "y": {0: "S"}})
        out[name] = (path, {"x": (1, 3, 32, "W")}, {"W": (8, 480)}, [(1, 3, 32, w) for w in (8, 101, 480)])
    return out


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", APIS)
@pytest.mark.parametrize("name", ["crnn", "crnn_gru"])
def test_pytorch_models_exported_to_onnx_at_three_lengths(exported_onnx, name, backend, device):
    path, shapes, dims, sizes = exported_onnx[name]
    session = load(relax_vk.build(from_onnx(path, shapes, dims=dims), backend).artifact(), device=device)
    reference = ort.InferenceSession(path)
    for shape in sizes:
        x = np.random.default_rng(shape[-1] + shape[1]).standard_normal(shape).astype(np.float32)
        (got,) = session.run([x])
        (expected,) = reference.run(None, {"x": x})
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=2e-5)
        assert (got.argmax(-1) == expected.argmax(-1)).all()


class _Stack(torch.nn.Module):
    """nn.LSTM (2 layers, bidirectional), nn.GRU without biases, nn.RNN with ReLU, batch first."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(I, 8, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = torch.nn.GRU(16, 6, bias=False, batch_first=True)
        self.rnn = torch.nn.RNN(6, 5, nonlinearity="relu", batch_first=True, bidirectional=True)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        z, hz = self.gru(y)
        w, hw = self.rnn(z)
        return w, h, c, hz, hw


def test_torch_recurrent_layers_keep_the_length_a_run_time_dim():
    """``torch.export`` alone unrolls ``nn.LSTM`` over the example's length (the Dim is refused as
    specialized); ``from_torch`` exports the layers as one op each and restores the modules."""
    torch.manual_seed(1)
    model = _Stack().eval()
    mod = from_torch(model, (torch.randn(3, 5, I),), dynamic_shapes={"x": {1: torch.export.Dim("T", min=1, max=30)}})
    assert not any("forward" in m.__dict__ for m in model.modules())
    session = load(relax_vk.build(mod, "opencl").artifact(), device="pocl")
    for T in (1, 11, 30):
        x = torch.randn(3, T, I)
        got = session.run([x.numpy()])
        with torch.no_grad():
            expected = model(x)
        assert len(got) == len(expected)
        for a, e in zip(got, expected):
            assert a.shape == tuple(e.shape)
            np.testing.assert_allclose(a, e.numpy(), rtol=1e-4, atol=1e-5)


def test_a_subclass_of_a_recurrent_layer_keeps_the_length_a_run_time_dim():
    """A subclass of ``nn.LSTM`` that keeps its ``forward`` is exported as the layer (before, only
    the exact type was, and ``torch.export`` refused the Dim naming neither the layer nor why)."""

    class Tagged(torch.nn.LSTM):
        pass

    torch.manual_seed(3)
    model = Tagged(I, 6, batch_first=True).eval()
    mod = from_torch(model, (torch.randn(2, 5, I),), dynamic_shapes=({1: torch.export.Dim("T", min=1, max=20)},))
    session = load(relax_vk.build(mod, "opencl").artifact(), device="pocl")
    for T in (1, 17):
        x = torch.randn(2, T, I)
        with torch.no_grad():
            y, (h, c) = model(x)
        for a, e in zip(session.run([x.numpy()]), (y, h, c)):
            np.testing.assert_allclose(a, e.numpy(), rtol=1e-4, atol=1e-5)


def test_an_exported_program_with_aten_lstm():
    """A program the user exported (``aten.lstm.input``, fixed length, given initial states)."""
    torch.manual_seed(2)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(I, 7, num_layers=2, bidirectional=True)

        def forward(self, x, h, c):
            y, (hn, cn) = self.lstm(x, (h, c))
            return y, hn, cn

    model = Model().eval()
    args = (torch.randn(6, 2, I), torch.randn(4, 2, 7), torch.randn(4, 2, 7))
    exported = torch.export.export(model, args)
    assert any(str(n.target) == "aten.lstm.input" for n in exported.graph.nodes)
    got = load(relax_vk.build(from_exported(exported), "opencl").artifact(), device="pocl").run([a.numpy() for a in args])
    with torch.no_grad():
        expected = model(*args)
    for a, e in zip(got, expected):
        np.testing.assert_allclose(a, e.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend, device", APIS)
def test_sequence_lengths_per_batch_row(backend, device):
    """``sequence_lens``: steps past a row's length keep its state and write zeros (a bidirectional
    LSTM's reverse direction starts at the row's last step; a GRU with linear_before_reset=0); a
    row of length 0 ends in zero states, as onnxruntime's (it returned the initial ones)."""
    rng, inits, nodes, outputs = np.random.default_rng(5), [], [], []
    for kind, name, attrs in (("LSTM", "lstm", dict(direction="bidirectional")), ("GRU", "gru", dict(direction="reverse"))):
        node, outs = _node(kind, name, "x", 6, 2 if attrs["direction"] == "bidirectional" else 1, rng, inits, ["lens"], **attrs)
        nodes.append(node)
        outputs += _outputs(outs)
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 3, I]), helper.make_tensor_value_info("lens", TensorProto.INT32, [3])]
    model = helper.make_model(helper.make_graph(nodes, "lens", ins, outputs, inits), opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    session = load(relax_vk.build(from_onnx(model, {"x": ("T", 3, I), "lens": (3,)}, dims={"T": (1, 12)}), backend).artifact(), device=device)
    reference = ort.InferenceSession(model.SerializeToString())
    for T, lens in ((12, [12, 5, 1]), (4, [2, 4, 3]), (1, [1, 1, 1]), (5, [0, 5, 2])):
        x = rng.standard_normal((T, 3, I)).astype(np.float32)
        lengths = np.array(lens, np.int32)
        for a, e in zip(session.run([x, lengths]), reference.run(None, {"x": x, "lens": lengths})):
            assert a.shape == e.shape
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


def _single(kind, extra_inputs=(), H=4, **attrs):
    rng, inits = np.random.default_rng(0), []
    node, outs = _node(kind, "rec", "x", H, 1, rng, inits, extra_inputs, **attrs)
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1, I])]
    graph = helper.make_graph([node], "g", ins, _outputs(outs), inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


@pytest.mark.parametrize(
    "model, message",
    [
        (lambda: _single("GRU", activations=["HardSigmoid", "Tanh"]), r"GRU node rec: activations \['HardSigmoid', 'Tanh'\]"),
        (lambda: _single("LSTM", input_forget=1), r"LSTM node rec: input_forget=1"),
        (lambda: _single("RNN", H=1025), r"RNN node rec: hidden_size 1025: 1 to 1024"),
        (lambda: _single("GRU", layout=2), r"GRU node rec: layout=2; ONNX allows 0 or 1"),
        (lambda: _single("GRU", linear_before_reset=2), r"GRU node rec: linear_before_reset=2; ONNX allows 0 or 1"),
    ],
)  # fmt: skip
def test_unsupported_attributes_are_refused_by_name(model, message):
    with pytest.raises(UnsupportedError, match=message):
        from_onnx(model())


def test_a_projected_lstm_is_refused():
    model = torch.nn.LSTM(I, 8, proj_size=4).eval()
    with pytest.raises(UnsupportedError, match="proj_size"):
        from_torch(model, (torch.randn(3, 1, I),))


def test_half_arithmetic_around_the_recurrence(exported_onnx):
    """``arithmetic="fp16"`` calibrates at the dims' upper bound (a run-time dim has no example
    size) and keeps the recurrence float32: the CRNN's classes stay those of onnxruntime."""
    from relax_vk.core.options import ScopeOptions

    path, shapes, dims, sizes = exported_onnx["crnn"]
    compiled = relax_vk.build(from_onnx(path, shapes, dims=dims), "vulkan", options=ScopeOptions(arithmetic="fp16"))
    session = load(compiled.artifact(), device="lavapipe")
    for shape in sizes[1:]:
        x = np.random.default_rng(shape[-1]).standard_normal(shape).astype(np.float32)
        (got,) = session.run([x])
        (expected,) = ort.InferenceSession(path).run(None, {"x": x})
        np.testing.assert_allclose(got, expected, atol=5e-3 * np.abs(expected).max())
