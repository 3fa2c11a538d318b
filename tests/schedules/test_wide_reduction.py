"""wide_reduction: a long max / min to few outputs is a workgroup an output, its terms split over
the threads. Before, such a kernel (which dlight's sum-only rules decline) ran a thread an output
over every term: a whole-tensor ReduceMax over 1x64x40x40 took 102,400 steps in one invocation,
which lavapipe refuses (its 65,535-iteration loop cap)."""

import numpy as np
import pytest
import tvm
from tvm import relax

import relax_vk
from relax_vk.runtime import load

from helpers import module, tensor

CASES = [((1, 64, 40, 40), None, "max"), ((1, 16, 30, 30), [1, 2, 3], "min"), ((70001,), None, "max"), ((24, 700), [1], "min"), ((900, 5), [0], "max")]


def _schedules(compiled):
    return [f.attrs["relax_vk.schedule"] for _, f in compiled.lowered.functions_items() if isinstance(f, tvm.tirx.PrimFunc) and "relax_vk.schedule" in (f.attrs or {})]


@pytest.mark.one_api("api")
@pytest.mark.parametrize("api, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.parametrize("shape, axes, kind", CASES, ids=[f"{k}-{'x'.join(map(str, s))}" for s, _, k in CASES])
def test_long_max_and_min_reductions_split_over_a_workgroup(shape, axes, kind, api, device, request):
    request.getfixturevalue(device)
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype("float32")
    op = relax.op.max if kind == "max" else relax.op.min
    compiled = relax_vk.build(module([tensor("x", shape)], lambda bb, v: op(v, axes)), api)
    assert _schedules(compiled) == ["wide_reduction"]
    want = x.max(axis=tuple(axes) if axes else None) if kind == "max" else x.min(axis=tuple(axes) if axes else None)
    np.testing.assert_array_equal(load(compiled.artifact(), device=device).run([x])[0], want)


def test_short_reductions_and_many_outputs_keep_a_thread_an_output():
    for shape, axes in (((64, 100), [1]), ((8192, 300), [1])):
        compiled = relax_vk.build(module([tensor("x", shape)], lambda bb, v: relax.op.max(v, axes)), "opencl")
        assert "wide_reduction" not in _schedules(compiled)
