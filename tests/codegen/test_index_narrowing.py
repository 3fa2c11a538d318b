"""NarrowIndices: a Vulkan kernel's int64 floordiv/floormod of a table entry is lowered in
int32, so the WGSL computes the exact quotient and remainder (run on lavapipe against numpy);
OpenCL kernels of a static size keep their int64 indices, those of a run-time size are narrowed
(their sizes passed as int32) and a tensor past 32-bit indices is refused."""

import numpy as np
import pytest
import tvm
from tvm import tirx
from tvm.s_tir import pipeline as s_tir_pipeline
from tvm.script import tirx as T

import relax_vk
from relax_vk.codegen import tir_pipeline
from relax_vk.codegen.index_narrowing import NarrowIndices
from relax_vk.codegen.wgsl import WGSLEmitError, emit_kernel
from relax_vk.core.target import lowering_target

N, DIV, OFFSET = 64, 288, 8


@T.prim_func
def _gather_by_table(table_ptr: T.handle("int32", "global"), src_ptr: T.handle("int32", "global"), out_ptr: T.handle("int32", "global")):
    # out[i] = src[table[i] // 288 + 8] * 1000 + src[table[i] % 288]: a token gather's read through
    # a table (int64 index arithmetic on an int32 entry, whose bound is all of int32)
    T.func_attr({"global_symbol": "gather_by_table", "tirx.noalias": True, "calling_conv": 2})
    table = T.decl_buffer((N,), "int32", data=table_ptr)
    src = T.decl_buffer((DIV,), "int32", data=src_ptr)
    out = T.decl_buffer((N,), "int32", data=out_ptr)
    tx = T.launch_thread("threadIdx.x", T.int64(N))
    out[tx] = (
        src[T.floordiv(T.Cast("int64", table[tx]), T.int64(DIV)) + T.int64(OFFSET)] * 1000
        + src[T.floormod(T.Cast("int64", table[tx]), T.int64(DIV))]
    )


def _finalized(api: str, passes=None) -> tirx.PrimFunc:
    """The kernel after the device finalisation passes (relax_vk's, or ``passes``) for ``api``."""
    target = lowering_target(relax_vk.target.vulkan() if api == "vulkan" else relax_vk.target.opencl())
    mod = tvm.IRModule({"gather_by_table": _gather_by_table.with_attr("target", target)})
    with target:
        return (passes or tir_pipeline._finalize_device_passes())(mod)["gather_by_table"]


def test_without_narrowing_the_lowered_int64_floordiv_is_refused_not_truncated():
    # LowerIntrin's int64 floordiv adds 288 * 7456541 = 2147483808 to the entry: past i32
    lowered = _finalized("vulkan", s_tir_pipeline.finalize_device_passes())
    with pytest.raises(WGSLEmitError, match="integer constant 2147483808 does not fit WGSL's i32"):
        emit_kernel(lowered, "gather_by_table")


def test_opencl_kernels_of_a_static_size_keep_int64_indices():
    assert "int64" in str(_finalized("opencl"))
    assert "int64" not in str(_finalized("vulkan").body)


def test_narrowed_floordiv_and_floormod_are_exact_on_lavapipe():
    import wgpu

    from helpers import wgpu_lavapipe_adapter

    shader = emit_kernel(_finalized("vulkan"), "gather_by_table")
    rng = np.random.default_rng(0)
    # negative entries too (a floordiv rounds them down): every quotient + 8 and remainder in range
    table = np.concatenate([[0, 1, -1, DIV - 1, DIV, -DIV, -DIV - 1, 7 * DIV - 1, -OFFSET * DIV]], axis=0)
    table = np.concatenate([table, rng.integers(-OFFSET * DIV, 7 * DIV, N - len(table))]).astype("int32")
    src = np.arange(DIV, dtype="int32")
    device = wgpu_lavapipe_adapter().request_device_sync()
    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC
    bufs = [device.create_buffer_with_data(data=a.tobytes(), usage=usage) for a in (table, src, np.zeros(N, "int32"))]
    pipeline = device.create_compute_pipeline(layout="auto", compute={"module": device.create_shader_module(code=shader.source), "entry_point": "main"})
    group = device.create_bind_group(
        layout=pipeline.get_bind_group_layout(0), entries=[{"binding": i, "resource": {"buffer": b}} for i, b in enumerate(bufs)]
    )
    encoder = device.create_command_encoder()
    compute = encoder.begin_compute_pass()
    compute.set_pipeline(pipeline)
    compute.set_bind_group(0, group)
    compute.dispatch_workgroups(1, 1, 1)
    compute.end()
    device.queue.submit([encoder.finish()])
    out = np.frombuffer(bytes(device.queue.read_buffer(bufs[2])), dtype="int32")
    expected = (np.floor_divide(table, DIV) + OFFSET) * 1000 + np.mod(table, DIV)
    np.testing.assert_array_equal(out, expected)


def test_an_index_constant_past_int32_is_left_for_the_emitter_to_refuse():
    @T.prim_func
    def far(a_ptr: T.handle("float32", "global")):
        T.func_attr({"global_symbol": "far", "calling_conv": 2})
        a = T.decl_buffer((16,), "float32", data=a_ptr)
        tx = T.launch_thread("threadIdx.x", T.int64(16))
        a[(tx + T.int64(2**33)) % T.int64(16)] = T.float32(1)

    func = far.with_attr("target", lowering_target(relax_vk.target.vulkan()))
    assert NarrowIndices()(tvm.IRModule({"far": func}))["far"].same_as(func)
    with pytest.raises(WGSLEmitError, match="kernel far: integer constant 8589934592 does not fit WGSL's i32"):
        emit_kernel(func, "far")


def test_opencl_kernels_of_a_run_time_size_take_32_bit_sizes_and_stay_right(pocl):
    """A kernel of a run-time size is narrowed on OpenCL too (its sizes were ``long``, and all its
    index arithmetic 64-bit): the source has no ``long``, the program passes its size arguments as
    int32, and it is right at several sizes."""
    from helpers import exp_rows_module

    from relax_vk.runtime import load

    artifact = relax_vk.build(exp_rows_module(4096), "opencl").artifact()
    assert "long" not in artifact.source
    scalars = [s for step in artifact.program["steps"] for s in step.get("scalars", [])]
    assert scalars and {s["dtype"] for s in scalars} == {"int32"}
    session = load(artifact, device=pocl)
    for rows in (1, 37, 4096):
        v = np.random.default_rng(rows).standard_normal((rows, 256)).astype(np.float32)
        np.testing.assert_allclose(session.run([v])[0], np.exp(v), rtol=1e-6)


def test_a_run_time_size_past_32_bit_indices_is_refused_on_opencl():
    from helpers import exp_rows_module

    from relax_vk.codegen.export import ExportError

    with pytest.raises(ExportError, match=r"tensor x has 2147483648 elements; OpenCL kernels of a run-time size index with 32-bit integers"):
        relax_vk.build(exp_rows_module(2**23), relax_vk.target.opencl(max_buffer_bytes=2**40, max_alloc_bytes=2**40)).artifact()


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ArgMax", "ArgMin"])
def test_int64_extremes_start_vulkan_reductions(op, lavapipe):
    """An int64 max, min, argmax or argmin starts from int64's extreme value, which NarrowIndices
    refused and WGSL cannot print (the build failed); a Vulkan kernel holds int64 values in 32 bits,
    so int32's extreme starts it: the results equal onnxruntime's on lavapipe."""
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    from relax_vk.frontends.onnx import from_onnx
    from relax_vk.runtime import load

    x = np.random.default_rng(0).integers(-100, 100, (2, 3, 5)).astype("int64")
    if op.startswith("Arg"):
        node, inits = helper.make_node(op, ["x"], ["y"], axis=1, keepdims=0), []
    else:
        node, inits = helper.make_node(op, ["x", "axes"], ["y"], keepdims=0), [numpy_helper.from_array(np.array([1], "int64"), "axes")]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.INT64, [2, 3, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, [2, 5])], inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(load(relax_vk.build(from_onnx(model), "vulkan").artifact(), device="lavapipe").run([x])[0], want)


def test_int64_data_divisions_build_and_are_exact_on_vulkan(lavapipe):
    """``(x.long() % 3).prod(2)``: TVM's simplifier moved the int64 cast inside the remainder and
    ``LowerIntrin`` wrote it with an offset past int32 (2147483649), which the WGSL emitter refused;
    divisions of int64 data are int32's now (Int64DivisionsAsInt32), exact for negative values too."""
    torch = pytest.importorskip("torch")
    from relax_vk.frontends import from_torch
    from relax_vk.runtime import load

    class Remainders(torch.nn.Module):
        def forward(self, x):
            v = (x * 10).long()
            return (v % 3).prod(dim=2, keepdim=True), torch.div(v, 4, rounding_mode="floor").sum(1)

    x = torch.randn(1, 5, 4, 4, generator=torch.Generator().manual_seed(0))
    got = load(relax_vk.build(from_torch(Remainders(), (x,)), "vulkan").artifact(), device="lavapipe").run([x.numpy()])
    for g, want in zip(got, Remainders()(x)):
        np.testing.assert_array_equal(g, want.numpy())
