"""llvmpipe's loop cap: lavapipe ends a shader invocation's loops after 65535 iterations of all of
them together and returns what they had computed (a mean over 20,000 rows of four channels in one
invocation came out 0.63 off). The emitter bounds each kernel's iterations, the artifact records
those past the cap, and the session refuses such a kernel on llvmpipe by name; pocl runs it right.
A count that is a run-time size is an expression on the launch, checked at each run's sizes."""

import numpy as np
import pytest
from tvm.script import tirx as T

import relax_vk
from relax_vk.codegen.wgsl.emit import loop_iterations, symbolic_loop_iterations
from relax_vk.runtime import DeviceLimitError, load


@T.prim_func
def _nested(a: T.Buffer((64,), "float32"), n: T.int32):
    for i in range(100):
        for j in range(30):
            a[j] = a[j] + 1.0
        if i < 5:
            for k in range(7):
                a[k] = 0.0
    for r in range(n):
        a[0] = a[0] + 1.0


def test_iterations_of_all_loops_together():
    body = _nested.body
    static = body.seq[0] if hasattr(body, "seq") else body
    assert loop_iterations(static) == 100 + 100 * (30 + 7)  # (both branches of an if counted)
    assert loop_iterations(_nested.body) is None  # (a run-time trip count)
    n = _nested.params[1]
    count = symbolic_loop_iterations(_nested)
    from tvm.sym import Analyzer

    assert Analyzer().can_prove_equal(count, 100 + 100 * (30 + 7) + n.astype("int64"))


def _tall_mean(rows: int):
    from onnx import TensorProto, helper, numpy_helper

    # (a conv first: its output packed four channels a texel, whose mean one invocation sums)
    w = numpy_helper.from_array(np.random.default_rng(1).standard_normal((6, 5, 3, 1)).astype("float32"), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 0, 1, 0]), helper.make_node("Relu", ["c"], ["y"]),
             helper.make_node("ReduceMean", ["y", "axes"], ["m"])]  # fmt: skip
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, rows, 1])],
                              [helper.make_tensor_value_info("m", TensorProto.FLOAT, [1, 6, 1, 1])], [w, numpy_helper.from_array(np.array([2], "int64"), "axes")])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def test_a_kernel_past_llvmpipes_loop_cap_is_refused_there(lavapipe, pocl):
    from relax_vk.frontends.onnx import from_onnx

    model = from_onnx(_tall_mean(20000))
    kernels = relax_vk.build(model, "vulkan").artifact().program["kernels"]
    assert any(k.get("loop_iterations", 0) > 65535 for k in kernels)
    with pytest.raises(DeviceLimitError, match=r"kernel \S+ runs \d+ loop iterations in one invocation; llvmpipe.*65535"):
        load(relax_vk.build(model, "vulkan").artifact(), device="lavapipe")
    ort = pytest.importorskip("onnxruntime")
    x = np.random.default_rng(0).standard_normal((1, 5, 20000, 1)).astype("float32")
    want = ort.InferenceSession(_tall_mean(20000).SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(load(relax_vk.build(model, "opencl").artifact(), device="pocl").run([x])[0], want, rtol=1e-4, atol=1e-5)
    short = relax_vk.build(from_onnx(_tall_mean(2000)), "vulkan").artifact()  # (under the cap: no record, runs)
    assert not any("loop_iterations" in k for k in short.program["kernels"])
    x = x[:, :, :2000]
    want = ort.InferenceSession(_tall_mean(2000).SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(load(short, device="lavapipe").run([x])[0], want, rtol=1e-4, atol=1e-5)


def test_a_run_time_count_past_the_cap_is_refused_at_the_runs_that_pass_it(lavapipe):
    """A cumulative sum along a run-time length up to 100,000: one invocation's loop runs the
    length. lavapipe returned the sum of the first 65,535 terms at 70,000 (4,465 off), silently;
    now that run is refused by name, and runs within the cap before and after it are right (a run
    near the cap would take lavapipe seconds: the tests run short ones)."""
    torch = pytest.importorskip("torch")
    from relax_vk.frontends.torch import from_torch

    class CumSum(torch.nn.Module):
        def forward(self, x):
            return torch.cumsum(x, dim=1)

    mod = from_torch(CumSum(), (torch.randn(2, 64),), dynamic_shapes={"x": {1: torch.export.Dim("T", min=2, max=100000)}})
    artifact = relax_vk.build(mod, "vulkan").artifact()
    assert [s["loop_iterations"] for s in artifact.program["steps"] if "loop_iterations" in s]
    session = load(artifact, device="lavapipe")
    for t in (100, 70000, 300):
        x = np.ones((2, t), np.float32)
        if t > 65535:
            with pytest.raises(DeviceLimitError, match=rf"runs {t} loop iterations in one invocation at \S+={t}; llvmpipe"):
                session.run([x])
            continue
        np.testing.assert_array_equal(session.run([x])[0], np.cumsum(x, axis=1))
