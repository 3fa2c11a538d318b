"""The native runtime (C library through ctypes) against the Python runtime on pocl (OpenCL) and
lavapipe (Vulkan, through wgpu-native): the same outputs (<= 1e-6 relative), the same device
memory, the same profile steps, the same errors."""

import math
import os

import numpy as np
import pytest

import relax_vk
from relax_vk.core.options import ScopeOptions
from relax_vk.models import EXAMPLES, build_example
from relax_vk.runtime import DeviceLimitError, load
from relax_vk.runtime import native
from relax_vk.runtime.opencl import find_device
from relax_vk.serialization.artifact import Artifact
from relax_vk.tools.reference import random_inputs

from ...runtime_helpers import assert_each_run_takes_its_inputs, copy_program, two_output_copy_program

#: the zoo models held to the Python runtime here: a CNN with fire modules and ceil-mode pools (the
#: Android-shaped example runs it too) and a ViT in the packed token layout, on OpenCL; the CNN on Vulkan
ZOO = [("squeezenet", "opencl"), ("vit_small", "opencl"), ("squeezenet", "vulkan")]

#: (target, device) of each backend: pocl through the ICD loader, lavapipe through wgpu-native
BACKENDS = [("opencl", "pocl"), ("vulkan", "lavapipe")]
DEVICE = dict(BACKENDS)


def assert_same(native_session, python_session, inputs):
    """Both sessions give the same outputs (<= 1e-6 relative to the output's largest magnitude),
    hold the same device memory and profile the same steps."""
    got, want = native_session.run(inputs), python_session.run(inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        scale = max(float(np.max(np.abs(w.astype("float64")))), 1e-30) if w.size else 1.0
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6 * scale)
    assert native_session.device_bytes == python_session.device_bytes
    assert [p["name"] for p in native_session.last_profile] == [p["name"] for p in python_session.last_profile]
    assert all(p["ms"] >= 0 for p in native_session.last_profile)
    assert sum(p["ms"] for p in native_session.last_profile) <= native_session.last_device_ms + 1e-9
    return got


@pytest.mark.parametrize("target, device", BACKENDS)
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_match_the_python_runtime(native_build, name, target, device):
    mod = build_example(name)
    artifact = relax_vk.build(mod, target=target).artifact()
    inputs = random_inputs(mod)
    assert_same(load(artifact, device=device, native=True), load(artifact, device=device), inputs)


@pytest.mark.parametrize("name, target", ZOO)
def test_zoo_models_match_the_python_runtime(native_build, zoo_artifact, name, target, tmp_path):
    artifact, example, _ = zoo_artifact(name, target)
    path = str(tmp_path / f"{name}.rvk")
    artifact.write(path)
    device = DEVICE[target]
    out = assert_same(load(path, device=device, native=True), load(path, device=device), [example])[0]
    assert float(np.std(out)) > 1e-3  # a meaningful comparison


@pytest.mark.parametrize("target, device", BACKENDS)
def test_mixed_consumers_copy_from_an_arena_into_a_texture(native_build, target, device):
    mod = build_example("mixed-consumers")
    artifact = relax_vk.build(mod, registry=relax_vk.rfc_registry(), target=target).artifact()
    assert any(step["op"] == "copy" for step in artifact.program["steps"])
    assert_same(load(artifact, device=device, native=True), load(artifact, device=device), random_inputs(mod))


@pytest.mark.parametrize("target, device", BACKENDS)
@pytest.mark.parametrize("scopes", [("global.texture",), ("global.texture", "global.texture-weight"), ("global.texture-nhwc",)])
def test_scope_copies_round_trip(native_build, scopes, target, device):
    x = np.random.default_rng(1).standard_normal((2, 3, 5, 7, 4)).astype("float32")
    out = load(copy_program(x.shape, *scopes, target=target), device=device, native=True).run([x])[0]
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("target, device", BACKENDS)
def test_half_texels_match_the_python_runtime(native_build, target, device):
    mod = build_example("conv-relu-pool")
    half = relax_vk.build(mod, options=ScopeOptions(precision="fp16"), target=target).artifact()
    assert any(t.get("texel") == "float16" for t in half.program["tensors"])
    inputs = random_inputs(mod)
    with _maybe_warns():
        native_session = load(half, device=device, native=True)
    with _maybe_warns():
        python_session = load(half, device=device)
    assert_same(native_session, python_session, inputs)


def _maybe_warns():
    """pocl may lack half-float images (both runtimes then store float texels, with a warning)."""
    import contextlib
    import warnings

    @contextlib.contextmanager
    def quiet():
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*no half-float images.*")
            yield

    return quiet()


def _edge_program(host: str, device: str = "int32", target: str = "opencl") -> Artifact:
    """input (device dtype, host dtype `host`) -> buffer copy -> output (the same conversion back)."""
    shape = [2, 3]
    nbytes = 6 * np.dtype(device).itemsize
    t = {"shape": shape, "dtype": device, "scope": "global", "image": None, "bytes": nbytes, "host_dtype": host}
    tensors = [dict(t, id=0, name="x", kind="input"), dict(t, id=1, name="y", kind="intermediate")]
    program = {"format": "relax_vk.program", "target": target, "model": {}, "tensors": tensors, "kernels": [],
               "steps": [{"op": "copy", "src": 0, "dst": 1}], "inputs": [0], "outputs": [1]}  # fmt: skip
    return Artifact(program, "__kernel void relax_vk_noop(void) {}" if target == "opencl" else "")


@pytest.mark.parametrize("host, device, values", [
    ("int64", "int32", [[-3, 0, 7], [2**31 - 1, -(2**31), 5]]),
    ("bool", "int32", [[True, False, True], [False, False, True]]),
    ("uint8", "int32", [[0, 255, 7], [1, 2, 3]]),
    ("float16", "float32", [[0.5, -2.0, 65504.0], [1e-4, 3.140625, 0.0]]),
    ("float64", "float32", [[0.1, -1e30, 3.0], [1e-45, 2.5, -0.0]]),
])  # fmt: skip
@pytest.mark.parametrize("target, name", BACKENDS)
def test_dtypes_convert_at_the_edges_as_the_python_runtime(native_build, host, device, values, target, name):
    artifact = _edge_program(host, device, target)
    x = np.array(values, dtype=host)
    got, want = load(artifact, device=name, native=True).run([x])[0], load(artifact, device=name).run([x])[0]
    assert got.dtype == want.dtype == np.dtype(host)
    np.testing.assert_array_equal(got, want)
    # the device dtype is accepted too
    np.testing.assert_array_equal(load(artifact, device=name, native=True).run([x.astype(device)])[0], want)


def test_integers_outside_the_device_range_are_refused_as_in_python(native_build):
    artifact = _edge_program("int64")
    x = np.array([[2**40, 0, 0], [0, 0, 0]], dtype="int64")
    with pytest.raises(ValueError) as python_error:
        load(artifact, device="pocl").run([x])
    with pytest.raises(ValueError) as native_error:
        load(artifact, device="pocl", native=True).run([x])
    assert str(native_error.value) == str(python_error.value)


def test_bad_inputs_are_named_as_in_python(native_build):
    mod = build_example("rfc-conv2d")
    artifact = relax_vk.build(mod).artifact()
    sessions = [load(artifact, device="pocl", native=True), load(artifact, device="pocl")]
    x, w = random_inputs(mod)
    for bad in ([x], [x, w[..., :2]], [x.astype("float64"), w], [x.astype("complex64"), w]):
        messages = []
        for session in sessions:
            with pytest.raises(ValueError) as err:
                session.run(bad)
            messages.append(str(err.value))
        assert messages[0] == messages[1]


@pytest.mark.parametrize("target, device", BACKENDS)
def test_runs_repeat_exactly_and_timing_keeps_the_profile(native_build, target, device):
    mod = build_example("conv-relu-pool")
    artifact = relax_vk.build(mod, target=target).artifact()
    session = load(artifact, device=device, native=True)
    inputs = random_inputs(mod)
    first = session.run(inputs)
    profile = session.last_profile
    lat = session.time(inputs, repeat=2)
    assert lat["median"] > 0 and session.last_profile is profile and session.profiling
    np.testing.assert_array_equal(session.run(inputs)[0], first[0])
    assert not np.allclose(session.run(random_inputs(mod, seed=1))[0], first[0])
    unprofiled = load(artifact, device=device, profile=False, native=True)
    np.testing.assert_array_equal(unprofiled.run(inputs)[0], first[0])
    if target == "opencl":  # (an unprofiled OpenCL session names its steps with NaN times; a Vulkan one, as wgpu-py's, has none)
        assert unprofiled.last_profile and all(math.isnan(k["ms"]) for k in unprofiled.last_profile)
    else:
        assert unprofiled.last_profile == [] and math.isnan(unprofiled.last_device_ms)


# (spinning: lavapipe runs these within 50 ms; sleeping: a 0.1 ms budget, shorter than its waits, so
# each unprofiled wait after the first sleeps until shortly before the last one's end, then polls)
@pytest.mark.parametrize("ahead, spin_us", [("1", "50000"), ("1", "100"), ("0", "0")], ids=["ahead-spinning", "ahead-sleeping", "each-run-blocking"])
@pytest.mark.parametrize("target, device", BACKENDS)
def test_runs_recorded_ahead_take_each_runs_inputs(native_build, target, device, ahead, spin_us, monkeypatch):
    # native Vulkan submits the command buffer the last unprofiled run recorded for it
    # ($RVK_RECORD_AHEAD), then polls for its outputs without blocking for up to $RVK_SPIN_US
    monkeypatch.setenv("RVK_RECORD_AHEAD", ahead)
    monkeypatch.setenv("RVK_SPIN_US", spin_us)
    mod = build_example("conv-relu-pool")
    artifact = relax_vk.build(mod, target=target).artifact()
    python = load(artifact, device=device)
    input_sets = [random_inputs(mod, seed=s) for s in range(3)]
    assert_each_run_takes_its_inputs(load(artifact, device=device, native=True), input_sets, [python.run(x) for x in input_sets])
    shape = (1, 2, 3, 5, 4)
    xs = [[np.random.default_rng(s).standard_normal(shape).astype("float32")] for s in range(3)]
    copies = load(two_output_copy_program(shape, "global.texture", target=target), device=device, native=True)
    assert_each_run_takes_its_inputs(copies, xs, [[x[0], x[0]] for x in xs])


def test_device_limits_are_refused_as_in_python(native_build):
    width = int(find_device().image2d_max_width)
    program = copy_program((1, 1, 1, width + 4, 4), "global.texture")
    with pytest.raises(DeviceLimitError) as python_error:
        load(program, device="pocl")
    with pytest.raises(DeviceLimitError) as native_error:
        load(program, device="pocl", native=True)
    assert str(native_error.value) == str(python_error.value)


def test_half_arithmetic_without_cl_khr_fp16_is_refused_as_in_python(native_build):
    """A model built for half arithmetic on a device without it (pocl, NVIDIA's OpenCL): the native
    runtime refused it only when NVIDIA's compiler rejected the half code (a build log naming
    neither op nor remedy; seen on the H100); now before any compile, with Python's message."""
    from onnx_chain import chain_model

    artifact = relax_vk.build(chain_model(), "opencl", options=ScopeOptions(arithmetic="fp16")).artifact()
    with pytest.raises(DeviceLimitError, match="cl_khr_fp16") as python_error:
        load(artifact, device="pocl")
    with pytest.raises(DeviceLimitError) as native_error:
        load(artifact, device="pocl", native=True)
    assert str(native_error.value) == str(python_error.value)


def test_device_names(native_build, pocl):
    artifact = copy_program((1, 1, 1, 2, 4), "global.texture")
    assert load(artifact, device="0:0", native=True).device_name
    assert load(artifact, device=pocl, native=True).device_name == pocl.name.strip()  # a pyopencl device
    with pytest.raises(ValueError, match=r"unknown device 'tpu': use 'pocl', 'gpu' or PLATFORM:DEVICE"):
        load(artifact, device="tpu", native=True)
    with pytest.raises(relax_vk.runtime.opencl.OpenCLUnavailable, match="no OpenCL device 9:9"):
        load(artifact, device="9:9", native=True)


def test_vulkan_device_limits_are_refused_as_in_python(native_build, lavapipe):
    width = int(lavapipe.limits["max-texture-dimension-2d"])
    program = copy_program((1, 1, 1, width + 4, 4), "global.texture", target="vulkan")
    with pytest.raises(DeviceLimitError) as python_error:
        load(program, device="lavapipe")
    with pytest.raises(DeviceLimitError) as native_error:
        load(program, device="lavapipe", native=True)
    assert str(native_error.value) == str(python_error.value)


def test_vulkan_device_names(native_build, lavapipe):
    from relax_vk.runtime.vulkan.devices import vulkan_adapters

    artifact = copy_program((1, 1, 1, 2, 4), "global.texture", target="vulkan")
    name = lavapipe.info["device"].strip()
    for spec in ("lavapipe", "cpu", str(vulkan_adapters().index(lavapipe) if lavapipe in vulkan_adapters() else 0)):
        assert load(artifact, device=spec, native=True).device_name == load(artifact, device=spec).device_name
    assert load(artifact, device="lavapipe", native=True).device_name == name
    assert load(artifact, device=lavapipe, native=True).device_name == name  # a wgpu adapter
    for spec in ("tpu", "99"):
        with pytest.raises(ValueError) as python_error:
            load(artifact, device=spec)
        with pytest.raises(ValueError) as native_error:
            load(artifact, device=spec, native=True)
        assert str(native_error.value) == str(python_error.value)


@pytest.mark.parametrize("checks", ["loops", "none"])
def test_vulkan_shader_checks_as_in_python(native_build, checks):
    """Trusted shader modules (wgpuDeviceCreateShaderModuleTrusted) only where asked for, as the
    Python runtime's shader_checks: the same outputs."""
    mod = build_example("conv-relu-pool")
    artifact = relax_vk.build(mod, target="vulkan").artifact()
    inputs = random_inputs(mod)
    assert_same(load(artifact, device="lavapipe", native=True, shader_checks=checks), load(artifact, device="lavapipe", shader_checks=checks), inputs)
    with pytest.raises(ValueError, match="shader checks apply to Vulkan artifacts only"):
        load(relax_vk.build(mod).artifact(), device="pocl", native=True, shader_checks=checks)


def test_a_rejected_shader_is_a_shader_error(native_build):
    from relax_vk.runtime.vulkan.session import ShaderError

    artifact = relax_vk.build(build_example("rgb-stem"), target="vulkan").artifact()
    artifact.source = artifact.source.replace("fn main", "fn mian", 1)  # (same length: the spans hold)
    with pytest.raises(ShaderError) as python_error:
        load(artifact, device="lavapipe")
    with pytest.raises(ShaderError, match=r"shader for kernel \w+ was rejected by the device:\n(.|\n)*--- shader ---\n   1 \| "):
        load(artifact, device="lavapipe", native=True)
    assert "rejected by the device" in str(python_error.value)


def test_vulkan_pipelines_made_by_several_threads(native_build, monkeypatch):
    """$RVK_PIPELINE_THREADS: the kernels' pipelines made side by side give the Python runtime's
    outputs, and of several rejected shaders the first in the kernels' order is the error (the one
    a serial load reports), whichever thread met it first."""
    from relax_vk.runtime.vulkan.session import ShaderError

    monkeypatch.setenv("RVK_PIPELINE_THREADS", "3")
    mod = build_example("mixed-consumers")
    artifact = relax_vk.build(mod, target="vulkan").artifact()
    assert_same(load(artifact, device="lavapipe", native=True), load(artifact, device="lavapipe"), random_inputs(mod))
    kernels = artifact.program["kernels"]
    for k in (kernels[2], kernels[-1], kernels[3]):
        begin, end = k["shader"]["offset"], k["shader"]["offset"] + k["shader"]["length"]
        artifact.source = artifact.source[:begin] + artifact.source[begin:end].replace("fn main", "fn mian", 1) + artifact.source[end:]
    for _ in range(3):
        with pytest.raises(ShaderError, match=rf"shader for kernel {kernels[2]['name']} was rejected by the device:"):
            load(artifact, device="lavapipe", native=True)


def test_an_unbuilt_library_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv(native.ENV, str(tmp_path / "missing.so"))
    monkeypatch.setattr(native, "_LIB", None)
    with pytest.raises(native.NativeUnavailable, match=r"the native runtime is not built .*missing.so does not exist\): run `make setup`"):
        load(copy_program((1, 1, 1, 2, 4), "global.texture"), native=True)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # numpy's, on the Python side
@pytest.mark.parametrize("host", ["float16", "bool", "int8", "uint8", "int64", "float64"])
def test_output_conversions_round_as_numpy(native_build, host):
    """float32/int32 device values converted to the output's host dtype exactly as numpy's astype
    (ties to even, overflow to inf, subnormals; integer wrap-around of int8/uint8)."""
    rng = np.random.default_rng(3)
    device = "int32" if host in ("bool", "int8", "uint8", "int64") else "float32"
    if device == "float32":
        special = np.array([65504, 65520, 65519.99, 1e-8, 5.96e-8, 2.98e-8, 6.1e-5, -0.0, np.inf, -np.inf, 1 + 2**-11, 1 + 3 * 2**-11], "float32")
        values = np.concatenate([special, rng.standard_normal(1000).astype("float32") * 10.0 ** rng.integers(-9, 6, 1000)])
    else:
        values = np.concatenate([np.array([0, 1, -1, 127, 128, 255, 256, -129, 2**31 - 1, -(2**31)], "int32"),
                                 rng.integers(-(2**31), 2**31 - 1, 1000).astype("int32")])  # fmt: skip
    values = values.astype(device)
    artifact = _edge_program(host, device)
    artifact.program["tensors"][0].pop("host_dtype")  # the input is the device dtype itself
    n = values.size
    for t in artifact.program["tensors"]:
        t.update(shape=[n], bytes=n * 4)
    got = load(artifact, device="pocl", native=True).run([values])[0]
    want = load(artifact, device="pocl").run([values])[0]
    assert got.dtype == want.dtype == np.dtype(host)
    np.testing.assert_array_equal(got.view("uint8"), want.view("uint8"))  # bitwise


def test_tensors_of_no_elements_and_constant_outputs(native_build, tmp_path):
    """Empty slices (zero-byte buffers, never a zero-size sub-buffer or copy) and a constant
    output: the native runtime gives the Python runtime's shapes and values."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from relax_vk.frontends import from_onnx

    ints = lambda name, v: numpy_helper.from_array(np.array(v, dtype="int64"), name)  # noqa: E731
    const = numpy_helper.from_array(np.arange(6, dtype="float32").reshape(2, 3), "c")
    nodes = [helper.make_node("Slice", ["x", "two", "two", "one"], ["empty"]),
             helper.make_node("Relu", ["empty"], ["relu_empty"]),
             helper.make_node("Concat", ["empty", "x"], ["joined"], axis=1),
             helper.make_node("Constant", [], ["k"], value=const)]  # fmt: skip
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in (("relu_empty", (4, 0)), ("joined", (4, 6)), ("k", (2, 3)))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (4, 6))], outs,
                              initializer=[ints("two", [2]), ints("one", [1])])  # fmt: skip
    path = str(tmp_path / "empty.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    artifact = relax_vk.build(from_onnx(path)).artifact()
    x = np.random.default_rng(0).standard_normal((4, 6)).astype("float32")
    want = load(artifact, device="pocl").run([x])
    got = load(artifact, device="pocl", native=True).run([x])
    assert [g.shape for g in got] == [w.shape for w in want] == [(4, 0), (4, 6), (2, 3)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_a_pyopencl_device_opens_that_device(native_build, pocl, monkeypatch):
    """A pyopencl device is the same device in the library: its ICD loader is pyopencl's (the
    GPU machine's system loader also listed pocl, so "0:0" was pocl there and the H100 in
    pyopencl); a loader that lists other platforms is an error, never another device."""
    artifact = relax_vk.build(build_example("conv-relu-pool"), target="opencl").artifact()
    session = load(artifact, device=pocl, native=True)
    assert session.device_name == pocl.name.strip()
    if native.pyopencl_loader():
        assert os.environ[native.OPENCL_ENV] == native.pyopencl_loader()

    class Elsewhere:  # a device the library has under another name at the same indices
        name = "Some Other GPU"
        platform = pocl.platform

    spec = native.device_spec(pocl)
    monkeypatch.setattr(native, "device_spec", lambda device: spec)  # (the indices of pocl)
    with pytest.raises(ValueError, match="opened .* not pyopencl's 'Some Other GPU'"):
        load(artifact, device=Elsewhere(), native=True)
