"""The runtime on pocl: real images, real kernels, numbers checked against TVM's llvm target."""

import numpy as np
import pytest

import relax_vk
from relax_vk.models import EXAMPLES, build_example
from relax_vk.runtime.opencl import find_device
from relax_vk.analysis.reference import random_inputs, run_on_cpu
from relax_vk.runtime import DeviceLimitError, load
from relax_vk.core.scope import scope_from_name
from runtime_helpers import assert_profile_is_sound, copy_program as _copy_program


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_match_the_cpu_reference(name):
    mod = build_example(name)
    session = load(relax_vk.build(mod).artifact(), device="pocl")
    inputs = random_inputs(mod)
    outputs = session.run(inputs)
    for out, ref in zip(outputs, run_on_cpu(mod, inputs)):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    # every kernel and copy of a (warm) run is timed with OpenCL profiling events
    np.testing.assert_array_equal(assert_profile_is_sound(session, inputs)[0], outputs[0])


def test_copy_from_a_shared_arena_into_a_texture():
    # the RFC registry's mixed consumers copy a conv output that shares a buffer arena into a
    # texture; copying between an arena's sub-buffer and an image crashed pocl (a segfault)
    mod = build_example("mixed-consumers")
    artifact = relax_vk.build(mod, registry=relax_vk.rfc_registry()).artifact()
    assert any(step["op"] == "copy" for step in artifact.program["steps"])
    session = load(artifact, device="pocl")
    inputs = random_inputs(mod)
    for out, ref in zip(session.run(inputs), run_on_cpu(mod, inputs)):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_runs_reuse_memory_and_repeat_exactly():
    mod = build_example("conv-relu-pool")
    session = load(relax_vk.build(mod).artifact(), device="pocl")
    memory = list(session.memory)
    inputs = random_inputs(mod)
    first = session.run(inputs)
    second = session.run(inputs)
    assert all(a is b for a, b in zip(memory, session.memory))  # nothing reallocated
    np.testing.assert_array_equal(first[0], second[0])
    other = session.run(random_inputs(mod, seed=1))
    assert not np.allclose(other[0], first[0])


def test_timed_runs_use_the_unprofiled_queue_and_keep_the_profile():
    # a kernel launched at two steps with different tensors gets one kernel object per step
    mod = build_example("conv-relu-pool")
    session = load(relax_vk.build(mod).artifact(), device="pocl")
    assert session.timing_queue is not session.queue
    launches = [k for _, k, *_ in session.launches if k is not None]
    assert len({id(k) for k in launches}) == len(launches)
    inputs = random_inputs(mod)
    first = session.run(inputs)
    profile = session.last_profile
    lat = session.time(inputs, repeat=2)
    assert lat["median"] > 0 and session.last_profile is profile  # timing runs record no profile
    assert session.profiling  # and leave the session profiling
    np.testing.assert_array_equal(session.run(inputs)[0], first[0])
    for out, ref in zip(first, run_on_cpu(mod, inputs)):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    unprofiled = load(relax_vk.build(mod).artifact(), device="pocl", profile=False)
    np.testing.assert_array_equal(unprofiled.run(inputs)[0], first[0])
    assert all(np.isnan(k["ms"]) for k in unprofiled.last_profile)


def test_bad_inputs_are_named():
    mod = build_example("rfc-conv2d")
    session = load(relax_vk.build(mod).artifact(), device="pocl")
    x, w = random_inputs(mod)
    with pytest.raises(ValueError, match="takes 2 inputs"):
        session.run([x])
    with pytest.raises(ValueError, match=r"input w: shape \[32, 64, 3, 2\]"):
        session.run([x, w[..., :2]])
    with pytest.raises(ValueError, match="input x: dtype float64"):
        session.run([x.astype("float64"), w])


def _awkward_shapes():
    width = int(find_device().image2d_max_width)
    return [
        ("1-wide", (1, 1, 1, 1, 4)),
        ("odd layers", (3, 1, 5, 7, 4)),
        ("at the width limit", (1, 1, 1, width, 4)),
    ]


@pytest.mark.parametrize("scope", ["global.texture", "global.texture-nhwc", "global.texture-weight"])
def test_image_round_trips(scope):
    rng = np.random.default_rng(0)
    for label, shape in _awkward_shapes():
        s = scope_from_name(scope)
        if s.image_extents(shape).width > int(find_device().image2d_max_width):
            continue  # this mapping makes the shape wider than the device allows
        x = rng.standard_normal(shape).astype("float32")
        out = load(_copy_program(shape, scope), device="pocl").run([x])[0]
        np.testing.assert_array_equal(out, x, err_msg=f"{scope} {label} {shape}")


def test_copy_between_texture_mappings():
    x = np.random.default_rng(1).standard_normal((2, 3, 5, 7, 4)).astype("float32")
    out = load(_copy_program(x.shape, "global.texture", "global.texture-weight"), device="pocl").run([x])[0]
    np.testing.assert_array_equal(out, x)


def test_plan_larger_than_the_device_is_refused_with_names():
    width = int(find_device().image2d_max_width)
    shape = (1, 1, 1, width + 4, 4)
    program = _copy_program(shape, "global.texture")
    with pytest.raises(DeviceLimitError, match=rf"tensor global.texture .*image {width + 4}x1x1.*width {width + 4} > image2d max width {width}"):
        load(program, device="pocl")
