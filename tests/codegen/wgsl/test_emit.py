"""The WGSL emitter (relax_vk.codegen.wgsl): texture kernels become textureLoad/textureStore shaders, math
intrinsics and WGSL's missing helpers compute what TVM's CPU build computes (run on lavapipe), and
what WGSL cannot express fails naming the kernel and the construct."""

import numpy as np
import pytest
import tvm
from helpers import module, run_time_conv_module, tensor
from tvm import relax
from tvm.script import tirx as T

import relax_vk
from relax_vk.analysis.reference import run_on_cpu
from relax_vk.codegen.wgsl import WGSLEmitError, emit_kernel
from relax_vk.core.errors import UnsupportedError
from relax_vk.models import build_example
from relax_vk.runtime import load


def test_texture_kernels_read_sampled_and_write_storage_textures():
    compiled = relax_vk.build(build_example("rfc-conv2d"), target="vulkan")
    conv = next(s for name, s in compiled.shaders.items() if name.startswith("conv2d_NCHWc_OIHWo"))
    # output texture, input texture, weight texture, in parameter order; then the origins of the
    # output and input in their shared images (codegen/texture_origins.py), one uniform block
    assert conv.bindings == ("storage_texture", "texture", "texture", "uniforms")
    assert "texture_storage_2d_array<rgba32float, write>" in conv.source
    assert conv.source.count("texture_2d_array<f32>") == 2
    assert "textureStore(" in conv.source and "textureLoad(" in conv.source
    assert conv.workgroup == (64, 1, 1)  # relax_vk's conv schedule: output texel blocks on the grid's y axis
    assert "rvk_wid.y" in conv.source
    # the packing transform reads a buffer (bound read-only) and writes a texture; the unpacking
    # transform reads a texture and writes a buffer
    pack = compiled.shaders["te_layout_transform_kernel"]
    assert pack.bindings == ("storage_texture", "buffer_read", "uniforms")
    assert "var<storage, read> x_ptr: array<f32>;" in pack.source
    assert compiled.shaders["te_layout_transform2_kernel"].bindings == ("texture", "buffer", "uniforms")


def _math_module():
    def body(bb, x, i):
        f = lambda v: relax.const(v, "float32")  # noqa: E731
        n = lambda v: relax.const(v, "int32")  # noqa: E731
        ops = [
            relax.op.erf(x),
            relax.op.round(relax.op.multiply(x, f(2.5))),
            relax.op.sigmoid(x),
            relax.op.tanh(x),
            relax.op.log(relax.op.add(relax.op.abs(x), f(1.0))),
            relax.op.rsqrt(relax.op.add(relax.op.abs(x), f(0.5))),
            relax.op.floor_mod(x, f(0.7)),
            relax.op.floor_divide(i, n(3)),
            relax.op.floor_mod(i, n(3)),
            relax.op.floor_divide(i, n(-4)),
        ]
        return relax.Tuple([bb.emit(op) for op in ops])

    return module([tensor("x", (1, 4, 8, 8)), tensor("i", (1, 4, 8, 8), "int32")], body)


def test_math_intrinsics_and_helpers_match_tvm_cpu_on_lavapipe():
    mod = _math_module()
    compiled = relax_vk.build(mod, target="vulkan")
    source = compiled.source
    # WGSL has no erf: a relax_vk helper (TVM's LowerIntrin has already turned floordiv/floormod
    # into truncating division with let-bound corrections, which become let statements)
    assert "fn rvk_erf(" in source
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((1, 4, 8, 8)) * 2).astype("float32")
    x.flat[:4] = [0.2, -0.2, 0.6, -1.0]  # x * 2.5 = 0.5, -0.5, 1.5, -2.5: rounding ties as TVM's CPU build does
    i = rng.integers(-50, 50, size=(1, 4, 8, 8)).astype("int32")
    outputs = load(compiled.artifact(), device="lavapipe").run([x, i])
    reference = run_on_cpu(mod, [x, i])
    assert len(outputs) == len(reference) == 10
    for k, (out, ref) in enumerate(zip(outputs, reference)):
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=2e-6, err_msg=f"output {k}")


@T.prim_func(s_tir=True)
def _float64_kernel(a_ptr: T.handle("float64", "global")):
    a = T.decl_buffer((4,), "float64", data=a_ptr)
    a[0] = T.float64(1)


@T.prim_func(s_tir=True)
def _scalar_param_kernel(a_ptr: T.handle("float32", "global"), n: T.float32):
    a = T.decl_buffer((4,), data=a_ptr)
    a[0] = n


@T.prim_func(s_tir=True)
def _wide_vector_kernel(a_ptr: T.handle("float16", "global")):
    a = T.decl_buffer((16,), "float16", data=a_ptr)
    a[T.Ramp(8, 1, 8)] = a[T.Ramp(0, 1, 8)] * T.Broadcast(T.float16(0.5), 8)


@T.prim_func(s_tir=True)
def _int16_buffer_kernel(a_ptr: T.handle("int16", "global")):
    a = T.decl_buffer((4,), "int16", data=a_ptr)
    a[0] = a[1]


@T.prim_func(s_tir=True)
def _extern_call_kernel(a_ptr: T.handle("float32", "global")):
    a = T.decl_buffer((4,), data=a_ptr)
    a[0] = T.call_pure_extern("float32", "my_special_fn", a[1])


@T.prim_func(s_tir=True)
def _read_write_texture_kernel(t_ptr: T.handle("float32", "global.texture")):
    t = T.decl_buffer((64,), data=t_ptr, scope="global.texture")
    texel = T.call_intrin("float32x4", "tirx.texture2d_load", t.data, 1, 0, 0, 128, T.Ramp(0, 1, 4))
    T.evaluate(T.call_intrin("handle", "tirx.texture2d_store", t.data, 0, 0, 0, 128, texel))


@pytest.mark.parametrize(
    "func, message",
    [
        (_float64_kernel, "dtype float64 has no WGSL type"),
        (_scalar_param_kernel, "parameter n is a float32 scalar"),
        (_extern_call_kernel, "math function my_special_fn has no WGSL translation"),
        (_int16_buffer_kernel, "buffer a_ptr holds int16; WGSL storage buffers hold 32-bit values"),
        (_read_write_texture_kernel, "texture t_ptr is read and written by one kernel"),
    ],
)
def test_what_wgsl_cannot_express_fails_naming_kernel_and_construct(func, message):
    with pytest.raises(WGSLEmitError, match=message) as err:
        emit_kernel(func, "my_kernel")
    assert "kernel my_kernel" in str(err.value)


def test_float64_model_fails_at_build_naming_the_op():
    mod = module([tensor("x", (1, 4, 8, 8), "float64")], lambda bb, x: relax.op.exp(x))
    with pytest.raises(UnsupportedError, match=r"relax.exp \(computing \w+\) works in float64, which vulkan kernels cannot"):
        relax_vk.build(mod, target="vulkan")
    # OpenCL keeps the same model in buffers and builds it
    assert relax_vk.build(mod, target="opencl").kernels


@T.prim_func(s_tir=True)
def _overlapping_wide_store_kernel(a_ptr: T.handle("float16", "global")):
    a = T.decl_buffer((16,), "float16", data=a_ptr)
    a[T.Ramp(1, 1, 8)] = a[T.Ramp(0, 1, 8)]


def test_vectors_wider_than_wgsl_are_written_lane_by_lane():
    shader = emit_kernel(_wide_vector_kernel, "wide")
    assert shader.source.splitlines()[1] == "enable f16;"
    for k in range(8):
        assert f"let a_ptr_l{k} = (a_ptr[(0 + {k} * 1)] * 0.5h);" in shader.source
        assert f"a_ptr[(8 + {k} * 1)] = a_ptr_l{k};" in shader.source


def _dispatch_once(device, source: str, buffers) -> None:
    """Run ``source``'s ``main`` as one workgroup with ``buffers`` bound at 0, 1, ... (submitted)."""
    pipeline = device.create_compute_pipeline(layout="auto", compute={"module": device.create_shader_module(code=source), "entry_point": "main"})
    entries = [{"binding": i, "resource": {"buffer": buf}} for i, buf in enumerate(buffers)]
    group = device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=entries)
    encoder = device.create_command_encoder()
    compute = encoder.begin_compute_pass()
    compute.set_pipeline(pipeline)
    compute.set_bind_group(0, group)
    compute.dispatch_workgroups(1, 1, 1)
    compute.end()
    device.queue.submit([encoder.finish()])


def test_overlapping_wide_store_reads_every_lane_first(lavapipe_device):
    # a[1:9] = a[0:9]: TIR reads the whole vector before storing; lane-by-lane code must too
    import wgpu

    shader = emit_kernel(_overlapping_wide_store_kernel, "shift")
    source = shader.source
    device = lavapipe_device
    data = np.arange(16, dtype="float16")
    buf = device.create_buffer_with_data(data=data.tobytes(), usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
    _dispatch_once(device, source, [buf])
    out = np.frombuffer(bytes(device.queue.read_buffer(buf)), dtype="float16")
    expected = data.copy()
    expected[1:9] = data[0:8]
    np.testing.assert_array_equal(out, expected)


@pytest.fixture(scope="module")
def lavapipe_device():
    from helpers import wgpu_lavapipe_adapter

    return wgpu_lavapipe_adapter().request_device_sync(required_features=["shader-f16"])


@pytest.mark.parametrize(
    "model, textures, message",
    [("conv-relu-pool", True, "Unresolved call .*tirx.texture2d_load"), ("run-time-conv", False, "blockIdx.z is not supported in WebGPU")],
)
def test_tvm_webgpu_codegen_cannot_take_these_kernels(model, textures, message):
    # the evidence for relax_vk's own emitter (docs/vulkan.md): TVM's WGSL codegen fails on every
    # texture kernel, and on buffer kernels whose schedule uses blockIdx.z (relax_vk's conv of a
    # run-time size: rows on blockIdx.y, channel tiles on blockIdx.z)
    if model == "run-time-conv":
        mod = run_time_conv_module(np.ones((16, 8, 3, 3), "float32"), {"H": (4, 24), "W": (4, 70)})
    else:
        mod = build_example(model)
    compiled = relax_vk.build(mod, target="vulkan", options=relax_vk.ScopeOptions(textures=textures))
    webgpu = tvm.target.Target("webgpu")
    device = tvm.IRModule({gv: f.with_attr("target", webgpu) for gv, f in compiled.device_tir.functions_items()})
    with pytest.raises(tvm.error.InternalError, match=message):
        tvm.get_global_func("target.build.webgpu")(device, webgpu)
    assert compiled.shaders  # while relax_vk's emitter translates every one of them


def _flags_module():
    """A bool tensor read by a reduction and by an elementwise kernel: it crosses kernels, so it
    is a bool buffer (185 flags: not a multiple of four)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((5, 37), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            flags = bb.emit(relax.op.greater(x, relax.const(0.0, "float32")))
            count = bb.emit(relax.op.sum(relax.op.astype(flags, "float32"), axis=[0]))
            y = bb.emit(relax.op.where(flags, x, relax.op.negative(x)))
            out = bb.emit_output(relax.op.add(y, count))
        bb.emit_func_output(out)
    return bb.get()


@pytest.mark.parametrize("backend, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_bool_buffers_between_kernels_pack_four_flags_to_a_word(backend, device, request):
    request.getfixturevalue(device)
    compiled = relax_vk.build(_flags_module(), backend)
    artifact = compiled.artifact()
    assert [t["bytes"] for t in artifact.program["tensors"] if t["dtype"] == "bool"] == [185]
    if backend == "vulkan":  # written through atomics on its own byte, read by shifting the word
        assert "array<atomic<u32>>" in compiled.source and "atomicOr(" in compiled.source and ">> 2u]" in compiled.source
    x = np.random.default_rng(0).standard_normal((5, 37)).astype("float32")
    out = load(artifact, device=device).run([x])[0]
    np.testing.assert_allclose(out, np.abs(x) + (x > 0).sum(0), rtol=1e-6)


def _int8_module(dtype):
    """``dtype`` (int8/uint8) values computed by one kernel and read by two others (a reduction
    and an elementwise kernel), so they lie between kernels in a byte buffer (185 of them: not a
    multiple of four), and an int8 constant (a quantized weight) read by a dequantize kernel."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((5, 37), "float32"))
    zp = 3 if dtype == "int8" else 128
    weight = np.arange(-90, 95, dtype="int64").reshape(5, 37) % (128 if dtype == "int8" else 256)
    with bb.function("main", [x]):
        with bb.dataflow():
            q = bb.emit(relax.op.quantize(x, relax.const(0.05, "float32"), relax.const(zp, dtype), axis=0, out_dtype=dtype))
            total = bb.emit(relax.op.sum(relax.op.astype(q, "float32"), axis=[0]))
            back = bb.emit(relax.op.dequantize(q, relax.const(0.05, "float32"), relax.const(zp, dtype), axis=0))
            w = bb.emit(relax.op.dequantize(relax.const(weight.astype(dtype), dtype), relax.const(0.5, "float32"), relax.const(zp, dtype), axis=0))
            out = bb.emit_output(relax.op.add(relax.op.add(back, total), w))
        bb.emit_func_output(out)
    return bb.get(), weight.astype(dtype), zp


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_int8_buffers_hold_bytes_on_vulkan(dtype, lavapipe):
    """WGSL has no 8-bit type: int8/uint8 buffers are u32 words of four bytes, read by byte
    extraction (sign-extended for int8) and written per byte with atomics; the artifact keeps one
    byte an element."""
    mod, weight, zp = _int8_module(dtype)
    compiled = relax_vk.build(mod, "vulkan")
    artifact = compiled.artifact()
    assert sorted(t["bytes"] for t in artifact.program["tensors"] if t["dtype"] == dtype) == [185, 185]
    assert "array<atomic<u32>>" in compiled.source and "atomicOr(" in compiled.source
    x = np.random.default_rng(0).uniform(-5, 5, (5, 37)).astype("float32")
    info = np.iinfo(dtype)
    v = x / np.float32(0.05)
    q = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5) + zp, info.min, info.max)  # (TVM's quantize: C round)
    want = (q - zp) * np.float32(0.05) + q.sum(0) + (weight.astype("float32") - zp) * 0.5
    out = load(artifact, device="lavapipe").run([x])[0]
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("backend, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_bitwise_not_and_xor_of_bool_masks(backend, device, request):
    """torch's ``scores.masked_fill(~mask, -inf)``: a bitwise not of a bool input (WGSL's ``~`` and
    ``^`` take integers; a bool's are ``!`` and ``!=``)."""
    request.getfixturevalue(device)
    x, mask, other = tensor("x", (3, 8)), tensor("mask", (3, 8), "bool"), tensor("other", (3, 8), "bool")

    def body(bb, x, mask, other):
        hidden = bb.emit(relax.op.bitwise_not(mask))
        flipped = bb.emit(relax.op.bitwise_xor(mask, other))
        return relax.op.add(bb.emit(relax.op.where(hidden, relax.const(-5.0, "float32"), x)), bb.emit(relax.op.astype(flipped, "float32")))

    mod = module([x, mask, other], body)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((3, 8)).astype("float32"), rng.random((3, 8)) < 0.5, rng.random((3, 8)) < 0.5]
    out = load(relax_vk.build(mod, backend).artifact(), device=device).run(inputs)[0]
    np.testing.assert_allclose(out, np.where(~inputs[1], -5.0, inputs[0]) + (inputs[1] ^ inputs[2]), rtol=1e-6)


@T.prim_func(s_tir=True)
def _vector_math_kernel(a_ptr: T.handle("float32", "global"), b_ptr: T.handle("float32", "global"), h_ptr: T.handle("float16", "global")):
    a = T.decl_buffer((4,), "float32", data=a_ptr)
    b = T.decl_buffer((12,), "float32", data=b_ptr)
    h = T.decl_buffer((4,), "float16", data=h_ptr)
    b[T.Ramp(0, 1, 4)] = T.tanh(a[T.Ramp(0, 1, 4)] * T.Broadcast(T.float32(40.0), 4))
    b[T.Ramp(4, 1, 4)] = T.truncmod(a[T.Ramp(0, 1, 4)] * T.Broadcast(T.float32(1e4), 4), T.Broadcast(T.float32(0.75), 4))
    b[T.Ramp(8, 1, 4)] = T.max(a[T.Ramp(0, 1, 4)], T.Broadcast(T.float32(0.0), 4))
    h[T.Ramp(0, 1, 4)] = T.min(T.Cast("float16x4", a[T.Ramp(0, 1, 4)]), T.Broadcast(T.float16(0.5), 4))


def test_helpers_on_vectors_run_lane_by_lane(lavapipe_device):
    # tanh (a helper: no NaN for large inputs), float Mod (C's exact fmod) and float max/min (TVM's
    # a > b ? a : b) on 4-lane vectors and on float16: each lane calls the float32 helper
    import wgpu

    shader = emit_kernel(_vector_math_kernel, "vector_math")
    assert "vec4<f32>(rvk_tanh(" in shader.source and "rvk_fmod(" in shader.source and "f16(rvk_min(f32(" in shader.source
    device = lavapipe_device
    a = np.array([3.0, -100.0, 0.3, np.nan], "float32")
    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC
    bufs = [device.create_buffer_with_data(data=d.tobytes(), usage=usage) for d in (a, np.zeros(12, "float32"), np.zeros(4, "float16"))]
    _dispatch_once(device, shader.source, bufs)
    b = np.frombuffer(bytes(device.queue.read_buffer(bufs[1])), dtype="float32")
    h = np.frombuffer(bytes(device.queue.read_buffer(bufs[2])), dtype="float16")
    np.testing.assert_allclose(b[:4], np.tanh(a * np.float32(40)), rtol=1e-6)
    np.testing.assert_allclose(b[4:8], np.fmod(a * np.float32(1e4), np.float32(0.75)), rtol=1e-6)
    np.testing.assert_array_equal(b[8:], np.array([3.0, 0.0, 0.3, 0.0], "float32"))  # max(NaN, 0) = 0, as TVM's llvm build
    np.testing.assert_array_equal(h, np.array([0.5, -100.0, 0.3, 0.5], "float16"))


@T.prim_func(s_tir=True)
def _int8_texels(q_ptr: T.handle("int8", "global"), out_ptr: T.handle("int32", "global"), n: T.int32):
    q = T.decl_buffer((64,), "int8", data=q_ptr)
    out = T.decl_buffer((64,), "int32", data=out_ptr)
    for i in range(4):
        out[T.Ramp(i * 4, 1, 4)] = T.Cast("int32x4", q[T.Ramp(i * 4, 1, 4)])  # aligned: one word each
    out[T.Ramp(n * 8 + 1, 1, 4)] = T.Cast("int32x4", q[T.Ramp(n * 8 + 1, 1, 4)])  # not aligned: byte by byte


def test_four_aligned_int8_lanes_are_one_word_at_constant_shifts(lavapipe_device):
    """An int8 texel (four bytes at a multiple of 4: an OIHW4o weight) is one word shifted by
    constants; a vector at another offset is extracted byte by byte. Both sign-extend right."""
    import wgpu

    shader = emit_kernel(_int8_texels, "int8_texels")
    assert all(shader.source.count(f"<< {shift}u) >> 24u)") == 4 for shift in (24, 16, 8, 0))  # (4 aligned texels)
    assert shader.source.count("& 3) * 8u") == 4  # (the unaligned vector: each lane's shift from its index)
    q = np.arange(-32, 32, dtype=np.int8) * 4 - 1  # (negative and positive bytes)
    device = lavapipe_device
    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
    buffers = [device.create_buffer_with_data(data=q.tobytes(), usage=usage), device.create_buffer(size=64 * 4, usage=usage),
               device.create_buffer_with_data(data=np.array([3, 0, 0, 0], np.int32).tobytes(), usage=wgpu.BufferUsage.UNIFORM)]  # fmt: skip
    _dispatch_once(device, shader.source, buffers)
    got = np.frombuffer(device.queue.read_buffer(buffers[1]), np.int32)
    np.testing.assert_array_equal(got[:16], q[:16].astype(np.int32))
    np.testing.assert_array_equal(got[25:29], q[25:29].astype(np.int32))


def _positions_module():
    """RoBERTa's position ids: ``cumsum(mask) * mask + 1`` of int64 flags, a tensor between two
    kernels (the scan and the elementwise kernel that reads it), then a gather of a table."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((3, 37), "float32"))
    table = np.arange(40 * 2, dtype="float32").reshape(40, 2)
    with bb.function("main", [x]):
        with bb.dataflow():
            mask = bb.emit(relax.op.astype(relax.op.greater(x, relax.const(0.0, "float32")), "int64"))
            scan = bb.emit(relax.op.cumsum(mask, axis=1, dtype="int64"))
            positions = bb.emit(relax.op.add(relax.op.multiply(scan, mask), relax.const(1, "int64")))
            out = bb.emit_output(relax.op.take(relax.const(table), positions, axis=0))
        bb.emit_func_output(out)
    return bb.get(), table


def test_int64_tensors_between_kernels_hold_eight_bytes_an_element_on_vulkan(lavapipe):
    """WGSL has no 64-bit integers: an int64 buffer is ``array<vec2<i32>>``, the value in the low
    word and its sign in the high one, as the artifact lays out an int64 tensor."""
    mod, table = _positions_module()
    compiled = relax_vk.build(mod, "vulkan")
    artifact = compiled.artifact()
    assert any(t["dtype"] == "int64" and t["kind"] == "intermediate" for t in artifact.program["tensors"])
    assert "array<vec2<i32>>" in compiled.source
    x = np.random.default_rng(0).standard_normal((3, 37)).astype("float32")
    mask = (x > 0).astype("int64")
    want = table[np.cumsum(mask, axis=1) * mask + 1]
    np.testing.assert_array_equal(load(artifact, device=lavapipe).run([x])[0], want)
