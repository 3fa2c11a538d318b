"""IsolateComputedSizes: a kernel called with a computed size argument runs apart.

Requires: a legalized module whose PrimFuncs carry ``op_pattern`` (after
``AnnotateTIROpPattern``), before ``FuseOps``.

Guarantees: every ``call_tir`` passing a size argument that is an expression rather than a plain
dim (``H // 2``: a stepped dim's quotient, :mod:`relax_vk.passes.layout.step_quotients`) calls a
copy of its PrimFunc marked ``kOpaque``, so ``FuseOps`` fuses nothing with it. Other calls are
left as they are.

Why: TVM's ``FuseTIR`` takes only plain variables as the size arguments of the kernels it merges
("Parameter expression 2 expected an integer argument with value 2, but was provided with the
argument s39_x2 // 2", a bare InternalError): an adaptive max pool over stepped run-time dims
fused with the op after it did not build.
"""

from __future__ import annotations

from typing import Dict

import tvm
from tvm import relax, tirx
from tvm.ir.expr import GenericConst
from tvm.ir.prim import expr as E

from .isolate_broadcast_reductions import OPAQUE


def _computed_size(call: relax.Call) -> bool:
    args = call.args[1].fields if isinstance(call.args[1], relax.Tuple) else [call.args[1]]
    return any(isinstance(a, E.Expr) and not isinstance(a, (relax.Var, tirx.IntImm, GenericConst)) and not isinstance(a.ty, relax.TensorType)
               for a in args)  # fmt: skip


@relax.expr_functor.mutator
class _Isolate(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule):
        super().__init__(mod)
        self.copies: Dict[str, relax.GlobalVar] = {}

    def visit_call_(self, call):
        call = super().visit_call_(call)
        if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.call_tir" and _computed_size(call)):
            return call
        gvar = call.args[0]
        func = self.builder_.get()[gvar]
        if not isinstance(func, tirx.PrimFunc) or (func.attrs is not None and "op_pattern" in func.attrs and int(func.attrs["op_pattern"]) == OPAQUE):
            return call
        if gvar.name_hint not in self.copies:
            self.copies[gvar.name_hint] = self.builder_.add_func(func.with_attr("op_pattern", OPAQUE), f"{gvar.name_hint}_apart")
        return relax.Call(call.op, [self.copies[gvar.name_hint], *call.args[1:]], call.attrs, call.ty_args)


def IsolateComputedSizes() -> tvm.transform.Pass:
    """Kernels called with computed size arguments kept unfused (module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        isolate = _Isolate(mod)
        changed = False
        for gvar, func in mod.functions_items():
            if isinstance(func, relax.Function):
                new = isolate.visit_expr(func)
                if not new.same_as(func):
                    isolate.builder_.update_func(gvar, new)
                    changed = True
        return isolate.builder_.get() if changed else mod

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.IsolateComputedSizes")
