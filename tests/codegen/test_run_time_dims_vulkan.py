"""Run-time dims on Vulkan: the WGSL emitter takes a kernel's integer size parameters as one block
of uniforms (and symbolic ``blockIdx`` extents: the dispatch's workgroup counts), and the native Vulkan session
writes them, recomputes each launch's workgroups from the run's global size and moves only the
run's bytes (inputs, outputs, buffer copies), on lavapipe."""

import numpy as np
import pytest
from tvm import relax, tirx
from tvm.script import tirx as T

import relax_vk
from relax_vk.codegen.wgsl import WGSLEmitError, emit_kernel
from relax_vk.runtime import Session
from relax_vk.serialization.artifact import Artifact


# ---------------------------------------------------------------------------------- emitter
@T.prim_func(s_tir=True)
def _sized_kernel(a_ptr: T.handle("float32", "global"), b_ptr: T.handle("float32", "global"), n: T.int32, m: T.int64):
    a = T.decl_buffer((n,), data=a_ptr)
    b = T.decl_buffer((n,), data=b_ptr)
    with T.launch_thread("blockIdx.x", (n + 63) // 64) as bx:
        with T.launch_thread("threadIdx.x", 64) as tx:
            if bx * 64 + tx < n:
                b[bx * 64 + tx] = a[bx * 64 + tx] * T.Cast("float32", T.Cast("int32", m))


@T.prim_func(s_tir=True)
def _interleaved_kernel(n: T.int32, a_ptr: T.handle("float32", "global"), k: T.int32, b_ptr: T.handle("float32", "global"),
                        c: T.int32, d: T.int32, e: T.int32):  # fmt: skip
    a = T.decl_buffer((n,), data=a_ptr)
    b = T.decl_buffer((n,), data=b_ptr)
    with T.launch_thread("blockIdx.x", (n + 63) // 64) as bx:
        with T.launch_thread("threadIdx.x", 64) as tx:
            if bx * 64 + tx < n:
                b[bx * 64 + tx] = a[bx * 64 + tx] * T.Cast("float32", k + c + d + e)


@T.prim_func(s_tir=True)
def _symbolic_workgroup_kernel(a_ptr: T.handle("float32", "global"), n: T.int32):
    a = T.decl_buffer((n,), data=a_ptr)
    with T.launch_thread("threadIdx.x", n) as tx:
        a[tx] = T.float32(0)


@T.prim_func(s_tir=True)
def _float_scalar_kernel(a_ptr: T.handle("float32", "global"), s: T.float32):
    a = T.decl_buffer((4,), data=a_ptr)
    a[0] = s


def test_integer_parameters_are_one_uniform_block_after_the_tensors():
    shader = emit_kernel(_sized_kernel, "sized")
    assert shader.bindings == ("buffer_read", "buffer", "uniforms")
    assert "@group(0) @binding(2) var<uniform> rvk_args: array<vec4<i32>, 1>;" in shader.source
    assert shader.source.count("var<uniform>") == 1
    assert "let n: i32 = rvk_args[0].x;" in shader.source and "let m: i32 = rvk_args[0].y;" in shader.source  # (int64 sizes compute in i32)
    # the symbolic grid is the dispatch's; the workgroup size stays a constant
    assert shader.workgroup == (64, 1, 1)
    assert "i32(rvk_wid.x)" in shader.source


def test_integers_between_the_tensors_are_words_of_the_block_in_parameter_order():
    shader = emit_kernel(_interleaved_kernel, "interleaved")
    assert shader.bindings == ("buffer_read", "buffer", "uniforms")  # (the tensors first, in their order)
    assert "@group(0) @binding(0) var<storage, read> a_ptr" in shader.source
    assert "@group(0) @binding(2) var<uniform> rvk_args: array<vec4<i32>, 2>;" in shader.source
    for name, word in (("n", "[0].x"), ("k", "[0].y"), ("c", "[0].z"), ("d", "[0].w"), ("e", "[1].x")):
        assert f"let {name}: i32 = rvk_args{word};" in shader.source


@pytest.mark.parametrize(
    "func, message",
    [
        (_symbolic_workgroup_kernel, "threadIdx.x has a symbolic extent n"),
        (_float_scalar_kernel, "parameter s is a float32 scalar"),
    ],
)
def test_what_uniforms_cannot_carry_fails_naming_it(func, message):
    with pytest.raises(WGSLEmitError, match=message):
        emit_kernel(func, "k")


# ------------------------------------------------------------------------------- end to end
def _with_range(mod, name, lo, hi):
    mod["main"] = mod["main"].with_attr("tir_var_upper_bound", {name: hi}).with_attr("tir_var_lower_bound", {name: lo})
    return mod


def _conv_model(weight):
    W = tirx.Var("W", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([1, 4, 6, W], "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.relu(relax.op.nn.conv2d(x, relax.const(weight), padding=[1, 1, 1, 1])))
            out = bb.emit_output(bb.emit(relax.op.add(y, y)))
        bb.emit_func_output(out)
    return _with_range(bb.get(), "W", 3, 200)


def _conv_reference(x, weight):
    _, _, H, W = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, weight.shape[0], H, W), np.float32)
    for kh in range(3):
        for kw in range(3):
            out += np.einsum("oc,nchw->nohw", weight[:, :, kh, kw], xp[:, :, kh : kh + H, kw : kw + W])
    return 2 * np.maximum(out, 0)


def test_conv_runs_at_every_width_of_its_range(lavapipe):
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((8, 4, 3, 3)).astype("float32")
    artifact = relax_vk.build(_conv_model(weight), "vulkan").artifact()
    launch = next(s for s in artifact.program["steps"] if s["op"] == "launch")
    assert launch["scalars"] and launch["global"]
    kernel = next(k for k in artifact.program["kernels"] if k["name"] == launch["kernel"])
    assert kernel["bindings"][-1] == "uniforms" and "uniform" not in kernel["bindings"]
    session = Session(artifact, device="lavapipe")
    objects = session.device_objects
    # new widths, the range's ends, repeats (a run recorded ahead at the last width must not be reused)
    for width in (17, 200, 3, 64, 64, 17):
        x = rng.standard_normal((1, 4, 6, width)).astype("float32")
        (out,) = session.run([x])
        assert out.shape == (1, 8, 6, width)
        np.testing.assert_allclose(out, _conv_reference(x, weight), rtol=1e-5, atol=1e-4)
        assert session.dim_values == {"W": width}
    assert session.device_objects == objects  # runs create no device objects
    with pytest.raises(ValueError, match=r"outside W's declared range 3\.\.200"):
        session.run([np.zeros((1, 4, 6, 201), np.float32)])


def _reduce_matmul_model(weight):
    N = tirx.Var("N", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([2, 3, 16, N], "float32"))
    y = relax.Var("y", relax.TensorType([N, 8], "float32"))
    with bb.function("main", [x, y]):
        with bb.dataflow():
            total = bb.emit(relax.op.sum(x, axis=3))  # over the run-time axis
            mean = bb.emit(relax.op.mean(x, axis=2))  # keeping it
            proj = bb.emit(relax.op.matmul(relax.op.permute_dims(x, [0, 1, 3, 2]), relax.const(weight)))
            inner = bb.emit(relax.op.matmul(relax.op.permute_dims(y, [1, 0]), y))  # a reduction over it
            out = bb.emit_output(relax.Tuple([total, mean, proj, inner]))
        bb.emit_func_output(out)
    return _with_range(bb.get(), "N", 1, 150)


def test_reductions_and_matmuls_over_a_run_time_dim(lavapipe):
    rng = np.random.default_rng(1)
    weight = rng.standard_normal((16, 12)).astype("float32")
    artifact = relax_vk.build(_reduce_matmul_model(weight), "vulkan").artifact()
    session = Session(artifact, device="lavapipe")
    objects = session.device_objects
    for n in (5, 150, 1, 77, 77, 5):
        x = rng.standard_normal((2, 3, 16, n)).astype("float32")
        y = rng.standard_normal((n, 8)).astype("float32")
        outs = session.run([x, y])
        refs = [x.sum(3), x.mean(2), np.transpose(x, (0, 1, 3, 2)) @ weight, y.T @ y]
        for out, ref in zip(outs, refs):
            assert out.shape == ref.shape
            np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)
    assert session.device_objects == objects


def test_a_kernel_of_more_integers_than_a_stage_may_bind_uniforms_runs(lavapipe):
    """A concat of 16 tensors each of its own run-time length is one kernel of 31 integer arguments.
    As a uniform binding each it was refused at load past lavapipe's 15 uniform buffers a stage
    (WebGPU's default: 12); as one block of words it runs, right at every mix of lengths."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from relax_vk.frontends import from_onnx

    n = 16
    inputs = [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [1, f"C{i}", 4]) for i in range(n)]
    graph = helper.make_graph([helper.make_node("Concat", [f"x{i}" for i in range(n)], ["c"], axis=1), helper.make_node("Relu", ["c"], ["y"])],
                              "concat", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, None, 4])])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    compiled = relax_vk.build(from_onnx(model, {f"x{i}": (1, f"C{i}", 4) for i in range(n)}, dims={f"C{i}": (1, 8) for i in range(n)}), "vulkan")
    (shader,) = compiled.shaders.values()
    assert shader.bindings == ("buffer", *["buffer_read"] * n, "uniforms") and shader.source.count("rvk_args[") > 15
    session = Session(compiled.artifact(), device="lavapipe")
    rng = np.random.default_rng(3)
    for lengths in (rng.integers(1, 9, n), [8] * n, [1] * n):
        xs = [rng.standard_normal((1, int(c), 4)).astype("float32") for c in lengths]
        (out,) = session.run(xs)
        np.testing.assert_array_equal(out, np.maximum(np.concatenate(xs, axis=1), 0))


def _run_time_copy_program(rows, bound):
    """input [rows, W] -> a buffer-to-buffer copy -> output, W in 1..bound (no kernels)."""
    nbytes = rows * bound * 4
    tensor = {"dtype": "float32", "scope": "global", "image": None, "shape": [rows, bound], "shape_expr": [rows, "W"], "bytes": nbytes}
    tensors = [dict(tensor, id=0, name="in", kind="input"), dict(tensor, id=1, name="out", kind="intermediate")]
    program = {"format": "relax_vk.program", "target": "vulkan", "model": {}, "dims": [{"name": "W", "min": 1, "max": bound}],
               "tensors": tensors, "kernels": [], "steps": [{"op": "copy", "src": 0, "dst": 1}], "inputs": [0], "outputs": [1]}  # fmt: skip
    return Artifact(program, "")


@pytest.mark.parametrize("rows, bound, widths", [(16, 40, (40, 3, 17, 17, 1)), (1024, 4200, (4200, 4097, 5, 4200))])
def test_buffer_copies_of_run_time_shape_copy_the_runs_words(lavapipe, rows, bound, widths):
    # (1024 x 4200 words: 67200 workgroups of 64, more than a row of the grid: two rows)
    session = Session(_run_time_copy_program(rows, bound), device="lavapipe")
    objects = session.device_objects
    rng = np.random.default_rng(2)
    for width in widths:
        x = rng.standard_normal((rows, width)).astype("float32")
        (out,) = session.run([x])
        np.testing.assert_array_equal(out, x)
    assert session.device_objects == objects


def test_a_session_warms_up_at_the_smallest_sizes_and_leaves_nothing_set(lavapipe, monkeypatch):
    """A Vulkan session of a run-time-dims program runs twice at the dims' smallest values when it
    loads (on a GPU adapter by default; here forced on lavapipe): after it no dim is bound, no
    output or profile is left, and every size runs right, the first included."""
    monkeypatch.setenv("RVK_VULKAN_WARM_UP", "1")
    rng = np.random.default_rng(4)
    weight = rng.standard_normal((8, 4, 3, 3)).astype("float32")
    artifact = relax_vk.build(_conv_model(weight), "vulkan").artifact()
    session = Session(artifact, device="lavapipe", profile=True)
    assert session.dim_values == {"W": None} or session.dim_values == {"W": -1}, session.dim_values
    assert not session.last_profile
    for width in (64, 3, 200):
        x = rng.standard_normal((1, 4, 6, width)).astype("float32")
        (out,) = session.run([x])
        np.testing.assert_allclose(out, _conv_reference(x, weight), rtol=1e-5, atol=1e-4)
        assert session.dim_values == {"W": width} and len(session.last_profile) == len(artifact.program["steps"])
