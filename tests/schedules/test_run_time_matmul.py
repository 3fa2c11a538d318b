"""Linear layers over run-time rows (a decoder's [S, K] @ [K, N], S per call) take dlight's matmul
rule with its portable configuration; matmuls of two run-time dims (attention's) and static ones
keep their rules."""

import re

import numpy as np
import pytest
import tvm
from tvm import relax, tirx

from relax_vk.schedules import RULES, schedule_kernel
from relax_vk.schedules.analysis import is_run_time_matmul


def _kernel(x_shape, w_shape, w_const=True):
    x = relax.Var("x", relax.TensorType(x_shape, "float32"))
    params = [x]
    if w_const:
        w = relax.const(np.random.default_rng(0).standard_normal([int(d) for d in w_shape]).astype("float32"))
    else:
        w = relax.Var("w", relax.TensorType(w_shape, "float32"))
        params.append(w)
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            y = bb.emit_output(relax.op.matmul(x, w))
        bb.emit_func_output(y)
    mod = relax.transform.LegalizeOps()(bb.get())
    return next(f for _, f in mod.functions_items() if isinstance(f, tirx.PrimFunc))


S, T = tirx.Var("S", "int64"), tirx.Var("T", "int64")


@pytest.mark.parametrize(
    "x_shape, w_shape, w_const, expected",
    [
        ((S, 64), (64, 96), True, True),  # a linear layer over run-time rows
        ((4, 64), (64, 96), True, False),  # static: the other rules
        ((2, S, 16), (2, 16, T), False, False),  # attention's scores: two run-time dims
    ],
)
def test_which_matmuls_are_linear_layers_over_run_time_rows(x_shape, w_shape, w_const, expected):
    assert is_run_time_matmul(_kernel(x_shape, w_shape, w_const)) is expected


def test_a_linear_layer_over_run_time_rows_is_scheduled_by_the_matmul_rule_and_lowers():
    target = tvm.target.Target("opencl")
    with target:
        scheduled = schedule_kernel(_kernel((S, 64), (64, 96)), target, RULES, "linear")
    assert str(scheduled.attrs["relax_vk.schedule"]) == "gpu.matmul"
    widths = [int(w) for w in re.findall(r"T\.vectorized\(T\.int64\((\d+)\)\)", scheduled.script())]
    assert all(w <= 4 for w in widths), widths  # (WGSL vectors hold 4 lanes)
