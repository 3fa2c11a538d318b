"""LowerBoolVectorCasts: a cast of a boolean vector is a select (true is 1 in every lane; OpenCL's
vector comparisons are -1). End to end: tests/schedules/test_token_kernels.py, a vectorized
``where`` in the one-kernel softmax."""

import tvm
from tvm import tirx
from tvm.ir.prim import expr as E

from relax_vk.codegen.bool_vectors import LowerBoolVectorCasts


def _func(value, dtype):
    out = tirx.decl_buffer((4,), dtype, "out")
    x = tirx.decl_buffer((4,), "float32", "x")
    store = tirx.BufferStore(out, value(tirx.BufferLoad(x, [tirx.Ramp(0, 1, 4)])), [tirx.Ramp(0, 1, 4)])
    return tirx.PrimFunc([x, out], store)


def test_vector_bool_casts_become_selects_of_one_and_zero():
    half = tirx.Broadcast(tirx.const(0.5, "float32"), 4)
    for dtype in ("int32x4", "float32x4", "int64x4"):
        func = _func(lambda v, dtype=dtype: tirx.Cast(dtype, v < half), dtype.split("x")[0])
        out = LowerBoolVectorCasts()(tvm.IRModule({"main": func}))["main"]
        value = out.body.value
        assert isinstance(value, E.Select) and str(value.condition.ty.dtype) == "boolx4", out.script()
        assert str(value.true_value.ty.dtype) == dtype and float(value.true_value.value.value) == 1.0
        assert float(value.false_value.value.value) == 0.0


def test_other_casts_are_left_alone():
    func = _func(lambda v: tirx.Cast("int32x4", v), "int32")  # a float vector: no change
    out = LowerBoolVectorCasts()(tvm.IRModule({"main": func}))["main"]
    assert "T.Cast" in out.script() and "T.Select" not in out.script()
    scalar = tirx.Cast("int32", tirx.const(1.0, "float32") < tirx.const(2.0, "float32"))
    from relax_vk.codegen.bool_vectors import _select

    assert isinstance(_select(scalar), E.Cast)  # scalar bools print as 0/1 already
