"""ONNX ``Reshape`` of a size computed at run time and ``Range`` up to one
(relax_vk.frontends.onnx_shape_values): a text encoder exported by ``torch.onnx``'s dynamo exporter
with a run-time batch *and* sequence length (its attention's ``view``s reshape ``B * heads`` to one
element; its positions are ``arange(T)``) runs right from one artifact at three sizes, against
onnxruntime."""

import numpy as np
import pytest
import tvm.sym

from helpers_build import BACKENDS

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript", reason="torch.onnx's dynamo exporter")

import relax_vk  # noqa: E402
from relax_vk.frontends import load_model  # noqa: E402
from relax_vk.frontends.onnx_shape_values import convert_range, convert_reshape  # noqa: E402
from relax_vk.runtime import load  # noqa: E402


class _TextEncoder(torch.nn.Module):
    """Token ids and a padding mask, ``[B, T]`` each: token and position embeddings, one encoder
    layer, a head."""

    def __init__(self):
        super().__init__()
        self.embed, self.position = torch.nn.Embedding(50, 32), torch.nn.Embedding(48, 32)
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = torch.nn.Linear(32, 5)

    def forward(self, ids, mask):
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        return self.head(self.encoder(self.embed(ids) + self.position(positions), src_key_padding_mask=mask == 0))


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    torch.manual_seed(0)
    path = str(tmp_path_factory.mktemp("encoder") / "encoder.onnx")
    B, T = torch.export.Dim("B", min=1, max=4), torch.export.Dim("T", min=2, max=48)
    example = (torch.randint(0, 50, (2, 7)), torch.ones(2, 7, dtype=torch.int64))
    torch.onnx.export(_TextEncoder().eval(), example, path, input_names=["ids", "mask"], output_names=["logits"],
                      dynamic_shapes={"ids": {0: B, 1: T}, "mask": {0: B, 1: T}}, dynamo=True)  # fmt: skip
    mod, _ = load_model(path, dims={"B": (1, 4), "T": (2, 48)})
    return mod, ort.InferenceSession(path)


@pytest.mark.one_api("api")
@pytest.mark.parametrize("api, device", BACKENDS)
def test_an_encoder_with_run_time_batch_and_sequence_runs_right_at_every_size(encoder, api, device, request):
    request.getfixturevalue(device)
    mod, reference = encoder
    session = load(relax_vk.build(mod, api).artifact(), device=device)
    for b, t in ((1, 2), (3, 17), (4, 48)):
        rng = np.random.default_rng(b * t)
        ids = rng.integers(0, 50, (b, t)).astype(np.int64)
        mask = np.ones((b, t), np.int64)
        mask[0, t // 2 + 1 :] = 0  # (a padded row)
        (got,) = session.run([ids, mask])
        (want,) = reference.run(None, {"ids": ids, "mask": mask})
        assert got.shape == want.shape == (b, t, 5)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_size_reshaped_to_one_element_stays_a_shape_value():
    from tvm import relax, tirx

    n = tirx.Var("B", "int64") * 4
    for target, want in (([1], relax.ShapeExpr), ([-1], relax.ShapeExpr)):
        out = convert_reshape(None, [n, relax.const(np.array(target, np.int64))], {})
        assert isinstance(out, want) and out.values[0].same_as(n)
    assert convert_reshape(None, [n, relax.const(np.zeros(0, np.int64))], {}).same_as(n)
    # anything else stays with TVM's converter
    assert convert_reshape(None, [n, relax.const(np.array([1, 1], np.int64))], {}) is None
    tensor = relax.Var("x", relax.TensorType((2, 3), "float32"))
    assert convert_reshape(None, [tensor, relax.const(np.array([-1], np.int64))], {}) is None


def test_a_range_up_to_a_size_has_that_length():
    from tvm import relax, tirx

    bb = relax.BlockBuilder()
    T = tirx.Var("T", "int64")
    with bb.function("f", []):
        for start, step, want in ((0, 1, T), (0, 2, tirx.floordiv(T + 1, 2))):
            out = bb.normalize(convert_range(bb, [relax.const(start, "int64"), relax.prim_value(T), relax.const(step, "int64")], {}))
            (length,) = out.ty.shape.values
            assert tvm.sym.Analyzer().can_prove_equal(length, want), (length, want)
        bb.emit_func_output(relax.const(0))
    # a float range up to a size (torch.arange(T, dtype=float32)): the same length, float32 positions
    with bb.function("g", []):
        out = bb.normalize(convert_range(bb, [relax.const(0.0, "float32"), relax.prim_value(tirx.Cast("float32", T)), relax.const(1.0, "float32")], {}))
        assert out.ty.dtype == "float32" and tvm.sym.Analyzer().can_prove_equal(out.ty.shape.values[0], T)
        bb.emit_func_output(relax.const(0))
    # a constant limit, a negative step, or a fractional float start stays with TVM's converter
    assert convert_range(bb, [relax.const(0, "int64"), relax.const(5, "int64"), relax.const(1, "int64")], {}) is None
    assert convert_range(bb, [relax.const(0, "int64"), relax.prim_value(T), relax.const(-1, "int64")], {}) is None
    assert convert_range(bb, [relax.const(0.5, "float32"), relax.prim_value(tirx.Cast("float32", T)), relax.const(1.0, "float32")], {}) is None


def test_sizes_of_run_time_dims_as_graph_outputs(pocl, tmp_path):
    """A model that outputs sizes: ``Shape(x)`` (int64 ``[4]``), ``Size(x)`` (a scalar) and
    ``x.new_zeros(1) + H * W`` as torch.onnx writes it (float32 ``[1]``). TVM imports them as a
    shape and scalar values, which no runtime step computed (the export failed: "not a tensor the
    program knows"); each is a tensor of the output's declared shape now."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from relax_vk.frontends import from_onnx

    n = helper.make_node
    nodes = [n("Relu", ["x"], ["y"]), n("Shape", ["x"], ["s"]), n("Size", ["x"], ["count"]),
             n("Gather", ["s", "two"], ["h"], axis=0), n("Gather", ["s", "three"], ["w"], axis=0), n("Mul", ["h", "w"], ["hw"]),
             n("Cast", ["hw"], ["hwf"], to=TensorProto.FLOAT), n("Add", ["zero", "hwf"], ["area"])]  # fmt: skip
    inits = [helper.make_tensor("two", TensorProto.INT64, [], [2]), helper.make_tensor("three", TensorProto.INT64, [], [3]),
             helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0])]  # fmt: skip
    graph = helper.make_graph(nodes, "sizes", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, "H", "W"]),
                               helper.make_tensor_value_info("s", TensorProto.INT64, [4]),
                               helper.make_tensor_value_info("count", TensorProto.INT64, []),
                               helper.make_tensor_value_info("area", TensorProto.FLOAT, [1])], inits)  # fmt: skip
    path = str(tmp_path / "sizes.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    session = load(relax_vk.build(from_onnx(path, dims={"H": (4, 32), "W": (5, 40)}), "opencl").artifact(), device="pocl")
    reference = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for h, w in ((4, 5), (31, 17)):
        x = np.random.RandomState(h).randn(1, 3, h, w).astype("float32")
        for got, want in zip(session.run([x]), reference.run(None, {"x": x})):
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_a_size_divided_floors_where_it_is_never_negative():
    """ONNX's integer ``Div`` truncates; a size divided by a positive constant is floor division
    where the ranges prove it non-negative (the dynamo exporter's ``(H - 1) / 2 + 1`` for a strided
    conv's output then equals the conv's own ``(H - 1) // 2 + 1``: an FPN's add kept its shape)."""
    from tvm import relax, tirx

    from relax_vk.frontends.onnx_shape_values import convert_div
    from relax_vk.frontends.onnx_slice import importing_ranges

    H = tirx.Var("H", "int64")
    two = relax.const(2, "int64")
    with importing_ranges({"H": (32, 96)}):
        out = convert_div(None, [H - 1, two], {})
        assert tvm.sym.Analyzer().can_prove_equal(out, tirx.floordiv(H - 1, 2))
        assert convert_div(None, [H - 100, two], {}) is None  # (negative at some sizes: TVM's truncation)
        assert convert_div(None, [H - 1, relax.const(0, "int64")], {}) is None
    assert convert_div(None, [H - 1, two], {}) is None  # (outside an import: no ranges)


def test_a_resize_of_a_tensor_whose_shape_was_lost_is_refused_with_the_step_hint():
    from tvm import relax

    from relax_vk.core.errors import UnsupportedError
    from relax_vk.frontends.onnx_resize import convert_resize

    lost = relax.Var("x", relax.TensorType(ndim=4, dtype="float32"))
    with pytest.raises(UnsupportedError, match="input's shape is lost at run-time dims .* declare it: --dim NAME=MIN:MAX:STEP"):
        convert_resize(None, [lost, None, relax.const(np.array([1, 1, 2, 2], np.float32))], {})
