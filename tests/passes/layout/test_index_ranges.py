"""RecordIndexRanges (relax_vk.passes.layout.index_ranges): an integer input that indexes a table
carries the range of rows it may name, and a session refuses a run whose input names a row past
the table (a kernel would read past it on the device) by the input, the value and where it lies."""

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import relax_vk  # noqa: E402
from relax_vk.frontends import from_torch  # noqa: E402
from relax_vk.passes.layout.index_ranges import index_ranges  # noqa: E402
from relax_vk.runtime import load, validate  # noqa: E402
from relax_vk.serialization.artifact import Artifact, ArtifactError  # noqa: E402


class _Tagger(torch.nn.Module):
    """Token ids through an embedding table (30 rows) and a second table of positions (12 rows)
    read at the same ids; the arg-max of the scores picks rows of a third table (an index computed
    inside the model: not an input's)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed, self.position, self.labels = torch.nn.Embedding(30, 8), torch.nn.Embedding(12, 8), torch.nn.Embedding(8, 3)

    def forward(self, ids):
        h = self.embed(ids) + self.position(ids)
        return self.labels(h.argmax(-1))


def _inputs(artifact):
    return {t["name"]: t.get("index_range") for t in artifact.program["tensors"] if t["kind"] == "input"}


def test_a_torch_input_that_indexes_two_tables_takes_the_smaller_range():
    mod = from_torch(_Tagger().eval(), (torch.tensor([[1, 2, 3]]),))
    assert index_ranges(mod["main"]) == {"ids": [0, 11]}
    assert _inputs(relax_vk.build(mod, "opencl").artifact()) == {"ids": [0, 11]}


def test_an_onnx_gather_that_wraps_negative_indices_takes_them(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    table = numpy_helper.from_array(np.arange(20, dtype=np.float32).reshape(5, 4), "table")
    graph = helper.make_graph([helper.make_node("Gather", ["table", "ids"], ["y"], axis=0)], "g",
                              [helper.make_tensor_value_info("ids", TensorProto.INT64, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])], [table])  # fmt: skip
    path = str(tmp_path / "gather.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    from relax_vk.frontends import load_model

    mod, _ = load_model(path)
    artifact = relax_vk.build(mod, "opencl").artifact()
    assert _inputs(artifact) == {"ids": [-5, 4]}


@pytest.mark.parametrize("api, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.one_api("api")
def test_a_value_past_the_table_is_refused_before_anything_runs(api, device, request):
    request.getfixturevalue(device)
    model = _Tagger().eval()
    session = load(relax_vk.build(from_torch(model, (torch.tensor([[1, 2, 3]]),)), api).artifact(), device=device)
    ids = np.array([[0, 11, 5]])
    np.testing.assert_array_equal(session.run([ids])[0], model(torch.from_numpy(ids)).detach().numpy())
    for ids in ([[0, 12, 5]], [[0, 1, -1]], [[1 << 40, 0, 0]]):
        bad = [v for v in ids[0] if not 0 <= v <= 11][0]
        at = re.escape(str([0, ids[0].index(bad)]))
        # (past int32, a Vulkan device's dtype for indices, the conversion refuses it first)
        with pytest.raises(ValueError, match=rf"input ids: (value {bad} at {at} is outside 0\.\.11, the indices of the table|.*outside the int32 range)"):
            session.run([np.array(ids)])
    np.testing.assert_array_equal(session.run([np.array([[3, 4, 5]])])[0], model(torch.tensor([[3, 4, 5]])).detach().numpy())


# (a range per position of the last axis: one for each of its 3 positions, each [lo, hi])
@pytest.mark.parametrize("bad", [[5, 1], [0], [0, 1.5], "0..4", [[0, 1], [0, 2]], [[0, 1], [2, 1], [0, 1]]])
def test_a_malformed_index_range_is_refused_at_load(bad):
    artifact = relax_vk.build(from_torch(_Tagger().eval(), (torch.tensor([[1, 2, 3]]),)), "opencl").artifact()
    program = dict(artifact.program)
    program["tensors"] = [dict(t) for t in program["tensors"]]
    (tensor,) = [t for t in program["tensors"] if t["kind"] == "input"]
    tensor["index_range"] = bad
    with pytest.raises(ArtifactError, match="index_range"):
        validate(Artifact(program, artifact.source, dict(artifact.constants)).to_bytes())


def _onnx_index_model(op):
    """An ONNX ``op`` over a [2, 4] table whose indices are the model's input ``ids``."""
    from onnx import TensorProto, helper

    vi = helper.make_tensor_value_info
    node, out, ids_shape, more = {
        "GatherElements": (helper.make_node("GatherElements", ["x", "ids"], ["g"], axis=1), [2, 2], [2, 2], []),
        "GatherND": (helper.make_node("GatherND", ["x", "ids"], ["g"]), [2], [2, 2], []),
        "ScatterElements": (helper.make_node("ScatterElements", ["x", "ids", "u"], ["g"], axis=1), [2, 4], [2, 2], [vi("u", TensorProto.FLOAT, [2, 2])]),
        "ScatterND": (helper.make_node("ScatterND", ["x", "ids", "u"], ["g"]), [2, 4], [2, 2], [vi("u", TensorProto.FLOAT, [2])]),
    }[op]  # fmt: skip
    graph = helper.make_graph([node], "g", [vi("ids", TensorProto.INT64, ids_shape), vi("x", TensorProto.FLOAT, [2, 4]), *more],
                              [vi("g", TensorProto.FLOAT, out)])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("api, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.parametrize("op, good, bad, message", [
    ("GatherElements", [[0, -4], [1, 3]], [[0, 4], [1, 2]], r"value 4 at \[0, 1\] is outside -4\.\.3"),
    # an index tuple's components index axes of 2 and 4 entries: a range each
    ("GatherND", [[1, 3], [-2, -1]], [[0, 3], [2, 0]], r"value 2 at \[1, 0\] is outside -2\.\.1, the indices of the axis it selects along"),
    ("ScatterElements", [[0, -4], [1, 3]], [[0, 5], [1, 2]], r"value 5 at \[0, 1\] is outside -4\.\.3"),  # (TOPI wraps negatives itself)
    ("ScatterND", [[1, 3], [0, 1]], [[0, 4], [1, 1]], r"value 4 at \[0, 1\] is outside -4\.\.3"),
])  # fmt: skip
@pytest.mark.one_api("api")
def test_gathers_and_scatters_at_input_indices_refuse_a_value_past_their_axis(api, device, op, good, bad, message, request):
    """An index past the axis crashed pocl (GatherElements / GatherND at 1e8: SIGSEGV) or read its
    neighbours' memory; onnxruntime refuses it. The valid ones, negative too, run as onnxruntime does."""
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from relax_vk.frontends import from_onnx

    request.getfixturevalue(device)
    model = _onnx_index_model(op)
    session = load(relax_vk.build(from_onnx(model), api).artifact(), device=device)
    feeds = {"ids": np.array(good, np.int64), "x": np.arange(8, dtype=np.float32).reshape(2, 4) + 1}
    if op.startswith("Scatter"):
        feeds["u"] = np.array([[10, 20], [30, 40]] if op == "ScatterElements" else [10, 20], np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_array_equal(session.run(feeds)[0], want)
    with pytest.raises(ValueError, match="input ids: " + message):
        session.run({**feeds, "ids": np.array(bad, np.int64)})
