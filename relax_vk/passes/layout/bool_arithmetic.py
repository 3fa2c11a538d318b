"""BoolArithmetic: arithmetic on bool tensors becomes the logic it is.

Requires: nothing. Guarantees: in every Relax function, ``multiply`` and ``minimum`` of two bool
tensors are ``logical_and``, ``add`` and ``maximum`` of two bool tensors ``logical_or``; nothing
else changes.

Why: PyTorch's ``isfinite`` decomposes to ``(x == x) * (|x| != inf)``, a product of bools, and
masks are combined as ``m1 * m2`` or ``m1 + m2``. TVM's llvm codegen refuses a bool product
("Check failed: t.MatchesCode(kDLFloat)" in ``CreateMul``), and the CPU reference
(:mod:`relax_vk.analysis.reference`) compiles the model with it: fp16 calibration, ``bisect`` and
``run --check`` of any model with ``isfinite`` stopped there. Logic ops mean the same on every
backend.
"""

from __future__ import annotations

import tvm
from tvm import relax

from ...core.ir_utils import rewrite_functions

_AS_LOGIC = {"relax.multiply": relax.op.logical_and, "relax.minimum": relax.op.logical_and,
             "relax.add": relax.op.logical_or, "relax.maximum": relax.op.logical_or}  # fmt: skip


def _bool(expr) -> bool:
    return isinstance(expr.ty, relax.TensorType) and str(expr.ty.dtype) == "bool"


@relax.expr_functor.mutator
class _Rewrite(relax.PyExprMutator):
    def visit_call_(self, call):
        call = super().visit_call_(call)
        if not isinstance(call.op, tvm.ir.Op) or call.op.name not in _AS_LOGIC or len(call.args) != 2:
            return call
        if not all(_bool(a) for a in call.args):
            return call
        return _AS_LOGIC[call.op.name](*call.args)


def BoolArithmetic() -> tvm.transform.Pass:
    """Arithmetic of bool tensors as logic ops (module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        return rewrite_functions(_Rewrite(mod), mod)

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.BoolArithmetic")
