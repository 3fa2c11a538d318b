"""Run-time dims: a size that is a condition on them (a ceil-mode pool over a run-time map) is
refused by name before any pass meets it (it crashed TVM's type normalizer in a later pass)."""

import pytest
from tvm import relax, tirx

import relax_vk
from relax_vk.core.dims import with_dim_ranges
from relax_vk.core.errors import UnsupportedError

H = tirx.Var("H", "int64")


def _pool(ceil_mode: bool):
    x = relax.Var("x", relax.TensorType((1, 4, H, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.nn.max_pool2d(x, (2, 2), (2, 2), padding=(1, 1, 1, 1), ceil_mode=ceil_mode))
        bb.emit_func_output(y)
    return with_dim_ranges(bb.get(), {"H": (4, 32)})


def test_a_size_that_is_a_condition_on_run_time_dims_is_refused_by_name():
    with pytest.raises(UnsupportedError, match=r"relax\.nn\.max_pool2d .* a condition on the run-time dims"):
        relax_vk.build(_pool(ceil_mode=True), "opencl")
    assert relax_vk.build(_pool(ceil_mode=False), "opencl").artifact() is not None  # (floor mode: plain arithmetic)
