"""A model's conv calls and their workload keys (relax_vk.schedules.workloads) agree with what the
conv schedule reads from the kernel it builds, before and after the layout stage."""

import pytest

from relax_vk.pipeline import layout_stage
from relax_vk.schedules.workloads import ConvSpec, conv_workload, workload_counts
from relax_vk.tools.tune import build_case, candidate_module

SPECS = [
    ConvSpec((1, 3, 17, 17), (8, 3, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1),  # 3 channels: padded to a texel
    ConvSpec((1, 6, 9, 9), (6, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 6),  # depthwise, channels not a texel multiple
    ConvSpec((1, 8, 10, 10), (12, 8, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1),  # dilated
    ConvSpec((1, 16, 7, 7), (8, 16, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # 1x1
]


@pytest.mark.parametrize("spec", SPECS, ids=["first", "depthwise", "dilated", "1x1"])
def test_workload_of_a_call_is_the_kernels(spec):
    built = build_case(spec, "opencl", "buffer", threads=(64,))
    assert built is not None
    _, key, default, configs = built
    assert conv_workload(spec).key() == key and default in configs
    # the same key from the packed call after the layout stage
    assert workload_counts(layout_stage("opencl")(candidate_module(spec, 1))) == {key: 1}
