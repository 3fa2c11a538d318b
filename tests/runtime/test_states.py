"""States (relax_vk.core.states) in the native runtime, on hand-made programs (no compiler): inputs
the session keeps on the device, zeroed at load and by reset_states, each run's update written into
their rows at the offset the run's dims give; the caller never sets them nor reads their updates.

The program: x [S, 4] -> copy -> new (the update of state `past` [8, 4] at rows T-S..T-1), and past
-> copy -> seen (an output: the state as this run found it, before its update)."""

import numpy as np
import pytest

from relax_vk.runtime import Session
from relax_vk.serialization.artifact import Artifact, ArtifactError
from relax_vk.runtime import validate

ROWS = 8


def _program(target: str, **change) -> Artifact:
    row = {"dtype": "float32", "scope": "global", "image": None}
    tensors = [
        dict(row, id=0, name="x", kind="input", shape=[ROWS, 4], shape_expr=["S", 4], bytes=ROWS * 16),
        dict(row, id=1, name="mask", kind="input", shape=[1, ROWS], shape_expr=[1, "T"], bytes=ROWS * 4),
        dict(row, id=2, name="past", kind="input", shape=[ROWS, 4], bytes=ROWS * 16),
        dict(row, id=3, name="new", kind="intermediate", shape=[ROWS, 4], shape_expr=["S", 4], bytes=ROWS * 16),
        dict(row, id=4, name="seen", kind="intermediate", shape=[ROWS, 4], bytes=ROWS * 16),
    ]
    program = {"format": "relax_vk.program", "target": target, "model": {},
               "dims": [{"name": "S", "min": 1, "max": ROWS}, {"name": "T", "min": 1, "max": ROWS}],
               "tensors": tensors, "kernels": [], "steps": [{"op": "copy", "src": 0, "dst": 3}, {"op": "copy", "src": 2, "dst": 4}],
               "inputs": [0, 1, 2], "outputs": [3, 4], "states": [{"tensor": 2, "update": 3, "offset": ["-", "T", "S"]}]}  # fmt: skip
    program.update(change)
    return Artifact(program, "__kernel void relax_vk_noop(void) {}" if target == "opencl" else "")


@pytest.fixture(params=["opencl", "vulkan"])
def session(request):
    device = request.getfixturevalue("pocl" if request.param == "opencl" else "lavapipe")
    return Session(_program(request.param), device=device)


def _run(session, x, total):
    (seen,) = session.run([x, np.ones((1, total), np.float32)])
    return seen


def test_the_caller_sees_neither_states_nor_their_updates(session):
    assert [i["name"] for i in session.inputs] == ["x", "mask"]
    assert [o["name"] for o in session.outputs] == ["seen"]
    assert session.states == ["past"]


def test_updates_land_at_their_rows_run_after_run_and_reset_zeroes(session):
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((n, 4)).astype(np.float32) for n in (3, 1, 2))
    np.testing.assert_array_equal(_run(session, a, 3), np.zeros((ROWS, 4), np.float32))  # zeroed at load
    expected = np.zeros((ROWS, 4), np.float32)
    expected[0:3] = a
    np.testing.assert_array_equal(_run(session, b, 4), expected)  # a at rows 0..2 (T=3, S=3)
    expected[3:4] = b
    np.testing.assert_array_equal(_run(session, c, 6), expected)  # b at row 3
    expected[4:6] = c
    np.testing.assert_array_equal(_run(session, b, 7), expected)
    session.reset_states()
    np.testing.assert_array_equal(_run(session, a, 3), np.zeros((ROWS, 4), np.float32))


def test_a_run_whose_rows_fall_outside_the_state_is_refused_and_changes_nothing(session):
    x = np.ones((3, 4), np.float32)
    _run(session, x, 3)
    objects = session.device_objects
    with pytest.raises(ValueError, match=r"state past: this run's new goes to rows -1\.\.1, outside its 8 rows at S=3, T=2"):
        _run(session, 2 * x, 2)
    expected = np.zeros((ROWS, 4), np.float32)
    expected[:3] = 1
    np.testing.assert_array_equal(_run(session, x[:1], 4), expected)  # the refused run wrote nothing
    assert session.device_objects == objects


@pytest.mark.parametrize(
    "change, message",
    [
        ({"states": [{"tensor": 4, "update": 3, "offset": 0}]}, "the state is not an input"),
        ({"states": [{"tensor": 2, "update": 0, "offset": 0}]}, "the update is not an output"),
        ({"states": [{"tensor": 2, "update": 3, "offset": "Q"}]}, "offset"),
        ({"states": [{"tensor": 2, "update": 3, "offset": 0}, {"tensor": 1, "update": 3, "offset": 0}]}, "a tensor serves two states"),
        ({"states": [{"tensor": 2, "update": 3}]}, r"is not \{tensor, update, offset\}"),
        ({"states": {"tensor": 2}}, "is not a list"),
    ],
)
def test_a_bad_state_fails_validation_naming_it(change, message):
    with pytest.raises(ArtifactError, match=message):
        validate(_program("opencl", **change))


@pytest.mark.parametrize(
    "state, message",
    [
        ({"shape": [ROWS // 2, 8]}, r"the update \[8, 4\] is not rows of the state \[4, 8\]"),
        ({"dtype": "int32"}, "int32 updated by float32"),
        ({"shape_expr": ["T", 4]}, "a state has a fixed shape"),
    ],
)
def test_a_state_that_its_update_is_not_rows_of_is_refused(state, message):
    program = _program("opencl").program
    program["tensors"][2].update(state)  # (the same bytes: the rest of the program stays valid)
    with pytest.raises(ArtifactError, match=r"state past \(updated by new\): " + message):
        validate(Artifact(program, "__kernel void relax_vk_noop(void) {}"))
