"""RemoveRedundantAssignments: drop the ``lv = x`` bindings that realized hints leave behind.

Requires: ``RealizeVDevice`` has run (a hint whose input already has the hinted VDevice becomes a
plain var-to-var binding).

Guarantees: every binding ``v = u`` (``u`` a Var) whose types are structurally equal, VDevice
included, is removed and ``v``'s uses read ``u`` instead, except when ``v`` is a dataflow-block
output and ``u`` a dataflow var (the binding is then the block's only way to export ``u``). Such
bindings would otherwise block fusion. Copies (``to_vdevice``) and every other binding are kept.
Unlike TVM's ``CanonicalizeBindings`` nothing else is rewritten.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import relax


@relax.expr_functor.mutator
class _Remover(relax.PyExprMutator):
    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        value = binding.value
        if isinstance(value, relax.Var):
            source = self.visit_expr(value)
            exports_dataflow = not isinstance(binding.var, relax.DataflowVar) and isinstance(source, relax.DataflowVar)
            if not exports_dataflow and tvm_ffi.structural_equal(binding.var.ty, source.ty):
                self.set_var_remap(binding.var, source)
                return
        super().visit_var_binding_(binding)


def RemoveRedundantAssignments() -> tvm.transform.Pass:
    """Remove redundant var-to-var bindings (see module docstring)."""

    def transform(func: relax.Function, mod: tvm.IRModule, _ctx) -> relax.Function:
        return _Remover(mod).visit_expr(func)

    return relax.transform.function_pass(transform, opt_level=0, name="relax_vk.RemoveRedundantAssignments")
