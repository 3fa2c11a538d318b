"""The Vulkan runtime on lavapipe (wgpu, Vulkan backend): real 2D-array textures, WGSL shaders,
numbers checked against TVM's llvm target; limits from the adapter; rejected shaders shown."""

import numpy as np
import pytest

import relax_vk
from relax_vk.serialization.artifact import Artifact
from relax_vk.models import EXAMPLES, build_example
from relax_vk.analysis.reference import random_inputs, run_on_cpu
from relax_vk.runtime import DeviceLimitError, ShaderError, load, select_adapter
from relax_vk.runtime.vulkan.session import VulkanSession, check_limits
from relax_vk.core.scope import scope_from_name
from helpers import module, tensor
from runtime_helpers import assert_each_run_takes_its_inputs, assert_profile_is_sound, copy_program, two_output_copy_program


@pytest.fixture(scope="module")
def lavapipe():
    adapter = select_adapter("lavapipe")
    assert adapter.info["backend_type"] == "Vulkan"
    return adapter


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_match_the_cpu_reference(name, lavapipe):
    mod = build_example(name)
    compiled = relax_vk.build(mod, target="vulkan")
    session = load(compiled.artifact(), device=lavapipe)
    inputs = random_inputs(mod)
    outputs = session.run(inputs)
    for out, ref in zip(outputs, run_on_cpu(mod, inputs)):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    # every dispatch (kernel or copy) of a (warm) run is timed with timestamp queries (nanoseconds -> ms)
    np.testing.assert_array_equal(assert_profile_is_sound(session, inputs)[0], outputs[0])


def test_vulkan_plan_is_the_opencl_plan():
    mod = build_example("conv20")
    vulkan = relax_vk.build(mod, target="vulkan")
    opencl = relax_vk.build(mod, target="opencl")
    assert vulkan.plan().to_json()["tensors"] == opencl.plan().to_json()["tensors"]
    assert vulkan.plan().texture_share == opencl.plan().texture_share
    # the plan was made for the Vulkan target; the kernels were lowered under the OpenCL-kind
    # lowering target (TVM's texture lowering is keyed to it)
    kinds = {vd.target.kind.name for vd in vulkan.scoped.global_infos["vdevice"]}
    assert kinds == {"vulkan"}
    lowered = {(vd.target.kind.name, str(vd.memory_scope)) for vd in vulkan.lowered.global_infos["vdevice"]}
    assert {kind for kind, _ in lowered} == {"opencl"}
    assert {scope for _, scope in lowered} == {str(vd.memory_scope) for vd in vulkan.scoped.global_infos["vdevice"]}


def test_textures_are_real_images(lavapipe):
    mod = build_example("rfc-conv2d")
    session = load(relax_vk.build(mod, target="vulkan").artifact(), device=lavapipe)
    images = [(t, m) for t, m in zip(session.tensors, session.memory) if t["image"]]
    assert images
    for t, texture in images:
        assert list(texture.size) == t["image"] and texture.format == "rgba32float" and texture.dimension == "2d"


def test_runs_reuse_memory_and_repeat_exactly(lavapipe):
    mod = build_example("conv-relu-pool")
    session = load(relax_vk.build(mod, target="vulkan").artifact(), device=lavapipe)
    memory = list(session.memory)
    inputs = random_inputs(mod)
    first, second = session.run(inputs), session.run(inputs)
    assert all(a is b for a, b in zip(memory, session.memory))
    np.testing.assert_array_equal(first[0], second[0])
    assert not np.allclose(session.run(random_inputs(mod, seed=1))[0], first[0])
    # timing runs (one compute pass, no timestamps) keep the last profiled run's per-step times
    profile = session.last_profile
    assert session.time(inputs, repeat=2)["median"] > 0 and session.last_profile == profile and profile


@pytest.mark.parametrize("every", [0, 1, 2])
def test_steps_submitted_in_pieces_give_the_same_numbers(every, lavapipe, monkeypatch):
    # a run hands the GPU every `submit_every` steps as soon as they are recorded
    mod = build_example("conv-relu-pool")
    artifact = relax_vk.build(mod, target="vulkan").artifact()
    assert len(artifact.program["steps"]) > 2
    monkeypatch.setattr(VulkanSession, "submit_every", every)
    session = load(artifact, device=lavapipe)
    inputs = random_inputs(mod)
    profiled = session.run(inputs)
    assert len(session.last_profile) == len(artifact.program["steps"])
    session.profiling = False
    for out, ref in zip(session.run(inputs) + profiled, run_on_cpu(mod, inputs) * 2):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("ahead, spin_ms", [(True, 50.0), (False, 0.0)], ids=["ahead-spinning", "each-run-blocking"])
def test_runs_recorded_ahead_take_each_runs_inputs(ahead, spin_ms, lavapipe, monkeypatch):
    # an unprofiled run submits the command buffer the last run recorded for it, then polls for
    # its outputs (without blocking for up to spin_ms: lavapipe runs these in under 50 ms)
    monkeypatch.setattr(VulkanSession, "record_ahead", ahead)
    monkeypatch.setattr(VulkanSession, "spin_ms", spin_ms)
    mod = build_example("conv-relu-pool")
    session = load(relax_vk.build(mod, target="vulkan").artifact(), device=lavapipe)
    assert session.mapping.spin_ms == spin_ms
    input_sets = [random_inputs(mod, seed=s) for s in range(3)]
    assert_each_run_takes_its_inputs(session, input_sets, [run_on_cpu(mod, x) for x in input_sets])
    assert (session._ahead is not None) == ahead
    # an image output and a buffer output read back from one run
    shape = (1, 2, 3, 5, 4)
    copies = load(two_output_copy_program(shape, "global.texture"), device=lavapipe)
    xs = [[np.random.default_rng(s).standard_normal(shape).astype("float32")] for s in range(3)]
    assert_each_run_takes_its_inputs(copies, xs, [[x[0], x[0]] for x in xs])


def test_busy_time_is_the_gpus_time_of_an_unprofiled_run(lavapipe):
    # one compute pass with two timestamps, in milliseconds
    mod = build_example("conv-relu-pool")
    artifact = relax_vk.build(mod, target="vulkan").artifact()
    session, inputs = load(artifact, device=lavapipe), random_inputs(mod)
    busy, wall = session.busy_ms(inputs, repeat=3), session.time(inputs, repeat=3)["median"]
    assert 0 < busy < 10 * wall + 5, (busy, wall)  # (not nanoseconds; loose: lavapipe's "GPU" shares the test's cores)
    np.testing.assert_allclose(session.run(inputs)[0], run_on_cpu(mod, inputs)[0], rtol=1e-4, atol=1e-4)
    assert np.isnan(load(artifact, device=lavapipe, profile=False).busy_ms(inputs))


def test_a_dropped_session_is_freed_at_once(lavapipe):
    # no reference cycle holds a session (and its device memory) until the cycle collector runs
    import gc
    import weakref

    shape = (1, 2, 3, 5, 4)
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    gc.collect()
    gc.disable()
    try:
        session = load(two_output_copy_program(shape, "global.texture"), device=lavapipe)
        session.profiling = False
        session.run([x])
        session.run([x])  # (holding the next run's recorded commands)
        dropped = weakref.ref(session)
        del session
        assert dropped() is None
    finally:
        gc.enable()


def test_a_cpu_adapter_blocks_at_once_by_default(lavapipe):
    # polling would take a core from a CPU adapter's "GPU"; a GPU polls for up to 2 ms first
    session = load(copy_program((1, 1, 1, 2, 4), "global.texture", target="vulkan"), device=lavapipe)
    assert lavapipe.info["adapter_type"] == "CPU" and session.mapping.spin_ms == 0.0


@pytest.mark.parametrize("scope", ["global.texture", "global.texture-nhwc", "global.texture-weight"])
def test_image_round_trips(scope, lavapipe):
    limit = int(lavapipe.limits["max-texture-dimension-2d"])
    rng = np.random.default_rng(0)
    for label, shape in [("1-wide", (1, 1, 1, 1, 4)), ("odd layers", (3, 1, 5, 7, 4)), ("at the width limit", (1, 1, 1, limit, 4))]:
        if scope_from_name(scope).image_extents(shape).width > limit:
            continue
        x = rng.standard_normal(shape).astype("float32")
        out = load(copy_program(shape, scope, target="vulkan"), device=lavapipe).run([x])[0]
        np.testing.assert_array_equal(out, x, err_msg=f"{scope} {label} {shape}")


def test_copy_between_texture_mappings(lavapipe):
    x = np.random.default_rng(1).standard_normal((2, 3, 5, 7, 4)).astype("float32")
    out = load(copy_program(x.shape, "global.texture", "global.texture-weight", target="vulkan"), device=lavapipe).run([x])[0]
    np.testing.assert_array_equal(out, x)


def test_copies_larger_than_one_dispatch_dimension(lavapipe, monkeypatch):
    # a copy needing more workgroups than one dispatch dimension allows is split over two
    from relax_vk.runtime.vulkan import copies as vulkan_copies, session as vulkan_session

    x = np.random.default_rng(2).standard_normal((1, 3, 8, 16, 4)).astype("float32")
    monkeypatch.setattr(vulkan_session, "copy_grid", lambda items, _max: vulkan_copies.copy_grid(items, 2))
    session = load(copy_program(x.shape, "global.texture", target="vulkan"), device=lavapipe)
    assert any(groups[1] > 1 for *_rest, groups in session.steps)
    np.testing.assert_array_equal(session.run([x])[0], x)


def test_plan_larger_than_the_adapter_is_refused_with_names(lavapipe):
    limit = int(lavapipe.limits["max-texture-dimension-2d"])
    program = copy_program((1, 1, 1, limit + 4, 4), "global.texture", target="vulkan")
    with pytest.raises(DeviceLimitError, match=rf"tensor global.texture .*image {limit + 4}x1x1.*width {limit + 4} > texture2d max width {limit}"):
        load(program, device=lavapipe)


def test_limits_of_a_smaller_device_name_tensor_and_kernel():
    program = relax_vk.build(build_example("rfc-conv2d"), target="vulkan").artifact().program
    roomy = {
        "max-texture-dimension-2d": 16384, "max-texture-array-layers": 2048, "max-compute-invocations-per-workgroup": 1024,
        "max-compute-workgroup-size-x": 1024, "max-compute-workgroup-size-y": 1024, "max-compute-workgroup-size-z": 64,
        "max-compute-workgroups-per-dimension": 65535, "max-storage-buffers-per-shader-stage": 8,
        "max-storage-textures-per-shader-stage": 4, "max-sampled-textures-per-shader-stage": 16,
        "max-storage-buffer-binding-size": 1 << 27, "max-compute-workgroup-storage-size": 32768,
    }  # fmt: skip
    check_limits(program, roomy)
    with pytest.raises(DeviceLimitError, match=r"tensor lv1 \(global.texture, image 56x56x32\) .*32 layers > max array layers 8"):
        check_limits(program, dict(roomy, **{"max-texture-array-layers": 8}))
    with pytest.raises(DeviceLimitError, match=r"kernel \w+ needs workgroups of 256 invocations; .* allows 128"):
        check_limits(program, dict(roomy, **{"max-compute-invocations-per-workgroup": 128}))
    shared = dict(program, kernels=[dict(program["kernels"][0], workgroup_bytes=65536)])
    with pytest.raises(DeviceLimitError, match=r"needs 65536 bytes of workgroup memory; the device allows 32768"):
        check_limits(shared, dict(roomy, **{"max-compute-workgroup-storage-size": 32768}))


def test_rejected_shader_shows_the_error_and_the_shader(lavapipe):
    artifact = relax_vk.build(build_example("rfc-conv2d"), target="vulkan").artifact()
    kernel = artifact.program["kernels"][0]
    start = kernel["shader"]["offset"]
    broken = artifact.source[:start] + artifact.source[start:].replace("textureLoad(", "textureLod(", 1).replace("textureStore(", "textureStor(", 1)
    delta = len(broken) - len(artifact.source)
    program = dict(artifact.program, kernels=[dict(k) for k in artifact.program["kernels"]])
    program["kernels"][0]["shader"] = {"offset": start, "length": kernel["shader"]["length"] + delta}
    for k in program["kernels"][1:]:
        k["shader"] = {"offset": k["shader"]["offset"] + delta, "length": k["shader"]["length"]}
    with pytest.raises(ShaderError) as err:
        load(Artifact(program, broken, artifact.constants), device=lavapipe)
    text = str(err.value)
    assert f"shader for kernel {kernel['name']} was rejected" in text
    assert "textureLod" in err.value.error or "textureStor" in err.value.error  # the driver's own message names the bad call
    assert err.value.error in text and "   1 | // relax_vk: kernel" in text  # shown with the numbered shader


def test_adapter_limits_shape_the_vulkan_target(lavapipe):
    tgt = relax_vk.target.vulkan(adapter=lavapipe)
    limits = relax_vk.target.texture_limits(tgt)
    assert (limits.spatial, limits.depth) == (
        int(lavapipe.limits["max-texture-dimension-2d"]),
        int(lavapipe.limits["max-texture-array-layers"]),
    )
    # explicit limits win over the adapter's
    assert relax_vk.target.texture_limits(relax_vk.target.vulkan(64, adapter=lavapipe)).spatial == 64


def test_opencl_artifact_is_not_run_by_the_vulkan_runtime(lavapipe):
    from relax_vk.runtime.vulkan.session import VulkanSession

    artifact = relax_vk.build(build_example("rfc-conv2d"), target="opencl").artifact()
    with pytest.raises(ValueError, match="built for 'opencl'"):
        VulkanSession(artifact, lavapipe)


def _float16_conv_relu():
    from tvm import relax

    def body(bb, x, w):
        return relax.op.nn.relu(bb.emit(relax.op.nn.conv2d(x, w, padding=1, out_dtype="float16")))

    return module([tensor("x", (1, 16, 32, 32), "float16"), tensor("w", (32, 16, 3, 3), "float16")], body)


def test_float16_model_runs_in_rgba16float_textures(lavapipe):
    assert "shader-f16" in lavapipe.features
    mod = _float16_conv_relu()
    compiled = relax_vk.build(mod, target="vulkan")
    assert "enable f16;" in compiled.source and "texture_storage_2d_array<rgba16float, write>" in compiled.source
    session = load(compiled.artifact(), device=lavapipe)
    textures = [m for t, m in zip(session.tensors, session.memory) if t["image"]]
    assert textures and all(t.format == "rgba16float" for t in textures)
    inputs = random_inputs(mod)
    out = session.run(inputs)[0]
    ref = run_on_cpu(mod, inputs)[0]
    assert out.dtype == np.float16 and float(np.abs(ref).max()) > 1
    # float16 results (TVM's CPU build also computes in float16): a few units in the last place
    np.testing.assert_allclose(out.astype("float32"), ref.astype("float32"), rtol=1e-2, atol=1e-2)


def test_float16_image_round_trip(lavapipe):
    x = np.random.default_rng(3).standard_normal((2, 3, 5, 7, 4)).astype("float16")
    out = load(copy_program(x.shape, "global.texture", "global.texture-weight", target="vulkan", dtype="float16"), device=lavapipe).run([x])[0]
    np.testing.assert_array_equal(out, x)


def test_float16_needs_the_shader_f16_feature():
    program = copy_program((1, 1, 2, 2, 4), "global.texture", target="vulkan", dtype="float16").program
    limits = dict.fromkeys(["max-texture-dimension-2d", "max-texture-array-layers", "max-storage-buffer-binding-size"], 1 << 20)
    with pytest.raises(DeviceLimitError, match=r"tensor in is float16; my adapter lacks the shader-f16 feature"):
        check_limits(program, limits, "my adapter", features=set())
    check_limits(program, limits, "my adapter", features={"shader-f16"})
