"""The shared visitor of the scope passes: one walk of a Relax function that finds every call
site, every tensor *slot* (a call output, or one field of a call's tuple output) and who uses it.

Terms used by all scope passes:

* **call site**: a ``VarBinding`` inside a dataflow block whose value is a call. Its tensor
  arguments are flattened (``call_tir``'s argument tuple, tuple-literal arguments such as
  ``concat``'s). Calls outside dataflow blocks are not scoped: their tensors stay buffers.
* **slot**: where a tensor value is produced: ``(site index, output index)``. ``y = t[k]`` and
  ``y = x`` forward to the slot they read, so demands on ``y`` reach the producer, including
  fields of tuple-producing calls such as ``split``.
* **pinned** slots must be buffers: they escape the dataflow block (block outputs, the function
  result, tuples built from them, match_cast, uses outside a call argument).
* function parameters are never slots: they keep their buffer ABI, copies happen inside.

The graph is rebuilt from the IR by each pass (it is cheap and deterministic), and its
``fingerprint`` lets a pass check that analysis results attached by an earlier pass still
describe the function it is looking at.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import tvm
from tvm import relax
from tvm.ir.expr import GenericConst

from ...core.representation import TensorSpec
from ...core.scope import static_shape
from ...core.scope_rule import Role

Slot = Tuple[int, int]  # (call site index, output index)

_SKIP_OPS = ("relax.hint_on_device", "relax.to_vdevice")


@dataclass
class TensorArg:
    """One flattened tensor argument of a call site."""

    position: int  # index among the call's tensor arguments
    raw_index: int  # index in the call's flattened argument list (tuples expanded)
    expr: relax.Expr  # a Var or a Constant
    spec: TensorSpec
    slot: Optional[Slot]  # producer slot, None for params/constants/unknown vars


@dataclass
class CallSite:
    """One call binding inside a dataflow block."""

    index: int
    var: relax.Var
    call: relax.Call
    kind: str  # "relax_op" | "call_tir" | "opaque"
    name: str  # op name or kernel name
    args: List[TensorArg]
    outs: List[TensorSpec]
    tuple_output: bool
    consumers: Dict[int, List[Tuple[int, int]]] = field(default_factory=dict)  # out idx -> [(site, arg pos)]


def tensor_spec(ty, role: Role = Role.ACTIVATION) -> Optional[TensorSpec]:
    if not isinstance(ty, relax.TensorType) or ty.shape is None or ty.dtype is None:
        return None
    shape = getattr(ty.shape, "values", None)
    return TensorSpec(static_shape(shape) if shape is not None else None, str(ty.dtype), role)


def output_specs(ty) -> Tuple[List[TensorSpec], bool]:
    """Tensor specs of a call's result type and whether it is a tuple."""
    if isinstance(ty, relax.TupleType):
        specs = [tensor_spec(f) for f in ty.fields]
        return [s if s is not None else TensorSpec(None, "void") for s in specs], True
    spec = tensor_spec(ty)
    return ([spec] if spec is not None else []), False


class ScopeGraph:
    """Call sites, slots and uses of one Relax function (see the module docstring)."""

    def __init__(self, func: relax.Function, mod: Optional[tvm.IRModule] = None) -> None:
        self.func = func
        self.mod = mod
        self.sites: List[CallSite] = []
        self.site_of_var: Dict[relax.Var, CallSite] = {}
        self.pinned: set = set()
        self._slot_of: Dict[relax.Var, Slot] = {}
        self._tuple_fields: Dict[relax.Var, List[Optional[Slot]]] = {}
        self.params = set(func.params)
        self.binding_names: List[str] = []
        self._literal_tuples: set = set()
        self._walk()

    # ----------------------------------------------------------------- walk
    def _walk(self) -> None:
        body = self.func.body
        if not isinstance(body, relax.SeqExpr):
            self._pin_uses(body)
            return
        for block in body.blocks:
            in_dataflow = isinstance(block, relax.DataflowBlock)
            for binding in block.bindings:
                self.binding_names.append(str(binding.var.name))
                if in_dataflow and isinstance(binding, relax.VarBinding):
                    self._visit_binding(binding)
                else:
                    self._pin_uses(binding.value)
                if in_dataflow and not isinstance(binding.var, relax.DataflowVar):
                    self._pin_var(binding.var)
        self._pin_uses(body.body)

    def _visit_binding(self, binding: relax.VarBinding) -> None:
        var, value = binding.var, binding.value
        if isinstance(value, relax.Call) and not (isinstance(value.op, tvm.ir.Op) and value.op.name in _SKIP_OPS):
            self._add_site(var, value)
        elif isinstance(value, relax.Var):
            if value in self._slot_of:
                self._slot_of[var] = self._slot_of[value]
            if value in self._tuple_fields:
                self._tuple_fields[var] = self._tuple_fields[value]
        elif isinstance(value, relax.TupleGetItem) and isinstance(value.tuple_value, relax.Var):
            fields = self._tuple_fields.get(value.tuple_value)
            if fields is not None and value.index < len(fields) and fields[value.index] is not None:
                self._slot_of[var] = fields[value.index]
        elif isinstance(value, relax.Tuple):
            # a tuple literal forwards its fields to TupleGetItem users; any other use pins them
            self._tuple_fields[var] = [self._slot_of.get(f) if isinstance(f, relax.Var) else None for f in value.fields]
            self._literal_tuples.add(var)
        else:
            self._pin_uses(value)

    def _add_site(self, var: relax.Var, call: relax.Call) -> None:
        op = call.op
        if isinstance(op, tvm.ir.Op) and op.name == "relax.call_tir":
            kind, name = "call_tir", str(call.args[0].name_hint)
            raw_args = list(call.args[1].fields) if isinstance(call.args[1], relax.Tuple) else [call.args[1]]
            out_ty = call.ty_args[0] if len(call.ty_args) else call.ty
        elif isinstance(op, tvm.ir.Op):
            kind, name = "relax_op", str(op.name)
            raw_args = []
            for a in call.args:
                raw_args.extend(a.fields if isinstance(a, relax.Tuple) else [a])
            out_ty = call.ty
        else:
            kind = "opaque"
            name = str(getattr(op, "name_hint", None) or getattr(op, "global_symbol", None) or type(op).__name__)
            raw_args = []
            for a in call.args:
                raw_args.extend(a.fields if isinstance(a, relax.Tuple) else [a])
            out_ty = call.ty
        index = len(self.sites)
        args: List[TensorArg] = []
        for raw_index, a in enumerate(raw_args):
            if isinstance(a, relax.Var) and a in self._literal_tuples:
                self._pin_uses(a)  # a tuple variable passed whole: its fields stay buffers
                continue
            is_var = isinstance(a, relax.Var)
            slot = self._slot_of.get(a) if is_var else None
            if slot is not None:  # the producer already read this tensor's type
                spec = self.slot_spec(slot)
            else:
                spec = tensor_spec(a.ty) if is_var or isinstance(a, GenericConst) else None
            if spec is None or spec.dtype == "void":
                if is_var:
                    self._pin_var(a)
                continue
            args.append(TensorArg(len(args), raw_index, a, spec, slot))
        outs, is_tuple = output_specs(out_ty)
        site = CallSite(index, var, call, kind, name, args, outs, is_tuple)
        self.sites.append(site)
        self.site_of_var[var] = site
        for arg in args:
            if arg.slot is not None:
                producer = self.sites[arg.slot[0]]
                producer.consumers.setdefault(arg.slot[1], []).append((index, arg.position))
        if is_tuple:
            self._tuple_fields[var] = [(index, k) for k in range(len(outs))]
        elif outs:
            self._slot_of[var] = (index, 0)

    # ---------------------------------------------------------------- pins
    def _pin_var(self, var: relax.Var) -> None:
        if var in self._slot_of:
            self.pinned.add(self._slot_of[var])
        for slot in self._tuple_fields.get(var, ()):
            if slot is not None:
                self.pinned.add(slot)

    def _pin_uses(self, expr: relax.Expr) -> None:
        for var in relax.analysis.free_vars(expr):
            self._pin_var(var)

    # ------------------------------------------------------------- queries
    def slot_spec(self, slot: Slot) -> TensorSpec:
        return self.sites[slot[0]].outs[slot[1]]

    def fingerprint(self) -> str:
        """Identifies the function's binding structure (names and call targets, in order)."""
        parts = [",".join(self.binding_names)] + [f"{s.index}:{s.name}:{len(s.args)}" for s in self.sites]
        return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]


def scoped_functions(mod: tvm.IRModule):
    """The (GlobalVar, Function) pairs the scope passes work on: Relax functions that are not
    primitive (fused) functions."""
    for gvar, func in mod.functions_items():
        if isinstance(func, relax.Function) and not (func.attrs is not None and "Primitive" in func.attrs):
            yield gvar, func


def scope_module_pass(name: str, rewrite) -> tvm.transform.Pass:
    """A module pass applying ``rewrite(module, ScopeGraph) -> Function`` to every scoped function.

    It works on a clone, so the input module is never mutated (callers may reuse it); ``rewrite``
    may update the clone's global infos."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        work = mod.clone()
        updates = {gvar: rewrite(work, ScopeGraph(func, work)) for gvar, func in scoped_functions(work)}
        for gvar, func in updates.items():
            work[gvar] = func
        return work

    return tvm.transform.module_pass(transform, opt_level=0, name=name)
