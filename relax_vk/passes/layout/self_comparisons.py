"""NaNSelfComparisons: a float tensor compared with itself becomes the NaN test it is.

Requires: nothing. Guarantees: in every Relax function, ``not_equal(x, x)`` of a float ``x`` is
``isnan(x)`` and ``equal(x, x)`` is ``logical_not(isnan(x))``; nothing else changes.

Why: PyTorch's ``x != x`` (the NaN test written by hand) and the ``isfinite`` decomposition
(``(x == x) * (|x| != inf)``) reach TVM as self-comparisons, and TVM's TIR simplifier folds
``x != x`` to false and ``x == x`` to true, as for integers: ``where(x != x, 0, x)`` let every NaN
through on both APIs. ``isnan`` is an intrinsic the simplifier leaves alone (OpenCL C and WGSL
test it exactly).
"""

from __future__ import annotations

import tvm
from tvm import relax

from ...core.ir_utils import rewrite_functions


def _float(expr) -> bool:
    return isinstance(expr.ty, relax.TensorType) and str(expr.ty.dtype).startswith(("float", "bfloat"))


@relax.expr_functor.mutator
class _Rewrite(relax.PyExprMutator):
    def visit_call_(self, call):
        call = super().visit_call_(call)
        if not isinstance(call.op, tvm.ir.Op) or call.op.name not in ("relax.not_equal", "relax.equal") or len(call.args) != 2:
            return call
        a, b = call.args
        if not (a.same_as(b) and _float(a)):
            return call
        nan = relax.op.isnan(a)
        return nan if call.op.name == "relax.not_equal" else relax.op.logical_not(self.builder_.emit(nan))


def NaNSelfComparisons() -> tvm.transform.Pass:
    """Self-comparisons of floats as ``isnan`` (module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        return rewrite_functions(_Rewrite(mod), mod)

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.NaNSelfComparisons")
