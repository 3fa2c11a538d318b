"""llvmpipe's loop cap: lavapipe ends a shader invocation's loops after 65535 iterations of all of
them together and returns what they had computed (a mean over 20,000 rows of four channels in one
invocation came out 0.63 off). The emitter bounds each kernel's iterations, the artifact records
those past the cap, and the session refuses such a kernel on llvmpipe by name; pocl runs it right."""

import numpy as np
import pytest
from tvm.script import tirx as T

import relax_vk
from relax_vk.codegen.wgsl.emit import loop_iterations
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
