"""SplitWideKernels: cut a fused kernel that would bind more tensors than a Vulkan shader may.

``FuseOps`` fuses any chain of elementwise and injective ops into one kernel, whatever the number of
tensors it reads: a sum of 40 weighted inputs, or the dynamo exporter's adaptive pooling to sizes
that do not divide the input (dozens of gathers of constant index tensors), becomes one kernel of
40 or more bindings. OpenCL takes that (TVM's OpenCL target allows 128 kernel arguments); a Vulkan
shader stage binds at most the device's ``maxPerStageDescriptorStorageBuffers`` (lavapipe 32,
WebGPU's default 8; phones' drivers report a few dozen), and the session refuses such a kernel at
load.

Requires: a module after ``FuseOps``, before ``FuseTIR`` (grouped functions marked ``Primitive``,
called from the other functions).

Guarantees: every grouped function whose tensors in and out number more than ``budget`` is called
as consecutive parts instead, each part a grouped function of the original's bindings, in their
order, with at most ``budget`` tensors in and out (a part is never empty: one binding that alone
reads more stays a part of its own, and the load's limit check names it). What a part computes for
a later part is its output; every value is computed as before, by the same bindings. Other grouped
functions and their calls are unchanged.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Set

import tvm
from tvm import relax, tirx

from ...core.limits import VULKAN_KERNEL_TENSORS


def _tensor(var: relax.Var) -> bool:
    return isinstance(var.ty, relax.TensorType)


def _uses(expr: relax.Expr) -> List[relax.Var]:
    found: List[relax.Var] = []
    relax.analysis.post_order_visit(expr, lambda e: found.append(e) if isinstance(e, relax.Var) else None)
    return found


def _parts(bindings: Sequence[relax.VarBinding], returned: Set[relax.Var], budget: int) -> List[List[relax.VarBinding]]:
    """The bindings cut greedily, in order, into runs of at most ``budget`` tensors in and out."""
    used_at: Dict[relax.Var, int] = {}  # a variable's last reader's position
    for i, b in enumerate(bindings):
        for v in _uses(b.value):
            used_at[v] = i
    parts: List[List[relax.VarBinding]] = []
    start = 0

    def width(lo: int, hi: int) -> int:  # tensors in and out of bindings[lo:hi]
        defined = {b.var for b in bindings[lo:hi]}
        reads = {v for b in bindings[lo:hi] for v in _uses(b.value) if v not in defined and _tensor(v)}
        writes = {v for v in defined if _tensor(v) and (v in returned or used_at.get(v, -1) >= hi)}
        return len(reads) + len(writes)

    for i in range(1, len(bindings) + 1):
        if i - start > 1 and width(start, i) > budget:
            parts.append(list(bindings[start : i - 1]))
            start = i - 1
    parts.append(list(bindings[start:]))
    return parts


@relax.expr_functor.mutator
class _Rename(relax.PyExprMutator):
    """Uses of some variables replaced by others."""

    def __init__(self, to: Dict[relax.Var, relax.Var]):
        super().__init__()
        self.to = to

    def renamed(self, var: relax.Var) -> relax.Var:
        return self.to.get(var, var)

    def visit_var_(self, var: relax.Var) -> relax.Expr:
        return self.renamed(var)

    def visit_dataflow_var_(self, var: relax.DataflowVar) -> relax.Expr:
        return self.renamed(var)


@relax.expr_functor.mutator
class _Splitter(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule, wide: Dict[relax.GlobalVar, List[relax.Function]], outputs: Dict[relax.GlobalVar, list]):
        super().__init__(mod)
        self.mod, self.wide, self.outputs = mod, wide, outputs
        self.added: Dict[relax.GlobalVar, List[relax.GlobalVar]] = {}

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        call = binding.value
        if not (isinstance(call, relax.Call) and isinstance(call.op, relax.GlobalVar) and call.op in self.wide):
            return super().visit_var_binding_(binding)
        gvar, original = call.op, self.mod[call.op]
        if gvar not in self.added:
            self.added[gvar] = [self.builder_.add_func(part, f"{gvar.name_hint}_part{i}") for i, part in enumerate(self.wide[gvar])]
        env: Dict[relax.Var, relax.Expr] = {p: self.visit_expr(a) for p, a in zip(original.params, call.args)}
        for part_gvar, part, (inputs, outs) in zip(self.added[gvar], self.wide[gvar], self.outputs[gvar]):
            result = self.builder_.emit(relax.Call(part_gvar, [env[v] for v in inputs]))
            if len(outs) == 1:
                env[outs[0]] = result
            else:
                for k, v in enumerate(outs):
                    env[v] = self.builder_.emit(relax.TupleGetItem(result, k))
        body = original.body.body
        value = relax.Tuple([env[f] for f in body.fields]) if isinstance(body, relax.Tuple) else env[body]
        self.builder_.emit_normalized(relax.VarBinding(binding.var, value))


def _split_function(func: relax.Function, budget: int):
    """``(parts, [(inputs, outputs)] per part)`` of a grouped function, or None when it fits."""
    body = func.body
    if len(body.blocks) != 1 or not all(isinstance(b, relax.VarBinding) for b in body.blocks[0].bindings):
        return None
    bindings = list(body.blocks[0].bindings)
    returned = set(body.body.fields) if isinstance(body.body, relax.Tuple) else {body.body}
    if not all(isinstance(v, relax.Var) for v in returned):
        return None
    parts = _parts(bindings, returned, budget)
    if len(parts) < 2:
        return None
    functions, signatures = [], []
    available = set(func.params)  # (a parameter, or a binding of a part before the one at hand)
    for i, part in enumerate(parts):
        defined = [b.var for b in part]
        later = {v for p in parts[i + 1 :] for b in p for v in _uses(b.value)} | returned
        # what it reads of the function's parameters and earlier parts' bindings (not a run-time dim's
        # variable, which _uses finds too: TVM's Relax and TIR variables are one kind)
        inputs: List[relax.Var] = []
        for b in part:
            for v in _uses(b.value):
                if v in available and v not in inputs:
                    inputs.append(v)
        available.update(defined)
        outs = [v for v in defined if v in later]
        # its parameters, and its outputs (they leave its dataflow block): variables of the function, not of a block
        params = [relax.Var(v.name, v.ty) for v in inputs]
        rename = _Rename({**dict(zip(inputs, params)), **{v: relax.Var(v.name, v.ty) for v in outs if isinstance(v, relax.DataflowVar)}})
        block = relax.DataflowBlock([relax.VarBinding(rename.renamed(b.var), rename.visit_expr(b.value)) for b in part])
        returned_vars = [rename.renamed(v) for v in outs]
        result = returned_vars[0] if len(outs) == 1 else relax.Tuple(returned_vars)
        ret = outs[0].ty if len(outs) == 1 else relax.TupleType([v.ty for v in outs])
        part_func = relax.Function(params, relax.SeqExpr([block], result), ret, func.is_pure, func.attrs)
        # Its other bindings keep the original's variables, bound once in the module still (the original
        # goes), so that each kernel's model ops are those of its own bindings (core.provenance); a
        # run-time dim is a symbolic variable of one function, so the parts after the first take their own.
        if i:
            dims = relax.analysis.defined_symbolic_vars(part_func)
            part_func = part_func.bind_symbolic_vars({d: tirx.Var(d.name, d.ty.dtype) for d in dims})
        functions.append(relax.BlockBuilder().normalize(part_func))
        signatures.append((inputs, outs))
    return functions, signatures


def SplitWideKernels(budget: int = VULKAN_KERNEL_TENSORS) -> tvm.transform.Pass:
    """Grouped functions of more than ``budget`` tensors in and out called as parts (see module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        wide, outputs = {}, {}
        for gvar, func in mod.functions_items():
            if not isinstance(func, relax.Function) or func.attrs is None or not bool(func.attrs.get("Primitive", False)):
                continue
            if sum(_tensor(p) for p in func.params) + 1 <= budget:  # (cheap first look: its inputs and one output fit)
                continue
            split = _split_function(func, budget)
            if split is not None:
                wide[gvar], outputs[gvar] = split
        if not wide:
            return mod
        splitter = _Splitter(mod, wide, outputs)
        for gvar, func in mod.functions_items():
            if isinstance(func, relax.Function) and gvar not in wide:
                new = splitter.visit_expr(func)
                if not new.same_as(func):
                    splitter.builder_.update_func(gvar, new)
        out = splitter.builder_.get()
        for gvar in wide:  # (called no more)
            del out[gvar.name_hint]
        return out

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.SplitWideKernels")
