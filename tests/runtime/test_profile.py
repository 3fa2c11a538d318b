"""Profiles that add up: per-step times tile the run's device span (relax_vk.runtime.session.step_times)."""

from relax_vk.runtime.session import step_times


def test_overlapping_stamps_are_clipped_to_the_timeline():
    # NVIDIA's Vulkan driver stamps a pass's start at the top of the pipe: pairs overlap
    begins, ends = [0, 100, 150, 400], [300, 500, 600, 700]
    profile, span = step_times(["a", "b", "c", "d"], begins, ends)
    assert [round(p["ms"] * 1e6) for p in profile] == [300, 200, 100, 100]
    assert round(span * 1e6) == 700 and sum(p["ms"] for p in profile) <= span + 1e-12


def test_gaps_are_not_charged_to_a_step():
    profile, span = step_times(["a", "b"], [0, 1000], [100, 1200])
    assert [round(p["ms"] * 1e6) for p in profile] == [100, 200]
    assert round(span * 1e6) == 1200


def test_a_stamp_out_of_order_gives_zero_not_negative():
    profile, _ = step_times(["a", "b"], [0, 50], [100, 80])
    assert [round(p["ms"] * 1e6) for p in profile] == [100, 0]


def test_steps_and_idle_gaps_add_up_to_the_span():
    """For any stamps (overlapping, out of order, with gaps): every step's time is non-negative,
    and the steps plus the idle time between them (computed here from the stamps alone: a step
    starting after everything before it has ended) add up to the span from the first start to the
    last end, which is what a run's device time is."""
    import numpy as np

    rng = np.random.default_rng(0)
    for _ in range(500):
        n = int(rng.integers(1, 12))
        begins = np.cumsum(rng.integers(-50, 200, n)).clip(0)
        ends = begins + rng.integers(-20, 300, n)
        profile, span = step_times([f"k{i}" for i in range(n)], begins, ends)
        assert len(profile) == n and all(p["ms"] >= 0 for p in profile)
        idle, reached = 0, int(begins[0])
        for b, e in zip(begins, ends):
            idle += max(0, int(b) - reached)
            reached = max(reached, int(b), int(e))
        assert np.isclose(sum(p["ms"] for p in profile) + idle * 1e-6, span, rtol=0, atol=1e-9)
        assert np.isclose(span, (reached - int(begins[0])) * 1e-6, rtol=0, atol=1e-12)


def test_step_starts_place_steps_and_gaps_on_the_timeline():
    # the overlapping stamps of the first test: each step starts where the device began it
    profile, span = step_times(["a", "b", "c", "d"], [0, 100, 150, 400], [300, 500, 600, 700])
    assert [round(p["start_ms"] * 1e6) for p in profile] == [0, 300, 500, 600]
    profile, span = step_times(["a", "b"], [0, 1000], [100, 1200])
    assert [round(p["start_ms"] * 1e6) for p in profile] == [0, 1000]  # the gap 100..1000: idle, before b
    assert round((profile[-1]["start_ms"] + profile[-1]["ms"]) * 1e6) == round(span * 1e6)
