"""The runtime (the native library through ctypes) on pocl (OpenCL) and lavapipe (Vulkan, through
wgpu-native): outputs against TVM's llvm build of the same module or PyTorch (<= 1e-4 relative to
the output's largest magnitude), profiles that tile the run, and errors that name what is wrong."""

import math

import numpy as np
import pytest

import relax_vk
from relax_vk.analysis.reference import random_inputs, run_on_cpu
from relax_vk.core.options import ScopeOptions
from relax_vk.models import EXAMPLES, build_example
from relax_vk.runtime import DeviceLimitError, OpenCLUnavailable, ShaderError, library, load, select_device
from relax_vk.serialization.artifact import Artifact

from ...runtime_helpers import assert_each_run_takes_its_inputs, copy_program, two_output_copy_program

#: the zoo models held to PyTorch here: a CNN with fire modules and ceil-mode pools (the
#: Android-shaped example runs it too) and a ViT in the packed token layout, on OpenCL; the CNN on Vulkan
# (SqueezeNet on OpenCL with ``make test-full``: tests/zoo/test_zoo_models.py runs it through the same library)
ZOO = [pytest.param("squeezenet", "opencl", marks=pytest.mark.full_only("tests/zoo/test_zoo_models.py")), ("vit_small", "opencl"),
       ("squeezenet", "vulkan")]  # fmt: skip

#: (target, device) of each backend: pocl through the ICD loader, lavapipe through wgpu-native
BACKENDS = [("opencl", "pocl"), ("vulkan", "lavapipe")]
DEVICE = dict(BACKENDS)


def assert_right(session, inputs, expected, rtol=1e-4):
    """The session's outputs equal ``expected`` (<= ``rtol`` of the output's largest magnitude), and a
    profiled session's profile names every step and tiles the run's device span."""
    got = session.run(inputs)
    assert len(got) == len(expected)
    for g, w in zip(got, expected):
        w = np.asarray(w)
        assert g.shape == w.shape
        scale = max(float(np.max(np.abs(w.astype("float64")))), 1e-30) if w.size else 1.0
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale)
    if session.profiling:
        assert len(session.last_profile) == len(session.program["steps"])
        assert all(p["ms"] >= 0 for p in session.last_profile)
        assert sum(p["ms"] for p in session.last_profile) <= session.last_device_ms + 1e-9
    return got


@pytest.mark.one_api("target")
@pytest.mark.parametrize("target, device", BACKENDS)
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_are_right(native_build, name, target, device):
    mod = build_example(name)
    artifact = relax_vk.build(mod, target=target).artifact()
    inputs = random_inputs(mod)
    assert_right(load(artifact, device=device, profile=True), inputs, run_on_cpu(mod, inputs))


@pytest.mark.parametrize("name, target", ZOO)
def test_zoo_models_are_right(native_build, zoo_artifact, name, target, tmp_path):
    import torch

    artifact, example, model = zoo_artifact(name, target)
    path = str(tmp_path / f"{name}.rvk")
    artifact.write(path)
    with torch.no_grad():
        want = model(torch.from_numpy(example)).numpy()
    out = assert_right(load(path, device=DEVICE[target], profile=True), [example], [want])[0]
    assert float(np.std(out)) > 1e-3  # a meaningful comparison


@pytest.mark.parametrize("target, device", BACKENDS)
def test_mixed_consumers_copy_from_an_arena_into_a_texture(native_build, target, device):
    mod = build_example("mixed-consumers")
    artifact = relax_vk.build(mod, registry=relax_vk.rfc_registry(), target=target).artifact()
    assert any(step["op"] == "copy" for step in artifact.program["steps"])
    inputs = random_inputs(mod)
    assert_right(load(artifact, device=device, profile=True), inputs, run_on_cpu(mod, inputs))


def test_opencl_buffers_by_address_and_as_memory_objects_agree(native_build, monkeypatch):
    """pocl has coarse-grained shared virtual memory: a session allocates its buffers there and
    passes kernels their addresses, while copies into textures, input writes and output reads go
    through buffers made on that memory. The outputs are the same bits as a session of cl_mem
    arguments (RVK_OPENCL_SVM=0), and both are right (arena tensors at offsets: test_storage)."""
    mod = build_example("mixed-consumers")
    artifact = relax_vk.build(mod, registry=relax_vk.rfc_registry(), target="opencl").artifact()
    assert any(step["op"] == "copy" for step in artifact.program["steps"])
    inputs = random_inputs(mod)
    by_address = load(artifact, device="pocl")
    monkeypatch.setenv("RVK_OPENCL_SVM", "0")
    as_objects = load(artifact, device="pocl")
    assert (by_address.buffer_binding, as_objects.buffer_binding) == ("svm", "memory objects")
    assert by_address.device_bytes == as_objects.device_bytes
    want = run_on_cpu(mod, inputs)
    for _ in range(2):
        a, b = assert_right(by_address, inputs, want), assert_right(as_objects, inputs, want)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    assert load(relax_vk.build(mod, target="vulkan").artifact(), device="lavapipe").buffer_binding == "bind groups"


@pytest.mark.parametrize("target, device", BACKENDS)
@pytest.mark.parametrize("scopes", [("global.texture",), ("global.texture", "global.texture-weight"), ("global.texture-nhwc",)])
def test_scope_copies_round_trip(native_build, scopes, target, device):
    x = np.random.default_rng(1).standard_normal((2, 3, 5, 7, 4)).astype("float32")
    out = load(copy_program(x.shape, *scopes, target=target), device=device).run([x])[0]
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("target, device", BACKENDS)
def test_half_texels_are_right_to_half_precision(native_build, target, device):
    mod = build_example("conv-relu-pool")
    half = relax_vk.build(mod, options=ScopeOptions(precision="fp16"), target=target).artifact()
    assert any(t.get("texel") == "float16" for t in half.program["tensors"])
    inputs = random_inputs(mod)
    with _maybe_warns():
        session = load(half, device=device, profile=True)
    assert_right(session, inputs, run_on_cpu(mod, inputs), rtol=1e-2)


def _maybe_warns():
    """pocl may lack half-float images (the runtime then stores float texels, with a warning)."""
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
def test_dtypes_convert_at_the_edges_as_numpy(native_build, host, device, values, target, name):
    artifact = _edge_program(host, device, target)
    x = np.array(values, dtype=host)
    got, want = load(artifact, device=name).run([x])[0], x.astype(device).astype(host)
    assert got.dtype == want.dtype == np.dtype(host)
    np.testing.assert_array_equal(got, want)
    # the device dtype is accepted too
    np.testing.assert_array_equal(load(artifact, device=name).run([x.astype(device)])[0], want)


def test_integers_outside_the_device_range_are_refused(native_build):
    artifact = _edge_program("int64")
    x = np.array([[2**40, 0, 0], [0, 0, 0]], dtype="int64")
    with pytest.raises(ValueError, match="input x: int64 values outside the int32 range the device holds them in"):
        load(artifact, device="pocl").run([x])


def test_bad_inputs_are_named(native_build):
    mod = build_example("rfc-conv2d")
    artifact = relax_vk.build(mod).artifact()
    session = load(artifact, device="pocl")
    x, w = random_inputs(mod)
    names = [i["name"] for i in session.inputs]
    for bad, message in (([x], "takes 2 inputs, got 1"), ([x, w[..., :2]], f"input {names[1]}: shape"),
                         ([x.astype("float64"), w], f"input {names[0]}: dtype float64"), ([x.astype("complex64"), w], f"input {names[0]}: dtype complex64")):  # fmt: skip
        with pytest.raises(ValueError, match=message):
            session.run(bad)
    # by name, as onnxruntime takes them: the same outputs; a wrong or missing name, or one array, is refused
    np.testing.assert_array_equal(session.run({names[1]: w, names[0]: x})[0], session.run([x, w])[0])
    with pytest.raises(ValueError, match=rf"unknown \['y'\]; missing \['{names[1]}'\]"):
        session.run({names[0]: x, "y": w})
    with pytest.raises(TypeError, match="a list of arrays in the model's order or a dict by name"):
        session.run(x)


@pytest.mark.parametrize("target, device", BACKENDS)
def test_runs_repeat_exactly_and_timing_keeps_the_profile(native_build, target, device):
    mod = build_example("conv-relu-pool")
    artifact = relax_vk.build(mod, target=target).artifact()
    session = load(artifact, device=device, profile=True)
    inputs = random_inputs(mod)
    first = session.run(inputs)
    profile = session.last_profile
    lat = session.time(inputs, repeat=2)
    assert lat["median"] > 0 and session.last_profile is profile and session.profiling
    np.testing.assert_array_equal(session.run(inputs)[0], first[0])
    assert not np.allclose(session.run(random_inputs(mod, seed=1))[0], first[0])
    unprofiled = load(artifact, device=device)  # (the default: no profile)
    np.testing.assert_array_equal(unprofiled.run(inputs)[0], first[0])
    assert not unprofiled.profiling and unprofiled.last_profile == [] and math.isnan(unprofiled.last_device_ms)


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
    input_sets = [random_inputs(mod, seed=s) for s in range(3)]
    assert_each_run_takes_its_inputs(load(artifact, device=device, profile=True), input_sets, [run_on_cpu(mod, x) for x in input_sets])
    shape = (1, 2, 3, 5, 4)
    xs = [[np.random.default_rng(s).standard_normal(shape).astype("float32")] for s in range(3)]
    copies = load(two_output_copy_program(shape, "global.texture", target=target), device=device, profile=True)
    assert_each_run_takes_its_inputs(copies, xs, [[x[0], x[0]] for x in xs])


def test_device_limits_are_refused(native_build, pocl):
    width = pocl.limits.image_width
    program = copy_program((1, 1, 1, width + 4, 4), "global.texture")
    with pytest.raises(DeviceLimitError, match=f"width {width + 4} > image2d max width {width}"):
        load(program, device="pocl")


def test_half_arithmetic_without_cl_khr_fp16_is_refused(native_build):
    """A model built for half arithmetic on a device without it (pocl, NVIDIA's OpenCL) is refused
    before any compile (NVIDIA's compiler's own refusal names neither op nor remedy)."""
    from onnx_chain import chain_model

    artifact = relax_vk.build(chain_model(), "opencl", options=ScopeOptions(arithmetic="fp16")).artifact()
    with pytest.raises(DeviceLimitError, match=r"computes in float16 \(half arithmetic\) and .* lacks cl_khr_fp16: rebuild it with ScopeOptions\(arithmetic='fp32'\)"):
        load(artifact, device="pocl")


def test_device_names(native_build, pocl):
    artifact = copy_program((1, 1, 1, 2, 4), "global.texture")
    assert load(artifact, device="0:0").device_name
    assert load(artifact, device=pocl).device_name == pocl.name  # a Device
    assert load(artifact, device=pocl.index).device_name == pocl.name
    with pytest.raises(ValueError, match=r"unknown device 'tpu': use 'pocl', 'gpu' or PLATFORM:DEVICE"):
        load(artifact, device="tpu")
    with pytest.raises(OpenCLUnavailable, match="no OpenCL device 9:9"):
        load(artifact, device="9:9")
    with pytest.raises(TypeError, match="a spec string"):
        load(artifact, device=object())


def test_vulkan_device_limits_are_refused(native_build, lavapipe):
    width = lavapipe.limits.image_width
    program = copy_program((1, 1, 1, width + 4, 4), "global.texture", target="vulkan")
    with pytest.raises(DeviceLimitError, match=f"{width + 4}"):
        load(program, device="lavapipe")


def test_vulkan_device_names(native_build, lavapipe):
    artifact = copy_program((1, 1, 1, 2, 4), "global.texture", target="vulkan")
    for spec in ("lavapipe", "cpu", lavapipe.index, lavapipe):
        assert load(artifact, device=spec).device_name == lavapipe.name
    assert select_device("vulkan", "cpu") == lavapipe
    for spec in ("tpu", "99"):
        with pytest.raises(ValueError, match=f"unknown Vulkan device '{spec}': use 'lavapipe', 'gpu' or an index"):
            load(artifact, device=spec)


@pytest.mark.parametrize("checks", ["loops", "none"])
def test_vulkan_shader_checks(native_build, checks):
    """Trusted shader modules (wgpuDeviceCreateShaderModuleTrusted) only where asked for: the same outputs."""
    mod = build_example("conv-relu-pool")
    artifact = relax_vk.build(mod, target="vulkan").artifact()
    inputs = random_inputs(mod)
    assert_right(load(artifact, device="lavapipe", shader_checks=checks), inputs, run_on_cpu(mod, inputs))
    with pytest.raises(ValueError, match="shader checks apply to Vulkan artifacts only"):
        load(relax_vk.build(mod).artifact(), device="pocl", shader_checks=checks)
    with pytest.raises(ValueError, match="shader checks must be one of"):
        load(artifact, device="lavapipe", shader_checks="some")


def test_a_rejected_shader_is_a_shader_error(native_build):
    artifact = relax_vk.build(build_example("rgb-stem"), target="vulkan").artifact()
    artifact.source = artifact.source.replace("fn main", "fn mian", 1)  # (same length: the spans hold)
    with pytest.raises(ShaderError, match=r"shader for kernel \w+ was rejected by the device:\n(.|\n)*--- shader ---\n   1 \| "):
        load(artifact, device="lavapipe")


def test_vulkan_pipelines_made_by_several_threads(native_build, monkeypatch):
    """$RVK_PIPELINE_THREADS: the kernels' pipelines made side by side give TVM llvm's outputs, and
    of several rejected shaders the first in the kernels' order is the error (the one
    a serial load reports), whichever thread met it first."""
    monkeypatch.setenv("RVK_PIPELINE_THREADS", "3")
    mod = build_example("mixed-consumers")
    artifact = relax_vk.build(mod, target="vulkan").artifact()
    inputs = random_inputs(mod)
    assert_right(load(artifact, device="lavapipe"), inputs, run_on_cpu(mod, inputs))
    kernels = artifact.program["kernels"]
    for k in (kernels[2], kernels[-1], kernels[3]):
        begin, end = k["shader"]["offset"], k["shader"]["offset"] + k["shader"]["length"]
        artifact.source = artifact.source[:begin] + artifact.source[begin:end].replace("fn main", "fn mian", 1) + artifact.source[end:]
    for _ in range(3):
        with pytest.raises(ShaderError, match=rf"shader for kernel {kernels[2]['name']} was rejected by the device:"):
            load(artifact, device="lavapipe")


def test_an_unbuilt_library_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv(library.ENV, str(tmp_path / "missing.so"))
    monkeypatch.setattr(library, "_LIB", None)
    with pytest.raises(relax_vk.runtime.LibraryUnavailable, match=r"the relax_vk native library is not built .*missing.so does not exist\): run `make setup`"):
        load(copy_program((1, 1, 1, 2, 4), "global.texture"))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # numpy's, for the expected values
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
    got = load(artifact, device="pocl").run([values])[0]
    want = values.astype(host)
    assert got.dtype == want.dtype == np.dtype(host)
    np.testing.assert_array_equal(got.view("uint8"), want.view("uint8"))  # bitwise


def test_tensors_of_no_elements_and_constant_outputs(native_build, tmp_path):
    """Empty slices (zero-byte buffers, never a zero-size sub-buffer or copy) and a constant
    output: the shapes and values of TVM's llvm build."""
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
    want = run_on_cpu(from_onnx(path), [x])
    got = load(artifact, device="pocl").run([x])
    assert [g.shape for g in got] == [w.shape for w in want] == [(4, 0), (4, 6), (2, 3)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_read_tensor_reads_what_the_device_holds(native_build, target="opencl"):
    """``read_tensor`` (what bisect reads): every tensor of a build without storage reuse as the
    device holds it after a run: the input, and the output in its device layout."""
    for target, device in BACKENDS:
        x = np.random.default_rng(2).standard_normal((2, 3, 5, 7, 4)).astype("float32")
        session = load(copy_program(x.shape, "global.texture", target=target), device=device)
        (out,) = session.run([x])
        for tid in range(len(session.tensors)):
            np.testing.assert_array_equal(session.read_tensor(tid), x)
        with pytest.raises(ValueError, match="tensor 99 out of range"):
            library.check(library.library().rvk_session_read_tensor(session._handle, 99, None, 0))


@pytest.mark.parametrize("target, device", BACKENDS)
def test_runs_create_no_device_memory(native_build, target, device):
    """Memory stays flat over many calls: every device object is made at load, and no run makes
    another, profiled or not (10,000 runs of a copy program, 200 of a conv model)."""
    mod = build_example("conv-relu-pool")
    inputs = random_inputs(mod)
    x = np.random.default_rng(4).standard_normal((1, 2, 3, 5, 4)).astype("float32")
    cases = [(relax_vk.build(mod, target=target).artifact(), inputs, 200), (two_output_copy_program(x.shape, "global.texture", target=target), [x], 10_000)]
    for artifact, xs, runs in cases:
        for profile in (False, True):
            session = load(artifact, device=device, profile=profile)
            session.run(xs)
            made = session.device_objects
            assert made >= len(session.outputs)
            for _ in range(runs):
                session.run(xs)
            session.time(xs, repeat=3)
            assert session.device_objects == made, (artifact.program.get("model"), profile)


@pytest.mark.parametrize("api", ["opencl", "vulkan"])
def test_no_device_spec_selects_the_device_a_session_opens(native_build, api, monkeypatch):
    """``select_device(api)`` is the device ``load(..., device=None)`` opens (the GPU when one works,
    else the CPU device), and stays one device on a machine that lists several: the library's
    whole list (two rows here) must not be mistaken for the answer."""
    from relax_vk.runtime import devices

    artifact = copy_program((1, 1, 1, 2, 4), "global.texture", target=api)
    chosen = select_device(api)
    assert load(artifact).device_name == chosen.name
    real = devices._rows
    monkeypatch.setattr(devices, "_rows", lambda a, spec: real(a, spec) if spec is not None else real(a, None) * 2)
    assert select_device(api) == chosen
    # the rule is the library's: the C ABI's "default" spec names the same device
    assert [row["index"] for row in real(api, "default")] == [chosen.index]


def test_a_scalar_input_takes_a_0_d_array(native_build):
    """A rank-0 model input (an ONNX scalar) takes a 0-d array (numpy's ascontiguousarray made it 1-d,
    which the library then refused); a 1-element array stays refused by its shape."""
    from onnx import TensorProto, helper

    from relax_vk.frontends.onnx import from_onnx

    graph = helper.make_graph([helper.make_node("Mul", ["a", "s"], ["y"])], "g",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 4]), helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    session = load(relax_vk.build(from_onnx(model)).artifact(), device="pocl")
    a = np.arange(12, dtype="float32").reshape(3, 4)
    assert session.inputs[1]["shape"] == []
    np.testing.assert_array_equal(session.run({"a": a, "s": np.array(2.5, "float32")})[0], a * 2.5)
    with pytest.raises(ValueError, match=r"input s: shape \[1\], expected \[\]"):
        session.run([a, np.array([2.5], "float32")])


@pytest.mark.parametrize("target, device", BACKENDS)
def test_an_output_that_is_an_input_has_the_outputs_dtype(native_build, target, device):
    """An output that is the model's input itself (Identity), or becomes it when the edges fold a
    cast into the upload (a float16 input cast to float32 on OpenCL, an int64 one cast to int32 on
    Vulkan), is copied to a tensor of its own: it comes back in the output's dtype, not the input's."""
    from onnx import TensorProto as T
    from onnx import helper

    from relax_vk.frontends.onnx import from_onnx

    for in_dtype, out_dtype, node in ((T.FLOAT, T.FLOAT, helper.make_node("Identity", ["x"], ["y"])),
                                      (T.FLOAT16, T.FLOAT, helper.make_node("Cast", ["x"], ["y"], to=T.FLOAT)),
                                      (T.INT64, T.INT32, helper.make_node("Cast", ["x"], ["y"], to=T.INT32))):  # fmt: skip
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", in_dtype, [2, 3])], [helper.make_tensor_value_info("y", out_dtype, [2, 3])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
        model.ir_version = 8
        x = np.arange(6).reshape(2, 3).astype(helper.tensor_dtype_to_np_dtype(in_dtype))
        session = load(relax_vk.build(from_onnx(model), target).artifact(), device=device)
        got = session.run([x])[0]
        assert got.dtype == helper.tensor_dtype_to_np_dtype(out_dtype) and session.outputs[0]["name"] == "y"  # (the model's name)
        np.testing.assert_array_equal(got, x.astype(got.dtype))


def test_a_float16_models_kernels_on_opencl_without_half_are_refused_by_name(native_build):
    """A float16 model's ops compute in half inside kernels whose edges are float32 (pocl lacks
    cl_khr_fp16): refused by the kernel's name at load, not by the driver's compiler."""
    from onnx import TensorProto, helper

    from relax_vk.frontends.onnx import from_onnx

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 3])])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    with pytest.raises(DeviceLimitError, match=r"kernel \w+ computes in float16 and .* lacks cl_khr_fp16"):
        load(relax_vk.build(from_onnx(model), "opencl").artifact(), device="pocl")
