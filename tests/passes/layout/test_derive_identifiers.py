"""DeriveIdentifiers: model names never reach generated code as they are; plans keep them."""

import numpy as np
import pytest
from helpers_build import BACKENDS

import relax_vk
from relax_vk.passes.layout.derive_identifiers import RESERVED, derive_identifier
from relax_vk.runtime import load

onnx = pytest.importorskip("onnx")

NAMES = ["gpu_0/data_0", "kernel", "0input", "données", "a-b", "a_b", "x:0", "float4", "var", "__global"]


def test_derived_identifiers_are_valid_and_unique():
    taken = set()
    derived = [derive_identifier(n, taken) for n in NAMES]
    assert len(set(derived)) == len(derived)
    for d in derived:
        assert d.isidentifier() and d.isascii() and not d[0].isdigit() and d not in RESERVED and not d.startswith("__")
    assert derived[:6] == ["gpu_0_data_0", "kernel_", "v_0input", "donnees", "a_b", "a_b_1"]


def _model(path, names):
    from onnx import TensorProto, helper, numpy_helper

    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4, 6, 6]) for n in names[:2]]
    w = numpy_helper.from_array(np.random.default_rng(0).random((4, 4, 3, 3)).astype("float32"), "conv:weight/0")
    nodes = [helper.make_node("Add", names[:2], ["sum.out"]), helper.make_node("Conv", ["sum.out", "conv:weight/0"], [names[2]], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(names[2], TensorProto.FLOAT, [1, 4, 6, 6])], initializer=[w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


@pytest.mark.parametrize("backend, device", BACKENDS)
@pytest.mark.parametrize("names", [NAMES[:3], NAMES[3:6], NAMES[6:9]], ids=["slash-keyword-digit", "unicode-collision", "colon-type-wgsl"])
def test_models_with_hostile_names_build_run_and_keep_their_names(tmp_path, names, backend, device):
    from relax_vk.frontends import from_onnx

    path = str(tmp_path / "m.onnx")
    _model(path, names)
    compiled = relax_vk.build(from_onnx(path), target=backend)  # OpenCL: compiled by pocl at load below
    xs = [np.random.default_rng(i).random((1, 4, 6, 6)).astype("float32") for i in range(2)]
    out = load(compiled.artifact(), device=device).run(xs)[0]
    import onnxruntime as ort

    ref = ort.InferenceSession(path).run(None, dict(zip(names[:2], xs)))[0]
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
    plan_names = [t.name for t in compiled.plan().tensors if t.kind == "param"]
    assert plan_names == names[:2]  # the plan shows the model's names
    assert [t["name"] for t in compiled.artifact().program["tensors"][:2]] == names[:2]
