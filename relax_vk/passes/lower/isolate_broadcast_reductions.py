"""IsolateBroadcastReductions: keep a reduction (a conv, a matmul, a mean) whose result is
broadcast to a larger tensor out of that consumer's fused kernel.

Requires: a legalized module whose PrimFuncs carry ``op_pattern`` (after
``AnnotateTIROpPattern``), before ``FuseOps``.

Guarantees: a ``call_tir`` of a kernel with pattern ``kOutEWiseFusable`` (a conv, a matmul, or a
reduction with its own elementwise tail: TVM's ``mean`` is a sum and a division) whose output
reaches, through elementwise kernels of its own size only, a kernel writing a *larger*
tensor (a squeeze-excite gate: ``x * sigmoid(conv(mean(x)))``, a per-channel scale computed by a
Linear) calls a copy of its PrimFunc marked ``kOpaque``: ``FuseOps`` neither fuses it into that
consumer nor anything into it. Fused, the reduction is recomputed for every element of the larger
output (a 120-term dot product per output element, and no conv schedule takes such a kernel; a
LayerNorm's channel mean in a map layout once per channel);
apart, it runs once and the cheap elementwise chain after it (bias, hard-sigmoid) fuses into the
broadcasting consumer. Other call sites of the same PrimFunc keep it as it was. Nothing else
changes.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import tvm
from tvm import relax, tirx

OUT_ELEMWISE_FUSABLE = 4  # TVM's OpPatternKind
OPAQUE = 8
# kElemWise, kBroadcast: what FuseOps fuses into a kOutEWiseFusable kernel (an injective consumer,
# a resize or a concat, is never fused into it, and isolating the conv would only move its
# elementwise tail into that consumer's fused group)
ELEMENTWISE_OR_BROADCAST = (0, 1)


def _numel(ty) -> Optional[int]:
    shape = getattr(ty, "shape", None)
    if not isinstance(ty, relax.TensorType) or shape is None or not hasattr(shape, "values"):
        return None
    total = 1
    for dim in shape.values:
        if not isinstance(dim, tirx.IntImm):
            return None
        total *= int(dim.value)
    return total


def _pattern(mod: tvm.IRModule, call: relax.Call) -> Optional[int]:
    func = mod[call.args[0]] if isinstance(call.args[0], relax.GlobalVar) else None
    if not isinstance(func, tirx.PrimFunc) or func.attrs is None or "op_pattern" not in func.attrs:
        return None
    return int(func.attrs["op_pattern"])


def _is_call_tir(value) -> bool:
    return isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.call_tir"


def broadcast_reductions(mod: tvm.IRModule, func: relax.Function) -> List[relax.Var]:
    """The variables bound to a ``kOutEWiseFusable`` kernel's output that a consumer broadcasts
    to a larger tensor (see module docstring)."""
    calls: Dict[relax.Var, relax.Call] = {}
    users: Dict[relax.Var, List[relax.Var]] = {}
    for block in func.body.blocks:
        for binding in block.bindings:
            value = binding.value
            if not _is_call_tir(value):
                continue
            calls[binding.var] = value
            for arg in value.args[1].fields if isinstance(value.args[1], relax.Tuple) else []:
                if isinstance(arg, relax.Var):
                    users.setdefault(arg, []).append(binding.var)
    return [var for var, call in calls.items() if _pattern(mod, call) == OUT_ELEMWISE_FUSABLE and _broadcast_later(mod, var, calls, users)]


def _broadcast_later(mod: tvm.IRModule, var: relax.Var, calls, users) -> bool:
    """Whether ``var`` reaches, through elementwise/broadcast kernels of its own size, one that
    writes a larger tensor."""
    size = _numel(var.ty)
    if size is None:
        return False
    frontier, seen = [var], {var}
    while frontier:
        for user in users.get(frontier.pop(), []):
            if user in seen or _pattern(mod, calls[user]) not in ELEMENTWISE_OR_BROADCAST:
                continue
            seen.add(user)
            other = _numel(user.ty)
            if other is not None and other > size:
                return True
            if other == size:
                frontier.append(user)
    return False


@relax.expr_functor.mutator
class _Isolate(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule, targets: List[relax.Var]):
        super().__init__(mod)
        self.targets = set(targets)
        self.copies: Dict[str, relax.GlobalVar] = {}

    def visit_var_binding_(self, binding):
        if binding.var in self.targets:  # (the same variable, now calling the opaque copy)
            binding = relax.VarBinding(binding.var, self._apart(binding.value))
        super().visit_var_binding_(binding)

    def _apart(self, call: relax.Call) -> relax.Call:
        return opaque_copy(self.builder_, self.copies, call)


def opaque_copy(builder: relax.BlockBuilder, copies: Dict[str, relax.GlobalVar], call: relax.Call) -> relax.Call:
    """``call`` (a ``call_tir``) calling a copy of its PrimFunc marked ``kOpaque``, added to
    ``builder`` once a PrimFunc (``copies``: PrimFunc name -> its copy)."""
    gvar = call.args[0]
    if gvar.name_hint not in copies:
        copies[gvar.name_hint] = builder.add_func(builder.get()[gvar].with_attr("op_pattern", OPAQUE), f"{gvar.name_hint}_apart")
    return relax.Call(call.op, [copies[gvar.name_hint], *call.args[1:]], call.attrs, call.ty_args)


def IsolateBroadcastReductions() -> tvm.transform.Pass:
    """Keep reductions broadcast by their consumers out of those consumers' fused kernels (see
    module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        updates = {}
        for gvar, func in mod.functions_items():
            if not isinstance(func, relax.Function) or not isinstance(func.body, relax.SeqExpr):
                continue
            targets = broadcast_reductions(mod, func)
            if targets:
                updates[gvar] = targets
        if not updates:
            return mod
        for gvar, targets in updates.items():
            mutator = _Isolate(mod, targets)
            new_func = mutator.visit_expr(mod[gvar])
            mod = mutator.builder_.get()
            mod[gvar] = new_func
        return mod

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.IsolateBroadcastReductions")
