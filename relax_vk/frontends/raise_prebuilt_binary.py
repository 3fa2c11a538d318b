"""RaisePrebuiltBinary: turn prebuilt TIR kernels of binary broadcast ops back into Relax ops.

Frontends sometimes emit ``call_tir`` of a TOPI kernel instead of a Relax op: TVM's ONNX frontend
imports ``Clip`` (ReLU6) as ``topi.maximum`` / ``topi.minimum`` kernels. A ``call_tir`` is opaque
to the layout stage, so such a network is unpacked and repacked around every ReLU6 and keeps those
activations in buffers.

Requires: nothing (run it on a freshly imported module, before :func:`relax_vk.layout_stage`).

Guarantees: a ``call_tir(kernel, (a, b))`` becomes ``relax.<op>(a, b)`` exactly when ``kernel`` is
structurally equal to the PrimFunc that ``te.create_prim_func`` makes from ``topi.<op>`` for the same
argument shapes and dtypes (``op`` one of maximum, minimum, add, subtract, multiply, divide), and the
result type matches the call's. The comparison is structural, never by name. Every other binding is
unchanged; kernels nobody calls any more are dropped.
"""

from __future__ import annotations

from typing import Optional

import tvm
import tvm_ffi
from tvm import relax, te, topi

_OPS = {
    "maximum": (topi.maximum, relax.op.maximum),
    "minimum": (topi.minimum, relax.op.minimum),
    "add": (topi.add, relax.op.add),
    "subtract": (topi.subtract, relax.op.subtract),
    "multiply": (topi.multiply, relax.op.multiply),
    "divide": (topi.divide, relax.op.divide),
}


def _placeholder(ty, name: str):
    if not isinstance(ty, relax.TensorType) or ty.shape is None or not hasattr(ty.shape, "values"):
        return None
    return te.placeholder(list(ty.shape.values), str(ty.dtype), name=name)


def _raised(call: relax.Call, mod: tvm.IRModule) -> Optional[relax.Expr]:
    if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.call_tir"):
        return None
    kernel = mod[call.args[0]]
    fields = list(call.args[1].fields) if isinstance(call.args[1], relax.Tuple) else []
    # run-time dims: TVM passes the kernel's size variables as trailing integer fields (its tir_vars)
    args = [f for f in fields if isinstance(f.ty, relax.TensorType)]
    tir_vars = fields[len(args) :]
    if not isinstance(kernel, tvm.tirx.PrimFunc) or len(args) != 2 or fields[:2] != args or len(call.ty_args) != 1:
        return None
    a, b = _placeholder(args[0].ty, "A"), _placeholder(args[1].ty, "B")
    if a is None or b is None:
        return None
    for make_te, make_relax in _OPS.values():
        try:
            reference = te.create_prim_func([a, b, *tir_vars, make_te(a, b)]).without_attr("global_symbol")
        except Exception:  # shapes TOPI cannot broadcast
            continue
        if tvm_ffi.structural_equal(kernel, reference, map_free_vars=True):
            return make_relax(args[0], args[1])
    return None


@relax.expr_functor.mutator
class _Raiser(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule):
        super().__init__(mod)
        self.mod = mod

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        call = super().visit_call_(call)
        raised = _raised(call, self.mod)
        if raised is None:
            return call
        normalized = self.builder_.normalize(raised)
        return normalized if tvm_ffi.structural_equal(normalized.ty, call.ty) else call


def RaisePrebuiltBinary() -> tvm.transform.Pass:
    """Prebuilt TOPI binary kernels become Relax ops (see module docstring)."""

    def transform(func: relax.Function, mod: tvm.IRModule, _ctx) -> relax.Function:
        return _Raiser(mod).visit_expr(func)

    raise_calls = relax.transform.function_pass(transform, opt_level=0, name="relax_vk.RaisePrebuiltBinary")
    return tvm.transform.Sequential([raise_calls, relax.transform.DeadCodeElimination()], name="relax_vk.RaisePrebuiltBinary")
