"""SpecializeKernelScopes: give every kernel's buffers the scopes of its call site, cloning the
kernel when call sites disagree.

Requires: a legalized scoped module (``call_tir`` arguments and ``out_ty`` carry VDevices).

Guarantees: every PrimFunc called through ``call_tir`` has parameter buffers whose storage scope
equals the VDevice scope of the matching argument/output at its call site (``global`` where there
is none) and the attribute ``relax_vk.scoped``. A PrimFunc called with several scope signatures is
cloned once per signature (``<name>_<k>``) and each call site calls its own clone. Upstream's
``SpecializePrimFuncBasedOnCallSite`` specializes per PrimFunc and lets the last call site win,
which hands the other sites a kernel for the wrong memory.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

import tvm
from tvm import relax, tirx

SCOPED_ATTR = "relax_vk.scoped"

Signature = Tuple[str, ...]


def _scope(ty) -> str:
    return str(ty.vdevice.memory_scope) if isinstance(ty, relax.TensorType) and ty.vdevice is not None else "global"


def call_signature(call: relax.Call) -> Signature:
    """Scopes of a call_tir's tensor arguments then outputs."""
    args = call.args[1].fields if isinstance(call.args[1], relax.Tuple) else [call.args[1]]
    out = call.ty_args[0]
    outs = list(out.fields) if isinstance(out, relax.TupleType) else [out]
    return tuple(_scope(a.ty) for a in args if isinstance(a.ty, relax.TensorType)) + tuple(_scope(t) for t in outs)


def specialize(func: tirx.PrimFunc, signature: Signature) -> tirx.PrimFunc:
    """``func`` with its first ``len(signature)`` buffer parameters re-declared in those scopes."""
    params = [p for p in func.params if isinstance(p.ty, tirx.BufferType)]
    if len(params) < len(signature):
        raise ValueError(f"kernel has {len(params)} buffer parameters, call site passes {len(signature)} tensors")
    mapping = {}
    for param, scope in zip(params, signature):
        if str(param.ty.storage_scope) == scope:
            continue
        mapping[param] = tirx.decl_buffer(param.ty.shape, param.ty.dtype, param.name, scope=scope)
    out = func.specialize(mapping) if mapping else func
    return out.with_attr(SCOPED_ATTR, True)


def _call_tirs(mod: tvm.IRModule):
    for gvar, func in mod.functions_items():
        if isinstance(func, relax.Function):
            calls: List[relax.Call] = []

            def visit(expr, calls=calls):
                if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name == "relax.call_tir":
                    calls.append(expr)

            relax.analysis.post_order_visit(func, visit)
            yield gvar, calls


@relax.expr_functor.mutator
class _Retarget(relax.PyExprMutator):
    def __init__(self, mod, targets: Dict[Tuple[str, Signature], tvm.ir.GlobalVar]):
        super().__init__(mod)
        self.targets = targets

    def visit_call_(self, call):
        call = super().visit_call_(call)
        if isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.call_tir":
            key = (call.args[0].name_hint, call_signature(call))
            if key in self.targets:
                return relax.Call(call.op, [self.targets[key]] + list(call.args[1:]), call.attrs, call.ty_args)
        return call


def SpecializeKernelScopes() -> tvm.transform.Pass:
    """Specialize kernels to their call sites' scopes, cloning per signature (module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        signatures: Dict[str, List[Signature]] = {}
        gvars: Dict[str, tvm.ir.GlobalVar] = {}
        for _, calls in _call_tirs(mod):
            for call in calls:
                gv = call.args[0]
                gvars[gv.name_hint] = gv
                sig = call_signature(call)
                if sig not in signatures.setdefault(gv.name_hint, []):
                    signatures[gv.name_hint].append(sig)
        builder = relax.BlockBuilder(mod.clone())  # gives clones properly typed GlobalVars
        targets: Dict[Tuple[str, Signature], tvm.ir.GlobalVar] = {}
        for name, sigs in signatures.items():
            func = mod[gvars[name]]
            if len(sigs) == 1:
                builder.update_func(gvars[name], specialize(func, sigs[0]))
                continue
            for k, sig in enumerate(sigs):
                clone = specialize(func, sig)
                if clone.attrs is not None and "global_symbol" in clone.attrs:
                    clone = clone.with_attr("global_symbol", f"{name}_{k}")
                targets[(name, sig)] = builder.add_func(clone, f"{name}_{k}")
        out = builder.get()
        for name in {n for n, _ in targets}:
            del out[gvars[name]]
        if not targets:
            return out
        retarget = _Retarget(out, targets)
        for gvar, func in list(out.functions_items()):
            if isinstance(func, relax.Function):
                out[gvar] = retarget.visit_expr(func)
        return out

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.SpecializeKernelScopes")
