"""Hand-made programs for runtime tests (no compiler involved)."""

import numpy as np

from relax_vk.serialization.artifact import Artifact
from relax_vk.core.scope import scope_from_name


def copy_program(shape, scope_a, scope_b=None, target="opencl", dtype="float32"):
    """input buffer -> texture(scope_a) [-> texture(scope_b)] -> output buffer, as scope copies only."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    tensors = [{"id": 0, "name": "in", "shape": list(shape), "dtype": dtype, "scope": "global", "image": None, "kind": "input", "bytes": nbytes}]
    chain = [scope_a] + ([scope_b] if scope_b else [])
    for scope in chain:
        s = scope_from_name(scope)
        tensors.append({"id": len(tensors), "name": scope, "shape": list(shape), "dtype": dtype, "scope": scope,
                        "image": list(s.image_extents(shape).as_tuple()), "kind": "intermediate", "bytes": tensors[0]["bytes"]})  # fmt: skip
    tensors.append(dict(tensors[0], id=len(tensors), name="out", kind="intermediate"))
    steps = [{"op": "copy", "src": i, "dst": i + 1} for i in range(len(tensors) - 1)]
    program = {"format": "relax_vk.program", "target": target, "model": {}, "tensors": tensors, "kernels": [],
               "steps": steps, "inputs": [0], "outputs": [len(tensors) - 1]}  # fmt: skip
    return Artifact(program, "__kernel void relax_vk_noop(void) {}" if target == "opencl" else "")


def assert_profile_is_sound(session, inputs):
    """A profiled run's profile, checked against what is known about the run without it: one entry
    per step of the program, named after its kernel (or ``copy SRC->DST``), every time positive,
    and a device span no longer than the wall-clock time of the same run (measured on the host
    around it) and no shorter than its steps' total (the profile tiles the span, idle gaps aside).
    Returns the run's outputs."""
    import time

    start = time.perf_counter()
    outputs = session.run(inputs)
    wall_ms = (time.perf_counter() - start) * 1e3
    profile, steps = session.last_profile, session.program["steps"]
    assert len(profile) == len(steps)
    for entry, step in zip(profile, steps):
        assert entry["name"] == step["kernel"] if step["op"] == "launch" else entry["name"].startswith("copy ")
        assert entry["ms"] > 0, entry
    total = sum(k["ms"] for k in profile)
    assert total <= session.last_device_ms * (1 + 1e-9) <= wall_ms, (total, session.last_device_ms, wall_ms)
    return outputs


def two_output_copy_program(shape, scope, target="vulkan"):
    """:func:`copy_program` whose outputs are its texture (``scope``) and its output buffer: a
    program that reads back an image and a buffer."""
    artifact = copy_program(shape, scope, target=target)
    artifact.program["outputs"] = [1, 2]
    return artifact


def assert_each_run_takes_its_inputs(session, input_sets, expected):
    """Runs of ``input_sets`` in an order that changes the inputs from run to run and repeats some
    (a, b, a, c, c, b), unprofiled but for one run in the middle where the session can profile,
    each run's outputs equal to ``expected`` of its own inputs (<= 1e-5): a runtime that records a
    run's commands ahead of it must read the inputs written for that run, never the last run's,
    and the profiled run must profile itself (a session that has not profiled before: a run of
    the unstamped commands recorded ahead would leave its timestamps zero)."""
    order, can_profile = [0, 1, 0, 2, 2, 1], bool(session.profiling)
    session.profiling = False
    for k, i in enumerate(order):
        session.profiling = can_profile and k == 3
        got = session.run(input_sets[i])
        if session.profiling:  # a profile of this run (the first profiled one: a run of commands recorded unstamped has none)
            assert session.last_profile and all(0 <= p["ms"] < 1e4 for p in session.last_profile), session.last_profile
            assert 0 < session.last_device_ms < 1e4, session.last_device_ms
        assert len(got) == len(expected[i])
        for g, e in zip(got, expected[i]):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5, err_msg=f"run {k} (inputs {i})")
    session.profiling = False
