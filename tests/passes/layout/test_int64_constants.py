"""NarrowInt64Constants: int64 constants a kernel reads are held as int32 on Vulkan when their
values fit (the same values), left as they are otherwise and on OpenCL."""

import numpy as np
import pytest
from tvm import relax as rx
from tvm.ir.expr import GenericConst

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


@pytest.mark.parametrize("api, values", [("vulkan", np.array([0, 2**31, 5])), ("opencl", np.array([0, 1, 5]))])
def test_constants_past_int32_and_opencl_constants_are_left_alone(api, values):
    mod = _module(values.astype(np.int64))
    out = NarrowInt64Constants(api)(mod)
    assert out.same_as(mod) or [c.tolist() for c in _int64_constants(out)] == [c.tolist() for c in _int64_constants(mod)]
