"""NarrowInt64Constants: int64 constants a kernel reads are held as int32 on Vulkan when their
values fit (the same values); past int32, a clamp's bound is saturated and anything else refused by
op (it was wrapped: its low word read); OpenCL's are left alone."""

import numpy as np
import pytest
from tvm import relax as rx
from tvm.ir.expr import GenericConst

from relax_vk.core.errors import UnsupportedError
from relax_vk.passes import NarrowInt64Constants


def _module(values: np.ndarray):
    bb = rx.BlockBuilder()
    x = rx.Var("x", rx.TensorType((2, 3), "int64"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(rx.op.add(rx.op.add(x, rx.const(values, "int64")), rx.const(np.int64(1), "int64")))
        bb.emit_func_output(y)
    return bb.get()


def _int64_constants(mod):
    found = []
    rx.analysis.post_order_visit(mod["main"], lambda e: found.append(e) if isinstance(e, GenericConst) and str(e.ty.dtype) == "int64" else None)
    return [c.value.numpy() for c in found]


def test_fitting_constants_become_int32_cast_up_on_vulkan():
    values = np.array([-(2**31), 0, 2**31 - 1], dtype=np.int64)
    out = NarrowInt64Constants("vulkan")(_module(values))
    assert [c.shape for c in _int64_constants(out)] == [()]  # the scalar stays an immediate
    casts = [b.value for block in out["main"].body.blocks for b in block.bindings if isinstance(b.value, rx.Call) and b.value.op.name == "relax.astype"]
    assert len(casts) == 1 and str(casts[0].attrs.dtype) == "int64"
    held = casts[0].args[0]
    assert str(held.ty.dtype) == "int32"
    np.testing.assert_array_equal(held.value.numpy(), values)


def test_opencl_constants_are_left_alone():
    mod = _module(np.array([0, 2**40, 5], np.int64))
    out = NarrowInt64Constants("opencl")(mod)
    assert out.same_as(mod) or [c.tolist() for c in _int64_constants(out)] == [c.tolist() for c in _int64_constants(mod)]


def test_an_operand_past_int32_is_refused_on_vulkan_naming_the_op_and_value():
    with pytest.raises(UnsupportedError, match=r"read by relax.add holds 2147483648, outside int32"):
        NarrowInt64Constants("vulkan")(_module(np.array([0, 2**31, 5], np.int64)))


def _clamp(op, values):
    bb = rx.BlockBuilder()
    x = rx.Var("x", rx.TensorType((3,), "int64"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(op(x, rx.const(values, "int64")))
        bb.emit_func_output(y)
    return bb.get()


@pytest.mark.parametrize("op, values, held", [(rx.op.minimum, [2**63 - 1, 3, 2**40], [2**31 - 1, 3, 2**31 - 1]),
                                              (rx.op.maximum, [-(2**63), -3, 4], [-(2**31), -3, 4])])  # fmt: skip
def test_a_clamps_bound_past_int32_is_saturated(op, values, held):
    out = NarrowInt64Constants("vulkan")(_clamp(op, np.array(values, np.int64)))
    casts = [b.value for block in out["main"].body.blocks for b in block.bindings if isinstance(b.value, rx.Call) and b.value.op.name == "relax.astype"]
    assert len(casts) == 1 and casts[0].args[0].value.numpy().tolist() == held


@pytest.mark.parametrize("op, values", [(rx.op.minimum, [-(2**40), 3]), (rx.op.maximum, [2**40, 3])])
def test_a_clamps_bound_that_int32_values_pass_is_refused(op, values):
    with pytest.raises(UnsupportedError, match="outside int32"):
        NarrowInt64Constants("vulkan")(_clamp(op, np.array(values + [0], np.int64)))
