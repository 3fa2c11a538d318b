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
outside int32 is left as it is; the WGSL emitter then refuses its buffer by name. APIs that hold
int64 (OpenCL) are untouched.

Why: importers compute index arithmetic with int64 constants, e.g. ONNX GatherND's negative-index
``where(i < 0, i + dims, i)`` with ``dims`` the data's shape as an int64 tensor; the kernel that
adds them read an int64 buffer, which no WGSL shader can bind.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import GenericConst

from .edge_dtypes import device_dtype
from .fold_small_constants import fits_int32


def _narrowable(arg) -> bool:
    if not isinstance(arg, GenericConst) or not isinstance(arg.ty, relax.TensorType) or str(arg.ty.dtype) != "int64":
        return False
    values = arg.value.numpy()
    # (a scalar is an immediate in the kernel that reads it, not a buffer)
    return values.ndim > 0 and fits_int32(values)


@relax.expr_functor.mutator
class _Narrow(relax.PyExprMutator):
    def visit_call_(self, call):
        call = super().visit_call_(call)
        if not isinstance(call.op, tvm.ir.Op) or call.op.name == "relax.astype" or not any(_narrowable(a) for a in call.args):
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
                if not new.same_as(func):
                    out = out.clone() if out is mod else out
                    out[gvar] = new
        return out

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.NarrowInt64Constants")
