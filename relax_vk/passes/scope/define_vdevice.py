"""DefineVDevice: write the decided scopes into the IR as VDevices, hints and ``ty_args``.

Requires: ``CollectProducerScopeInfo`` (recomputed when missing or stale).

Guarantees, for every scoped function:

* ``global_infos["vdevice"]`` holds one canonical ``VDevice(target, 0, scope)`` per scope in use;
  entries already in the module are kept and reused (RealizeVDevice and the VM compare VDevices by
  identity, so a second object for the same scope would be a different device);
* every tensor argument of every call site is wrapped in ``R.hint_on_device(arg, dev, scope)``
  with the scope its consumer demands; one hint per (tensor, scope) per block, so consumers that
  want the same scope share one copy later;
* every ``call_tir`` gets its decided output VDevice(s) in ``out_ty``/``ty_args``, and every Relax
  op kept for scoping gets it in ``ty_args`` (its type inference honours it, see
  :mod:`relax_vk.core.op_typing`); calls to other functions or extern functions are left alone;
* constant arguments are re-typed copies carrying their demanded VDevice (no hint, no runtime
  copy; the original constant is not mutated);
* parameters and results keep their buffer ABI: parameters are typed ``global`` so that hints on
  them become copies inside the function, never a texture-typed signature;
* the analysis attributes are removed.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import tvm
from tvm import relax
from tvm.ir.expr import GenericConst

from ...core import target as _target
from ...core.op_typing import honours_ty_args
from ...core.options import ScopeOptions
from ...core.registry import OpRegistry
from ...core.scope import GLOBAL, TEXTURE_SCOPES
from . import scope_info
from .collect_producer_scope_info import scope_decisions
from .scope_graph import CallSite, ScopeGraph, scope_module_pass

_SCOPE_ORDER = [GLOBAL.name] + [s.name for s in TEXTURE_SCOPES]


def canonical_vdevices(mod: tvm.IRModule, target: tvm.target.Target, scopes) -> Dict[str, relax.VDevice]:
    """One VDevice per scope, reusing the module's entries; returns scope -> VDevice and updates
    ``mod``'s ``global_infos["vdevice"]`` in place (existing entries first, in their order)."""
    existing = list(mod.global_infos["vdevice"]) if "vdevice" in mod.global_infos else []
    kind = target.kind.name
    table: Dict[str, relax.VDevice] = {}
    for vdev in existing:
        if vdev.target is not None and vdev.target.kind.name == kind and int(vdev.vdevice_id) == 0:
            table.setdefault(str(vdev.memory_scope), vdev)
    added = []
    for scope in sorted(set(scopes), key=_SCOPE_ORDER.index):
        if scope not in table:
            table[scope] = relax.VDevice(target, 0, scope)
            added.append(table[scope])
    if added or not existing:
        mod.update_global_info("vdevice", existing + added)
    return table


def _with_vdevice(ty, vdev: relax.VDevice):
    return relax.TensorType(ty.shape, ty.dtype, vdev)


def _retype(ty, scopes: List[str], table: Dict[str, relax.VDevice]):
    if isinstance(ty, relax.TupleType):
        return relax.TupleType([_with_vdevice(f, table[s]) for f, s in zip(ty.fields, scopes)])
    return _with_vdevice(ty, table[scopes[0]])


@relax.expr_functor.mutator
class _Definer(relax.PyExprMutator):
    def __init__(self, mod, graph: ScopeGraph, decisions, table, device: tvm.runtime.Device):
        super().__init__(mod)
        self.graph = graph
        self.params = set(graph.func.params)
        self.decisions = decisions
        self.table = table
        self.device = device
        self._hints: Dict[Tuple[relax.Var, str], relax.Var] = {}

    def visit_var_def_(self, var):
        # parameters keep their buffer ABI: typed "global", so hints on them become copies
        ty = var.ty
        if var in self.params and isinstance(ty, relax.TensorType) and ty.vdevice is None and ty.dtype is not None:
            return relax.Var(var.name, _with_vdevice(ty, self.table[GLOBAL.name]))
        return var  # (super().visit_var_def_ recurses back here in TVM 0.27)

    def visit_dataflow_block_(self, block):
        self._hints = {}
        return super().visit_dataflow_block_(block)

    def _hint(self, expr: relax.Expr, scope: str) -> relax.Expr:
        if isinstance(expr, GenericConst):
            if scope == GLOBAL.name and expr.ty.vdevice is None:
                return expr
            return GenericConst(expr.value, _with_vdevice(expr.ty, self.table[scope]))
        key = (expr, scope)
        if key not in self._hints:
            self._hints[key] = self.builder_.emit(relax.op.hint_on_device(expr, self.device, scope))
        return self._hints[key]

    def _arg_rebuilder(self, site: CallSite, decision):
        """A function rebuilding the call's arguments in their original structure, hinting the
        tensor arguments; it walks the arguments in the flattening order of the scope graph."""
        scope_at = {arg.raw_index: scope for arg, scope in zip(site.args, decision["args"])}
        counter = [0]

        def rebuild(expr, top_level: bool = True):
            if isinstance(expr, relax.Tuple) and top_level:
                return relax.Tuple([rebuild(f, False) for f in expr.fields])
            index = counter[0]
            counter[0] += 1
            new = self.visit_expr(expr)
            return self._hint(new, scope_at[index]) if index in scope_at else new

        return rebuild

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        site = self.graph.site_of_var.get(binding.var)
        if site is None:
            return super().visit_var_binding_(binding)
        decision = self.decisions[site.index]
        call = site.call
        rebuild = self._arg_rebuilder(site, decision)
        if site.kind == "call_tir":
            new_args = [call.args[0], rebuild(call.args[1])] + [self.visit_expr(a) for a in call.args[2:]]
            ty_args = [_retype(call.ty_args[0], decision["outs"], self.table)] if site.outs else list(call.ty_args)
            new_call = relax.Call(call.op, new_args, call.attrs, ty_args)
        elif site.kind == "relax_op" and decision["outs"] and self._sets_ty_args(site):
            new_args = [rebuild(a) for a in call.args]
            new_call = relax.Call(call.op, new_args, call.attrs, [_retype(call.ty, decision["outs"], self.table)])
        else:
            new_call = relax.Call(self.visit_expr(call.op), [rebuild(a) for a in call.args], call.attrs, call.ty_args)
        name = binding.var.name
        if isinstance(binding.var, relax.DataflowVar):
            new_var = self.builder_.emit(new_call, name)
        else:
            new_var = self.builder_.emit_output(new_call, name)
        self.set_var_remap(binding.var, new_var)

    @staticmethod
    def _sets_ty_args(site: CallSite) -> bool:
        return honours_ty_args(site.name)


def define_vdevice(mod: tvm.IRModule, graph: ScopeGraph, target: tvm.target.Target, decisions: Dict[int, dict]) -> relax.Function:
    """``graph.func`` rewritten with the decided scopes (see the module docstring)."""
    used = {GLOBAL.name}
    for d in decisions.values():
        used.update(d["outs"])
        used.update(d["args"])
    table = canonical_vdevices(mod, target, used)
    device = tvm.device(target.kind.name, 0)
    new_func = _Definer(mod, graph, decisions, table, device).visit_expr(graph.func)
    return scope_info.strip(new_func)


def DefineVDevice(
    target: "tvm.target.Target | str | None" = None,
    registry: Optional[OpRegistry] = None,
    options: Optional[ScopeOptions] = None,
    limits=None,
) -> tvm.transform.Pass:
    """Insert hints, ``ty_args`` and canonical VDevices for the decided scopes (module docstring)."""

    tgt = _target.resolve(target)

    def rewrite(mod: tvm.IRModule, graph: ScopeGraph) -> relax.Function:
        return define_vdevice(mod, graph, tgt, scope_decisions(graph, tgt, registry, options, limits))

    return scope_module_pass("relax_vk.DefineVDevice", rewrite)
