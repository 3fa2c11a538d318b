"""The device half of the tuner (relax_vk.runtime.measure): its inputs and its reference."""

import numpy as np
import pytest
import torch

from relax_vk.runtime.measure import best_record, conv2d_reference, parse_config, pattern


def test_pattern_is_deterministic_and_spread():
    a, b = pattern((2, 3, 5, 7), 1), pattern((2, 3, 5, 7), 1)
    assert a.dtype == np.float32 and np.array_equal(a, b)
    assert not np.array_equal(a, pattern((2, 3, 5, 7), 2))
    assert -0.5 <= a.min() < -0.3 and 0.3 < a.max() < 0.5 and len(np.unique(a)) == a.size


@pytest.mark.parametrize(
    "data, weight, strides, padding, dilation, groups",
    [
        ((1, 8, 9, 11), (16, 8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
        ((2, 3, 13, 13), (5, 3, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1),
        ((1, 12, 10, 10), (12, 1, 3, 3), (2, 2), (1, 0, 1, 0), (1, 1), 12),
        ((1, 8, 12, 12), (8, 4, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 2),
        ((1, 6, 5, 5), (10, 6, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ],
)
def test_reference_conv_matches_torch(data, weight, strides, padding, dilation, groups):
    x, w = pattern(data, 1), pattern(weight, 2)
    pt, pl, pb, pr = padding
    xt = torch.nn.functional.pad(torch.from_numpy(x).double(), (pl, pr, pt, pb))
    want = torch.nn.functional.conv2d(xt, torch.from_numpy(w).double(), stride=strides, dilation=dilation, groups=groups).numpy()
    got = conv2d_reference(x, w, strides, padding, dilation, groups)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_best_record_takes_the_fastest_correct_candidate():
    result = {"api": "opencl", "memory": "texture", "workload": "conv_x", "default": "px4_oc2_t64", "candidates": [
        {"config": "px4_oc2_t64", "memory": "texture", "flops": 2_000_000, "ok": True, "ms": 0.5, "max_err": 1e-6},
        {"config": "px2_oc4_t32", "memory": "texture", "flops": 2_000_000, "ok": False, "ms": 0.1, "max_err": 3.0},
        {"config": "px1_oc1_t128", "memory": "texture", "flops": 2_000_000, "ok": True, "ms": 0.25, "max_err": 1e-6},
    ]}  # fmt: skip
    record = best_record(result, "Some GPU")
    assert record["config"] == {"px": 1, "oc": 1, "threads": 128}  # the wrong but faster one is not taken
    assert record["ms"] == 0.25 and record["default_ms"] == 0.5 and round(record["gflops"]) == 8
    result["candidates"] = [dict(c, ok=False) for c in result["candidates"]]
    assert best_record(result, "Some GPU") is None
    with pytest.raises(ValueError):
        parse_config("px4_oc2")
