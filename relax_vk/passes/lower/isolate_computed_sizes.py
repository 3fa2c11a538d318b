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

from ...core.ir_utils import rewrite_functions
from .isolate_broadcast_reductions import OPAQUE, opaque_copy


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
        return opaque_copy(self.builder_, self.copies, call)


def IsolateComputedSizes() -> tvm.transform.Pass:
    """Kernels called with computed size arguments kept unfused (module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        return rewrite_functions(_Isolate(mod), mod)

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.IsolateComputedSizes")
