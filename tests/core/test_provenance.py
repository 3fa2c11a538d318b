"""relax_vk.core.provenance: the model's op names reach the kernels that compute them."""

import pytest

from relax_vk.core.provenance import MODEL_OPS_ATTR, provenance
from relax_vk.tools.profile import build_for

torch = pytest.importorskip("torch")


def _launch_ops(mod, target="opencl"):
    program = build_for(mod, target).artifact().program
    return [s.get("ops", []) for s in program["steps"] if s["op"] == "launch"]


class Block(torch.nn.Module):
    """conv -> bn -> relu, a second conv -> bn, the input added back, relu (a residual block whose
    graph the layout stage emits in another order)."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(8)
        self.head = torch.nn.Conv2d(8, 4, 1)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)) + x)
        return self.head(y)


def test_pytorch_module_paths_reach_their_kernels():
    from relax_vk.frontends import from_torch

    torch.manual_seed(0)
    mod = from_torch(Block(), (torch.randn(1, 8, 16, 16),))
    named = set(dict(mod["main"].attrs[MODEL_OPS_ATTR]).values())
    # modules: their paths; function calls in the top module's forward: their FX node names
    assert named == {"conv1", "bn1", "conv2", "bn2", "head", "relu", "add", "relu_1"}
    for target in ("opencl", "vulkan"):
        groups = [g for g in _launch_ops(mod, target) if g]
        assert {op for g in groups for op in g} == named  # every op reaches a kernel
        by_conv = {g[0]: g for g in groups}
        assert by_conv["conv1"] == ["conv1", "bn1", "relu"]
        assert by_conv["conv2"] == ["conv2", "bn2", "add", "relu_1"]
        assert by_conv["head"] == ["head"]


def test_onnx_node_names_reach_their_kernels():
    pytest.importorskip("onnx")
    from onnx_chain import chain_model

    mod = chain_model()
    assert [g for g in _launch_ops(mod) if g] == [["first", "first_relu"], ["middle", "middle_relu"], ["last", "squash"]]


def test_a_module_without_names_builds_without_provenance():
    from relax_vk.models import build_example

    mod = build_example("rfc-conv2d")
    assert MODEL_OPS_ATTR not in (mod["main"].attrs or {})
    compiled = build_for(mod)
    assert provenance(compiled.lowered["main"]) == []
    assert all("ops" not in s for s in compiled.artifact().program["steps"])


def test_outputs_the_edges_cast_keep_their_ops_on_vulkan():
    """An int64 ArgMax output and a float output a tuple also returns: on Vulkan the output edge casts
    them (int32 kernels), and CanonicalizeBindings moved the output variables onto the ops they
    aliased; the same variable was taken for the same binding, so the relu and argmax kernels named
    no op (bisect compared 1 of 3, profile called them layout)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    import relax_vk
    from relax_vk.frontends import from_onnx

    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("ArgMax", ["r"], ["am"], axis=1, keepdims=0),
         helper.make_node("Greater", ["x", "r"], ["gt"])], "g", [vi("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [vi("r", TensorProto.FLOAT, [1, 4, 8, 8]), vi("am", TensorProto.INT64, [1, 8, 8]), vi("gt", TensorProto.BOOL, [1, 4, 8, 8])])  # fmt: skip
    mod = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    for target in ("opencl", "vulkan"):
        steps = relax_vk.build(mod, target).artifact().program["steps"]
        assert [s.get("ops") for s in steps if s["op"] == "launch"] == [["r"], ["am"], ["gt"]], target
