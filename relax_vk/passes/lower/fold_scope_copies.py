"""FoldScopeCopies: let the producing kernel write the copy's scope directly (the RFC's
OptimizeToVDeviceForScopeChange).

Requires: a legalized (ideally fused) scoped module: copies are ``to_vdevice`` bindings.

Guarantees: for ``y = to_vdevice(x, dst)`` where ``x`` is the single-use output of a ``call_tir``
in the same dataflow block, or a single-use field ``x = t[k]`` of a ``call_tir`` tuple output
extracted once, the kernel's output type takes ``dst`` and the copy disappears: ``y``'s users read
the kernel's output. Any direction folds: texture -> buffer, buffer -> texture, and between
texture mappings (upstream folds only texture -> buffer of non-tuple outputs). Copies of values
with other uses, of parameters, or of non-kernel producers are kept.
"""

from __future__ import annotations

from collections import Counter
from typing import Dict, Tuple

import tvm
from tvm import relax


def _is_call(value, name: str) -> bool:
    return isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name == name


def _use_counts(func: relax.Function) -> Counter:
    counts: Counter = Counter()

    def visit(expr):
        if isinstance(expr, relax.Var):
            counts[expr] += 1

    for block in func.body.blocks:
        for b in block.bindings:
            relax.analysis.post_order_visit(b.value, visit)
    relax.analysis.post_order_visit(func.body.body, visit)
    return counts


def find_foldable(func: relax.Function) -> Tuple[Dict[relax.Var, object], Dict[relax.Var, relax.Var]]:
    """``(producers, copies)``: producer var -> ``vdevice`` (or ``{field: vdevice}`` for tuples) to
    write, and copy var -> the var its users should read instead."""
    uses = _use_counts(func)
    producers: Dict[relax.Var, object] = {}
    copies: Dict[relax.Var, relax.Var] = {}
    if not isinstance(func.body, relax.SeqExpr):
        return producers, copies
    for block in func.body.blocks:
        if not isinstance(block, relax.DataflowBlock):
            continue
        bound = {b.var: b.value for b in block.bindings}
        for b in block.bindings:
            if not _is_call(b.value, "relax.to_vdevice"):
                continue
            src = b.value.args[0]
            dst = b.value.ty.vdevice
            if not isinstance(src, relax.Var) or uses[src] != 1 or src not in bound:
                continue
            value = bound[src]
            if _is_call(value, "relax.call_tir") and isinstance(value.ty, relax.TensorType):
                producers[src] = dst
                copies[b.var] = src
            elif isinstance(value, relax.TupleGetItem) and isinstance(value.tuple_value, relax.Var):
                tup = value.tuple_value
                if tup in bound and _is_call(bound[tup], "relax.call_tir"):
                    producers.setdefault(tup, {})[int(value.index)] = dst
                    copies[b.var] = src
    return producers, copies


@relax.expr_functor.mutator
class _Folder(relax.PyExprMutator):
    def __init__(self, mod, producers, copies):
        super().__init__(mod)
        self.producers = producers
        self.copies = copies

    def visit_var_binding_(self, binding):
        var = binding.var
        if var in self.producers:
            call = binding.value
            out_ty = call.ty_args[0]
            change = self.producers[var]
            if isinstance(change, dict):
                fields = [relax.TensorType(f.shape, f.dtype, change.get(i, f.vdevice)) for i, f in enumerate(out_ty.fields)]
                new_ty = relax.TupleType(fields)
            else:
                new_ty = relax.TensorType(out_ty.shape, out_ty.dtype, change)
            args = [self.visit_expr(a) for a in call.args]
            new = self.builder_.emit(relax.Call(call.op, args, call.attrs, [new_ty]), var.name)
            self.set_var_remap(var, new)
            return
        if var in self.copies:
            source = self.visit_expr(self.copies[var])
            if isinstance(var, relax.DataflowVar):
                self.set_var_remap(var, source)
            else:
                self.set_var_remap(var, self.builder_.emit_output(source, var.name))
            return
        super().visit_var_binding_(binding)


def FoldScopeCopies() -> tvm.transform.Pass:
    """Fold scope copies into the kernels that produce their input (see module docstring)."""

    def transform(func: relax.Function, mod: tvm.IRModule, _ctx) -> relax.Function:
        producers, copies = find_foldable(func)
        if not copies:
            return func
        return _Folder(mod, producers, copies).visit_expr(func)

    return relax.transform.function_pass(transform, opt_level=0, name="relax_vk.FoldScopeCopies")
