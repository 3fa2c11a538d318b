"""Linear layers over run-time rows (a decoder's [S, K] @ [K, N], S per call): relax_vk's split-K
schedule takes them, right at every row count on pocl and lavapipe; the verifier refuses a schedule
whose threads add into the same output element at once (the race a CPU driver hides)."""

import numpy as np
import pytest
import tvm
from tvm import relax, s_tir, tirx

import relax_vk
from relax_vk.core.dims import with_dim_ranges
from relax_vk.runtime import Session
from relax_vk.schedules.linear import is_run_time_linear, schedule_linear
from relax_vk.schedules.verify import kernel_problems

S, T = tirx.Var("S", "int64"), tirx.Var("T", "int64")
W = np.random.default_rng(0).standard_normal((96, 40)).astype("float32") * 0.1


def _module(epilogue: str, batch: tuple = ()):
    x = relax.Var("x", relax.TensorType((*batch, S, 96), "float32"))
    r = relax.Var("r", relax.TensorType((*batch, S, 40), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, r]):
        with bb.dataflow():
            y = bb.emit(relax.op.matmul(x, relax.const(W)))
            if epilogue == "add":
                y = bb.emit(relax.op.add(y, r))
            if epilogue == "swiglu":  # (not a chain: silu reads the matmul's output twice)
                y = bb.emit(relax.op.multiply(bb.emit(relax.op.nn.silu(y)), r))
            out = bb.emit_output(relax.Tuple([y, r]) if epilogue == "none" else y)
        bb.emit_func_output(out)
    return with_dim_ranges(bb.get(), {"S": (1, 16)})


def _kernel(x_shape, w_shape, w_const=True):
    x = relax.Var("x", relax.TensorType(x_shape, "float32"))
    params = [x]
    w = relax.const(np.zeros([int(d) for d in w_shape], np.float32)) if w_const else relax.Var("w", relax.TensorType(w_shape, "float32"))
    params += [] if w_const else [w]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            y = bb.emit_output(relax.op.matmul(x, w))
        bb.emit_func_output(y)
    mod = relax.transform.LegalizeOps()(bb.get())
    return next(f for _, f in mod.functions_items() if isinstance(f, tirx.PrimFunc))


@pytest.mark.parametrize(
    "x_shape, w_shape, w_const, expected",
    [
        ((S, 64), (64, 96), True, True),
        ((1, 64), (64, 96), True, True),
        ((4, 64), (64, 96), True, False),
        ((2, S, 16), (2, 16, T), False, False),
        ((1, S, 64), (64, 96), True, True),  # a sequence's unit batch: its axis goes to the workgroups
        ((2, S, 64), (64, 96), True, False),
        ((1, 4, 64), (64, 96), True, False),
    ],
)
def test_which_matmuls_are_linear_layers_over_run_time_rows(x_shape, w_shape, w_const, expected):
    assert is_run_time_linear(_kernel(x_shape, w_shape, w_const)) is expected


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_a_sequence_with_a_unit_batch_is_a_linear_layer(target, device, request):
    """``[1, S, K] @ [K, N]`` (a CTC head over a line's run-time width): the linear schedule, right at
    every length (TVM's generic reduction rule gave it a workgroup per output)."""
    request.getfixturevalue(device)
    artifact = relax_vk.build(_module("add", batch=(1,)), target).artifact()
    assert [k.get("schedule") for k in artifact.program["kernels"] if "matmul" in k["name"]] == ["linear"]
    session = Session(artifact, device=device)
    rng = np.random.default_rng(2)
    for rows in (1, 5, 16):
        x, r = rng.standard_normal((1, rows, 96)).astype("float32"), rng.standard_normal((1, rows, 40)).astype("float32")
        np.testing.assert_allclose(session.run([x, r])[0], x @ W + r, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("epilogue", ["none", "add", "swiglu"])
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_linear_layers_over_run_time_rows_are_right_at_every_row_count(epilogue, target, device, request):
    request.getfixturevalue(device)
    artifact = relax_vk.build(_module(epilogue), target).artifact()
    assert [k.get("schedule") for k in artifact.program["kernels"] if "matmul" in k["name"]] == ["linear"]
    session = Session(artifact, device=device)
    rng = np.random.default_rng(1)
    for rows in (1, 7, 16):
        x, r = rng.standard_normal((rows, 96)).astype("float32"), rng.standard_normal((rows, 40)).astype("float32")
        got = session.run([x, r])[0]
        want = x @ W + (r if epilogue == "add" else 0)
        if epilogue == "swiglu":
            want = want / (1 + np.exp(-want)) * r
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_schedule_whose_threads_add_into_one_output_element_is_refused():
    """The schedule's total goes through a register; the form it had first (the total accumulated in
    the output buffer by all of threadIdx.y at once: right on pocl, wrong on an H200) is refused."""
    assert kernel_problems(schedule_linear(_kernel((S, 64), (64, 96)))) == []
    assert kernel_problems(_racy_total()) == ["block total accumulates into global memory from threads that do not index what it writes (threadIdx.y): a race"]


def _racy_total():
    """A workgroup of 32 x 8 threads whose threadIdx.y never indexes the sum it accumulates in global memory."""
    @tvm.script.ir_module
    class Mod:
        @tvm.script.tirx.prim_func(s_tir=True)
        def main(a: tvm.script.tirx.Buffer((8, 32), "float32"), out: tvm.script.tirx.Buffer((32,), "float32")):
            for tx in tvm.script.tirx.thread_binding(32, thread="threadIdx.x"):
                for ty in tvm.script.tirx.thread_binding(8, thread="threadIdx.y"):
                    with tvm.script.tirx.sblock("copy"):
                        v = tvm.script.tirx.axis.spatial(32, tx)
                        w = tvm.script.tirx.axis.spatial(8, ty)
                        a[w, v] = a[w, v] + tvm.script.tirx.float32(1)
                for k in range(8):
                    with tvm.script.tirx.sblock("total"):
                        v = tvm.script.tirx.axis.spatial(32, tx)
                        r = tvm.script.tirx.axis.reduce(8, k)
                        with tvm.script.tirx.init():
                            out[v] = tvm.script.tirx.float32(0)
                        out[v] = out[v] + a[r, v]
    return Mod["main"]


def _packed_module(K: int, N: int):
    from relax_vk.frontends.blockwise import BlockwiseFormat

    fmt = BlockwiseFormat(K, N, 4, 32)
    x = relax.Var("x", relax.TensorType((S, K), "float32"))
    codes = relax.Var("codes", relax.TensorType((N, fmt.k_blocks, 4), "uint32"))
    scales = relax.Var("scales", relax.TensorType((N * fmt.k_blocks,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, codes, scales]):
        with bb.dataflow():
            y = bb.emit_output(bb.call_te(lambda X, B, C: fmt.matmul(X, B, C), x, codes, scales, primfunc_name_hint="matmul_int4"))
        bb.emit_func_output(y)
    return with_dim_ranges(bb.get(), {"S": (1, 8)})


@pytest.mark.parametrize("K, vulkan_lanes", [(1024, 16), (2048, 32), (160, 32)])
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_4bit_weights_along_k_are_read_in_runs_on_vulkan(K, vulkan_lanes, target, device, request):
    """Vulkan lanes take runs of 8 consecutive terms (16 lanes a row when 32 would leave a lane
    fewer than 8 runs; a length that is no multiple of 128 keeps lanes on consecutive terms), OpenCL
    keeps lanes on consecutive terms: right at every row count either way."""
    request.getfixturevalue(device)
    N = 24
    artifact = relax_vk.build(_packed_module(K, N), target).artifact()
    (kernel,) = [k for k in artifact.program["kernels"] if "matmul" in k["name"]]
    assert kernel["schedule"] == "linear" and kernel["local"] == [vulkan_lanes if target == "vulkan" else 32, 8, 1]
    rng = np.random.default_rng(K)
    packed = rng.integers(0, 256, (N, K // 32, 16), dtype=np.uint8)
    scales = rng.random(N * K // 32).astype("float32") * 0.01
    codes = ((packed[..., :, None] >> np.array([0, 4], np.uint8)) & 15).reshape(N, K // 32, 32).astype(np.float32) - 8
    weight = (codes * scales.reshape(N, -1, 1)).reshape(N, K)
    session = Session(artifact, device=device)
    for rows in (1, 5):
        x = rng.standard_normal((rows, K)).astype("float32")
        np.testing.assert_allclose(session.run([x, packed.view("<u4"), scales])[0], x @ weight.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("quantized", [False, True])
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_a_pair_of_products_summed_together_feeds_one_epilogue(quantized, target, device, request):
    """A gated MLP's gate and up products as one pair reduction with SwiGLU as its epilogue
    (hf_decoder._gate_up): both partial sums go through workgroup memory, and each output holds its
    gate and up side by side; float and 4-bit weights (read in runs on Vulkan), right at every row
    count."""
    from relax_vk.frontends.blockwise import as_words, pack_symmetric, unpack
    from relax_vk.frontends.hf_decoder import _gate_up

    request.getfixturevalue(device)
    K, N = 256, 64
    rng = np.random.default_rng(5)
    gate, up = (rng.standard_normal((2, K, N)) * 0.1).astype("float32")
    x = relax.Var("x", relax.TensorType((S, K), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            if quantized:
                packed = [pack_symmetric(m, bits=4, block=32, scale_dtype="float32") for m in (gate, up)]
                gate, up = (unpack(*p).astype("float32") for p in packed)
                weights = [t for fmt, B, scales in packed for t in (relax.const(as_words(B)), relax.const(scales))]
                call = bb.call_te(_gate_up(K, N, "float32", [p[0] for p in packed], False), x, *weights)
            else:
                call = bb.call_te(_gate_up(K, N, "float32", None, False), x, *(relax.const(np.ascontiguousarray(m.T)) for m in (gate, up)))
            out = bb.emit_output(call)
        bb.emit_func_output(out)
    artifact = relax_vk.build(with_dim_ranges(bb.get(), {"S": (1, 8)}), target).artifact()
    assert [k.get("schedule") for k in artifact.program["kernels"]] == ["linear"]
    session = Session(artifact, device=device)
    for rows in (1, 3, 8):
        xs = rng.standard_normal((rows, K)).astype("float32")
        g = xs @ gate
        np.testing.assert_allclose(session.run([xs])[0], g / (1 + np.exp(-g)) * (xs @ up), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_float_weights_in_the_checkpoint_layout_are_summed_along_k(target, device, request):
    """A decoder's float ``x @ W.T`` with ``W`` kept ``[N, K]`` (hf_decoder._rows_times): the
    schedule's lanes split each output's sum and read adjacent weights (in runs on Vulkan), as for
    4-bit blocks; right at every row count."""
    from relax_vk.frontends.hf_decoder import _rows_times

    request.getfixturevalue(device)
    K, N = 512, 48
    weight = (np.random.default_rng(6).standard_normal((N, K)) * 0.1).astype("float32")
    x = relax.Var("x", relax.TensorType((S, K), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.call_te(_rows_times(K, N), x, relax.const(weight)))
        bb.emit_func_output(out)
    artifact = relax_vk.build(with_dim_ranges(bb.get(), {"S": (1, 8)}), target).artifact()
    (kernel,) = artifact.program["kernels"]
    assert kernel["schedule"] == "linear" and kernel["local"][1] == 8  # (outputs on y, lanes on x along k)
    session = Session(artifact, device=device)
    for rows in (1, 3, 8):
        xs = np.random.default_rng(rows).standard_normal((rows, K)).astype("float32")
        np.testing.assert_allclose(session.run([xs])[0], xs @ weight.T, rtol=1e-5, atol=1e-5)
