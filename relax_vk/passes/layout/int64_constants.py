"""NarrowInt64Constants: int64 constants a kernel reads are held as int32 on APIs without int64
buffers.

Requires: a target API; runs after :class:`~relax_vk.passes.layout.fold_small_constants.FoldSmallConstants`
(which would fold the cast back).

Guarantees: on an API whose buffers cannot hold int64 (Vulkan: WGSL has no 64-bit integers;
:func:`~relax_vk.passes.layout.edge_dtypes.device_dtype`), every int64 tensor constant that is an
argument of a call in ``main`` and whose values all fit int32 becomes
``astype(<the same values as int32>, "int64")``: the kernel that reads it gets an int32 buffer and
casts in registers (the cast fuses into it; WGSL computes int64 in i32, :mod:`relax_vk.codegen.wgsl`).
The values are the same, so nothing changes but the buffer's dtype. A constant with a value
outside int32 cannot be held: where it is a bound that no int32 value passes (``minimum(x,
INT64_MAX)``, ``maximum(x, INT64_MIN)``: a clamp as exporters write it) it is saturated to int32's
bound, the same result for every value a Vulkan kernel holds; anywhere else (an operand, an output)
the build is refused naming the op and the value, never wrapped (its low word read, as a 64-bit
buffer's elements are: ``[2**40] + 1`` came out 1). APIs that hold int64 (OpenCL) are untouched.

Why: importers compute index arithmetic with int64 constants, e.g. ONNX GatherND's negative-index
``where(i < 0, i + dims, i)`` with ``dims`` the data's shape as an int64 tensor; the kernel that
adds them read an int64 buffer, which no WGSL shader can bind.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import GenericConst

from ...core.errors import UnsupportedError
from .edge_dtypes import device_dtype
from .fold_small_constants import fits_int32

_I32 = (-(2**31), 2**31 - 1)


def _wide(arg) -> bool:
    """An int64 constant holding a value outside int32."""
    return (isinstance(arg, GenericConst) and isinstance(arg.ty, relax.TensorType) and str(arg.ty.dtype) == "int64"
            and not fits_int32(arg.value.numpy()))  # fmt: skip


def _saturated(op: str, values: np.ndarray):
    """``values`` clipped to int32 where ``op`` gives every int32 operand the same result with them
    (a minimum's bounds above int32, a maximum's below), else None."""
    if op == "relax.minimum" and int(values.min()) >= _I32[0]:
        return np.minimum(values, _I32[1])
    if op == "relax.maximum" and int(values.max()) <= _I32[1]:
        return np.maximum(values, _I32[0])
    return None


def _refuse(values: np.ndarray, where: str) -> UnsupportedError:
    flat = values.reshape(-1)
    big = int(flat[np.argmax((flat < _I32[0]) | (flat > _I32[1]))])
    return UnsupportedError(f"an int64 constant {where} holds {big}, outside int32: Vulkan kernels compute int64 values in 32 bits "
                            "(WGSL has no 64-bit integers), so it cannot be held; build for OpenCL, or keep the model's integers within int32")


def _narrowable(arg) -> bool:
    if not isinstance(arg, GenericConst) or not isinstance(arg.ty, relax.TensorType) or str(arg.ty.dtype) != "int64":
        return False
    values = arg.value.numpy()
    # (a scalar is an immediate in the kernel that reads it, not a buffer)
    return values.ndim > 0 and fits_int32(values)


@relax.expr_functor.visitor
class _FindWide(relax.PyExprVisitor):
    """Raises on an int64 constant past int32 that no call reads (an output, a tuple's field)."""

    def visit_constant_(self, const):
        if _wide(const):
            raise _refuse(const.value.numpy(), "in a tuple or an output of the model")


@relax.expr_functor.mutator
class _Narrow(relax.PyExprMutator):
    def visit_call_(self, call):
        call = super().visit_call_(call)
        if not isinstance(call.op, tvm.ir.Op):
            return call
        if any(_wide(a) for a in call.args):
            args = list(call.args)
            for i, a in enumerate(args):
                if _wide(a):
                    values = a.value.numpy()
                    saturated = _saturated(call.op.name, values)
                    if saturated is None:
                        raise _refuse(values, f"read by {call.op.name}")
                    args[i] = relax.const(saturated.astype(np.int64), "int64")
            call = relax.Call(call.op, args, call.attrs, call.ty_args)
        if call.op.name == "relax.astype" or not any(_narrowable(a) for a in call.args):
            return call
        args = [
            self.builder_.emit(relax.op.astype(relax.const(a.value.numpy().astype(np.int32), "int32"), "int64"))
            if _narrowable(a) else a
            for a in call.args
        ]  # fmt: skip
        return relax.Call(call.op, args, call.attrs, call.ty_args)


def NarrowInt64Constants(api: str) -> tvm.transform.Pass:
    """Hold ``main``'s int64 constants as int32 on ``api`` when it has no int64 buffers (module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        if device_dtype("int64", api) != "int32":
            return mod
        out = mod
        for gvar, func in mod.functions_items():
            if isinstance(func, relax.Function) and gvar.name_hint == "main":
                new = _Narrow(mod).visit_expr(func)
                _FindWide().visit_expr(new)
                if not new.same_as(func):
                    out = out.clone() if out is mod else out
                    out[gvar] = new
        return out

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.NarrowInt64Constants")
