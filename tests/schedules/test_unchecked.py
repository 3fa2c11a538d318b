"""The schedule relax_vk's rules use: TVM's primitives without their Python argument checks, with
the same results and still refusing a wrong argument by type."""

import pytest
import tvm_ffi
from tvm import s_tir, te

from relax_vk.schedules.unchecked import UncheckedSchedule, new_schedule


def _func():
    a = te.placeholder((128,), name="a")
    b = te.compute((128,), lambda i: a[i] * 2.0, name="b")
    return te.create_prim_func([a, b])


def _scheduled(sch):
    block = sch.get_sblock("b")
    (loop,) = sch.get_loops(block)
    _, inner = sch.split(loop, [None, 32])
    sch.bind(inner, "threadIdx.x")
    return sch.mod


def test_same_schedule_as_tvms_class():
    sch = new_schedule(_func())
    assert isinstance(sch, UncheckedSchedule) and isinstance(sch, s_tir.Schedule)
    assert tvm_ffi.structural_equal(_scheduled(sch), _scheduled(s_tir.Schedule(_func())))
    # the primitives are TVM's own functions, not type_checked's wrappers
    assert UncheckedSchedule.split is s_tir.Schedule.split.__wrapped__


def test_a_wrong_argument_is_still_a_type_error_naming_it():
    sch = new_schedule(_func())
    block = sch.get_sblock("b")
    with pytest.raises(TypeError, match="LoopRV"):
        sch.split(block, [2, None])
