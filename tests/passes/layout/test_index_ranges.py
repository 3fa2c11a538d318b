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


@pytest.mark.parametrize("bad", [[5, 1], [0], [0, 1.5], "0..4"])
def test_a_malformed_index_range_is_refused_at_load(bad):
    artifact = relax_vk.build(from_torch(_Tagger().eval(), (torch.tensor([[1, 2, 3]]),)), "opencl").artifact()
    program = dict(artifact.program)
    program["tensors"] = [dict(t) for t in program["tensors"]]
    (tensor,) = [t for t in program["tensors"] if t["kind"] == "input"]
    tensor["index_range"] = bad
    with pytest.raises(ArtifactError, match="index_range"):
        validate(Artifact(program, artifact.source, dict(artifact.constants)).to_bytes())
