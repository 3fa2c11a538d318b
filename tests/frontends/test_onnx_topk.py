"""ONNX ``TopK`` of a whole axis of run-time size (relax_vk.frontends.onnx_topk): ``torch.sort``
exported by both of ``torch.onnx``'s exporters (``K`` computed from ``Shape``, as a tensor or as a
shape value) runs from one artifact at every width, equal to onnxruntime; a ``K`` that is not the
axis's size is left to TVM's converter."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

import relax_vk  # noqa: E402
from relax_vk.frontends import load_model  # noqa: E402
from relax_vk.frontends.onnx_topk import OP, rewrite_full_topk  # noqa: E402
from relax_vk.runtime import load  # noqa: E402


class _Sorted(torch.nn.Module):
    def forward(self, x):
        values, indices = torch.sort(x, dim=-1, descending=True)
        return values * 2, indices, torch.argsort(x, dim=0)


def _export(path, dynamo: bool):
    x = torch.randn(3, 7)
    if dynamo:
        pytest.importorskip("onnxscript", reason="torch.onnx's dynamo exporter")
        torch.onnx.export(_Sorted(), (x,), path, input_names=["x"], dynamic_shapes={"x": {1: torch.export.Dim("W", min=2, max=64)}}, dynamo=True)
    else:
        torch.onnx.export(_Sorted(), (x,), path, input_names=["x"], dynamic_axes={"x": {1: "W"}}, dynamo=False, opset_version=17)


@pytest.mark.one_api("api")
@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
@pytest.mark.parametrize("api, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_a_sort_over_a_run_time_axis_runs_at_every_width(dynamo, api, device, tmp_path, request):
    request.getfixturevalue(device)
    path = str(tmp_path / "sort.onnx")
    _export(path, dynamo)
    mod, _ = load_model(path, dims={"W": (2, 64)})
    session, reference = load(relax_vk.build(mod, api).artifact(), device=device), ort.InferenceSession(path)
    for width in (2, 7, 64):
        x = np.random.default_rng(width).standard_normal((3, width)).astype(np.float32)
        for got, want in zip(session.run([x]), reference.run(None, {"x": x})):
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_only_a_k_that_is_the_axis_size_becomes_a_sort(tmp_path):
    from onnx import TensorProto, helper

    def model(index):
        nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Constant", [], ["i"], value=helper.make_tensor("i", TensorProto.INT64, [1], [index])),
                 helper.make_node("Gather", ["s", "i"], ["k"]), helper.make_node("TopK", ["x", "k"], ["v", "j"], axis=1)]  # fmt: skip
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "W"])],
                                  [helper.make_tensor_value_info("v", TensorProto.FLOAT, None), helper.make_tensor_value_info("j", TensorProto.INT64, None)])  # fmt: skip
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])

    full, part = model(1), model(0)  # (K = W, the axis's size; K = 2, another axis's)
    assert rewrite_full_topk(full) == 1 and [n.op_type for n in full.graph.node][-1] == OP
    assert rewrite_full_topk(part) == 0 and [n.op_type for n in part.graph.node][-1] == "TopK"
