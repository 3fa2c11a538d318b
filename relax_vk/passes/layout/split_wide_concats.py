"""SplitWideConcats: a concatenation of more tensors than a Vulkan shader may bind, as a
concatenation of concatenations.

One ``concat`` is one kernel that binds every input and its output. An exporter's adaptive pooling
to sizes that do not divide the input (torch.onnx's dynamo exporter: one slice per output row and
column, then a ``Concat``), or a model that joins dozens of branches, binds more storage buffers
than a Vulkan shader stage may (lavapipe 32, phones' drivers a few dozen), and the session refused
it at load. :mod:`~relax_vk.passes.lower.split_wide_kernels` cuts a fused chain between its ops;
one op that alone reads too many tensors is cut here, before the layout and scope passes see it.

Requires: an imported module (the layout stage, before packing).

Guarantees: every ``concat`` of a tuple of more than ``budget - 1`` tensors becomes ``concat`` of
consecutive groups of at most ``budget - 1`` of them (each group's own ``concat`` along the same
axis; a group of one is the tensor itself), nested again while the groups are more than
``budget - 1``: the same values in the same order, each concat binding at most ``budget`` tensors.
Nothing else changes.
"""

from __future__ import annotations

from typing import List

import tvm
from tvm import relax

from ...core.limits import VULKAN_KERNEL_TENSORS

_CONCAT = tvm.ir.Op.get("relax.concat")


@relax.expr_functor.mutator
class _Splitter(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule, budget: int):
        super().__init__(mod)
        self.most = budget - 1  # inputs a concat may take beside its output

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        call = super().visit_call_(call)
        if call.op != _CONCAT or not isinstance(call.args[0], relax.Tuple) or len(call.args[0].fields) <= self.most:
            return call
        parts: List[relax.Expr] = list(call.args[0].fields)
        while len(parts) > self.most:
            groups = [parts[i : i + self.most] for i in range(0, len(parts), self.most)]
            parts = [g[0] if len(g) == 1 else self.builder_.emit(relax.op.concat(g, axis=call.attrs.axis)) for g in groups]
        return relax.op.concat(parts, axis=call.attrs.axis)


def SplitWideConcats(budget: int = VULKAN_KERNEL_TENSORS) -> tvm.transform.Pass:
    """Concats of more than ``budget - 1`` tensors nested into concats of at most that many (see
    module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        splitter = _Splitter(mod, budget)
        for gvar, func in mod.functions_items():
            if isinstance(func, relax.Function):
                new = splitter.visit_expr(func)
                if not new.same_as(func):
                    splitter.builder_.update_func(gvar, new)
        return splitter.builder_.get()

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.SplitWideConcats")
