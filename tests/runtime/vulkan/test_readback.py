"""Reading a Vulkan run's outputs back (relax_vk/runtime/vulkan/readback.py): the wait's sleep
before it polls (given the shortest of the recent waits), and a session that sleeps, polls and
blocks on lavapipe giving right numbers."""

import numpy as np
import pytest

import relax_vk
from relax_vk.analysis.reference import random_inputs, run_on_cpu
from relax_vk.models import build_example
from relax_vk.runtime import load, select_adapter
from relax_vk.runtime.vulkan.readback import WAITS_KEPT, sleep_before_polling


@pytest.mark.parametrize("last_wait_ms, spin_ms, sleep_ms", [
    (None, 2.0, 0.0),   # no wait yet: poll at once
    (10.0, 0.0, 0.0),   # no budget: block at once (a blocking wait costs the host nothing)
    (1.5, 2.0, 0.0),    # the budget covers the whole wait
    (10.0, 2.0, 9.0),   # a tenth of the wait before it
    (2.1, 2.0, 1.89),   # at least 0.2 ms ... (a tenth: 0.21)
    (2.5, 2.4, 2.25),   # ... (0.25)
    (30.0, 2.0, 28.0),  # at most the budget
    (3.0, 0.1, 2.9),    # (the budget below 0.2 ms)
])  # fmt: skip
def test_a_wait_sleeps_until_shortly_before_the_shortest_recent_waits_end(last_wait_ms, spin_ms, sleep_ms):
    last = None if last_wait_ms is None else last_wait_ms * 1e-3
    assert sleep_before_polling(last, spin_ms * 1e-3) == pytest.approx(sleep_ms * 1e-3, abs=1e-12)


def test_runs_that_sleep_before_polling_give_the_same_numbers():
    # lavapipe's runs of this model mostly take longer than a 0.1 ms budget, so unprofiled waits
    # after the first sleep (unless lavapipe was done while the next run was recorded); a profiled
    # run (slower) neither sleeps nor counts among the waits
    adapter = select_adapter("lavapipe")
    mod = build_example("conv-relu-pool")
    session = load(relax_vk.build(mod, target="vulkan").artifact(), device=adapter)
    session.mapping.spin_ms = 0.1
    input_sets = [random_inputs(mod, seed=s) for s in range(2)]
    expected = [run_on_cpu(mod, x) for x in input_sets]
    assert session.profiling
    session.run(input_sets[0])
    assert not session.mapping.waits_s
    session.profiling = False
    for k in range(10):
        got = session.run(input_sets[k % 2])
        np.testing.assert_allclose(got[0], expected[k % 2][0], rtol=1e-4, atol=1e-4)
        assert len(session.mapping.waits_s) == min(k + 1, WAITS_KEPT) and min(session.mapping.waits_s) >= 0
