import numpy as np
import tvm
from tvm import relax

from relax_vk.analysis.reference import random_inputs, run_on_cpu, strip_scopes
from relax_vk.models import build_example

from helpers import scoped


def test_strip_scopes_removes_every_vdevice_and_copy():
    out = strip_scopes(scoped(build_example("mixed-consumers")))
    found = []

    def visit(e):
        ty = getattr(e, "ty", None)
        if isinstance(ty, relax.TensorType) and ty.vdevice is not None:
            found.append(e)
        if isinstance(e, relax.Call) and isinstance(e.op, tvm.ir.Op) and e.op.name in ("relax.to_vdevice", "relax.hint_on_device"):
            found.append(e)

    relax.analysis.post_order_visit(out["main"], visit)
    assert found == []


def test_reference_detects_a_wrong_module():
    """The semantic checks can fail: a module with a flipped weight gives different numbers."""
    mod = build_example("rfc-conv2d")
    inputs = random_inputs(mod)
    good = run_on_cpu(scoped(mod), inputs)[0]
    bad_inputs = [inputs[0], -inputs[1]]
    bad = run_on_cpu(scoped(mod), bad_inputs)[0]
    assert not np.allclose(good, bad)


def test_the_reference_runs_stepped_dims_and_scalar_inputs():
    """A model imported with a stepped dim (``--dim N=4:64:4``: ``N`` matched to ``4 * N_div4``) and
    one with a 0-d input run on the CPU (TVM's VM could not derive ``N_div4`` from the input: an
    internal error in ``relax-vk run --check`` and ``bisect``; numpy made the 0-d input 1-d)."""
    from onnx import TensorProto, helper

    from relax_vk.frontends.onnx import from_onnx

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Mul", ["y", "s"], ["z"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]), helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 4])])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    mod = from_onnx(model, {"x": ("N", 4)}, dims={"N": (4, 64, 4)})
    for rows in (4, 12):
        x = np.random.default_rng(rows).standard_normal((rows, 4)).astype("float32")
        np.testing.assert_allclose(run_on_cpu(mod, [x, np.array(3.0, "float32")])[0], np.maximum(x, 0) * 3.0, rtol=1e-6)
