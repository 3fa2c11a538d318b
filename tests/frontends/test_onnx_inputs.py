"""relax_vk.frontends.onnx keeps the model's inputs as onnxruntime lists them: one the graph never
reads is a parameter too (the importers dropped it, and a caller feeding every input, by name or
in order, was refused)."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import relax_vk  # noqa: E402
from relax_vk.frontends import from_onnx  # noqa: E402
from relax_vk.runtime import load  # noqa: E402


@pytest.mark.parametrize("api, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.one_api("api")
def test_an_input_the_graph_never_reads_stays_an_input(api, device, request):
    from onnx import TensorProto, helper

    request.getfixturevalue(device)
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "g",
                              [vi("a", TensorProto.FLOAT, [2]), vi("unused", TensorProto.INT64, [3]), vi("b", TensorProto.FLOAT, [2])],
                              [vi("y", TensorProto.FLOAT, [2])])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    mod = from_onnx(model)
    assert [p.name for p in mod["main"].params] == ["a", "unused", "b"]
    session = load(relax_vk.build(mod, api).artifact(), device=device)
    assert [t["name"] for t in session.inputs] == ["a", "unused", "b"]
    feeds = {"a": np.array([1, 2], np.float32), "unused": np.array([7, 8, 9]), "b": np.array([3, 4], np.float32)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_array_equal(session.run(feeds)[0], want)
    np.testing.assert_array_equal(session.run(list(feeds.values()))[0], want)
    with pytest.raises(ValueError, match=r"missing \['unused'\]"):  # (onnxruntime requires it too)
        session.run({"a": feeds["a"], "b": feeds["b"]})
