"""Provenance: which of the model's own ops every binding, and so every kernel, came from.

The front doors record the model's op names on the imported ``main`` (:data:`MODEL_OPS_ATTR`,
variable name -> op name: ONNX node names, PyTorch module paths; :func:`record_model_ops`). The
compiler's passes rename, decompose, pack, legalize and fuse the bindings, and neither variable
names nor spans survive them, so :class:`ProvenanceTracker` (a pass instrument :func:`tracking`
installs around the scope and lowering stages) follows the bindings pass by pass: after every pass
that changed ``main`` it aligns the new bindings with the old ones and hands each new binding the
model ops of the old ones it stands for:

* a binding whose variable is the very same object as an old one's (legalization keeps them)
  is that binding;
* a call of a fused function (``FuseOps``) stands for the bindings inside it;
* by dataflow (a pass may emit the graph in another order: the layout stage does): a new binding
  that reads the counterparts of what an old binding read is that binding, if it is of the same
  kind, or if it became a kernel or another nn op (a LayerNorm on packed tokens becomes a
  ``call_tir``, a Linear a 1x1 conv) and what reads it can be what read the old one; data
  movement, and the old side's views (which packed layouts mostly drop), are seen through;
* the rest is aligned as sequences of op kinds (:class:`difflib.SequenceMatcher`): equal runs
  and same-length replaced runs map one to one (a pass that rewrites ops one for one), a longer or
  shorter replaced run inherits the union of the ops it replaced (``batch_norm`` decomposed into
  four elementwise ops), inserted bindings (layout transforms, scope copies) come from no model op.

The result is :data:`PROVENANCE_ATTR` on the lowered ``main`` (the model ops of each binding, in
binding order: variable names are not unique there), which the export writes into each step of the artifact (``step["ops"]``), so a
profile or a bisection of an ``.rvk`` needs no TVM. A kernel with several model ops holds them
fused together; a kernel with none is work the compiler added (a layout transform).
"""

from __future__ import annotations

import contextlib
from difflib import SequenceMatcher
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import tvm
from tvm import relax
from tvm.ir.instrument import pass_instrument

from .ir_utils import node_id

MODEL_OPS_ATTR = "relax_vk.model_ops"  # imported main: variable name -> the model op that made it
PROVENANCE_ATTR = "relax_vk.provenance"  # lowered main: per binding, in order, its model ops (in model order)
OUTPUT_NAMES_ATTR = "relax_vk.output_names"  # imported main: the model's names of its outputs, in order

Ops = Tuple[str, ...]

#: op kinds that move data rather than compute a model op (what layout and scope passes insert)
MOVEMENT = frozenset({"relax.layout_transform", "relax.to_vdevice", "relax.hint_on_device"})
STRUCTURAL = frozenset({"Tuple", "TupleGetItem"})  # bindings that only group or pick values
ALIASES = STRUCTURAL | {"Var", "DataflowVar"}  # bindings that compute nothing (a value named again)
#: ops that only view their input (a packed layout carries most of them without a kernel)
VIEWS = frozenset({"relax.reshape", "relax.permute_dims", "relax.squeeze", "relax.expand_dims", "relax.strided_slice",
                   "relax.broadcast_to", "relax.flatten"})  # fmt: skip


def record_model_ops(mod: tvm.IRModule, made_by: Sequence[Tuple[str, str]]) -> tvm.IRModule:
    """``mod`` with :data:`MODEL_OPS_ATTR` on its ``main``: ``made_by`` lists ``(variable name or
    the call bound to it, model op)`` in the order the importer emitted them (the variable a model op's conversion
    returned); the bindings emitted before it while converting that op (a bias reshape before its
    add) belong to it too, so every binding up to the next recorded one is that op's."""
    main = mod["main"]
    recorded, calls = {}, {}
    for made, op in made_by:
        if isinstance(made, str):
            recorded.setdefault(made, op)  # a conversion that returns its input (dropout) names no new binding
        else:
            calls.setdefault(made, op)  # a call the importer bound later: the binding holds it
    names, pending = {}, []
    for var, value in _bindings(main):
        pending.append(var.name)
        op = recorded.get(var.name) or calls.get(value)
        if op is not None:
            for name in pending:
                names[name] = op
            pending = []
    if not names:
        return mod
    out = mod.clone()
    out["main"] = main.with_attr(MODEL_OPS_ATTR, names)
    return out


def record_output_names(mod: tvm.IRModule, names: Sequence[str]) -> tvm.IRModule:
    """``mod`` with :data:`OUTPUT_NAMES_ATTR` on its ``main``: the model's own names of its outputs,
    in order (ONNX's graph outputs), which the artifact gives its output tensors."""
    if not names or any(not n for n in names):
        return mod
    out = mod.clone()
    out["main"] = mod["main"].with_attr(OUTPUT_NAMES_ATTR, [str(n) for n in names])
    return out


def output_names(func: relax.Function) -> List[str]:
    """:data:`OUTPUT_NAMES_ATTR` of ``func`` (empty when the model named none)."""
    if func is None or func.attrs is None or OUTPUT_NAMES_ATTR not in func.attrs:
        return []
    return [str(n) for n in func.attrs[OUTPUT_NAMES_ATTR]]


def _bindings(func: relax.Function) -> Iterator[Tuple[relax.Var, relax.Expr]]:
    body = func.body
    if not isinstance(body, relax.SeqExpr):
        return
    for block in body.blocks:
        for b in block.bindings:
            yield b.var, b.value


def _callee(functions: Mapping[tvm.ir.GlobalVar, relax.Function], value) -> Optional[relax.Function]:
    """The Relax function a binding calls (a fused group), else None (``functions``: the module's)."""
    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.GlobalVar):
        return functions.get(value.op)
    return None


def _kind(value) -> str:
    if isinstance(value, relax.Call):
        if isinstance(value.op, tvm.ir.Op):
            return value.op.name
        return "call"
    return type(value).__name__


#: the last functions flattened (each pass's result is the next pass's input): ((func, mod), entries);
#: the objects are held, so the nodes their entries identify stay alive (and their ids unique)
_FLAT_MEMO: List[tuple] = []


# Dictionaries below are keyed by a variable's node id, not by the variable: TVM's ``Expr.__eq__``,
# which a lookup calls for every other Python wrapper of the same node, reads the node's type
# through the FFI first (measured: a quarter of the tracker's time on mobilenet_v2).
_id = node_id


def _flat(func: relax.Function, mod: tvm.IRModule) -> List[tuple]:
    """``(var id, kind, outer index, outer var id, value, input ids)`` of every binding, a fused
    call's inner bindings in its place (ids: :func:`_id`; inputs: :func:`_inputs` of the value)."""
    for (f, m), entries in _FLAT_MEMO:
        if f.same_as(func) and m.same_as(mod):
            return entries
    functions = {gv: f for gv, f in mod.functions_items() if isinstance(f, relax.Function)}
    # a pass keeps most bindings' values (the same nodes, alive in the memo): their inputs are known
    known = {_id(entry[4]): entry[5] for _key, entries in _FLAT_MEMO for entry in entries}

    def entry(var_id: int, value, i: int, outer: int) -> tuple:
        ins = known.get(_id(value))
        if ins is None:
            ins = [_id(x) for x in _inputs(value)]
        return (var_id, _kind(value), i, outer, value, ins)

    out = []
    for i, (var, value) in enumerate(_bindings(func)):
        callee = _callee(functions, value)
        outer = _id(var)
        if callee is not None:
            out += [entry(_id(v), val, i, outer) for v, val in _bindings(callee)]
        else:
            out.append(entry(outer, value, i, outer))
    _FLAT_MEMO[:] = [((func, mod), out)] + _FLAT_MEMO[:1]
    return out


def _inputs(value) -> List[relax.Var]:
    """The variables a binding's value reads (call arguments, tuple fields)."""
    found: List[relax.Var] = []

    def visit(e):
        if isinstance(e, relax.Var):
            found.append(e)
        elif isinstance(e, relax.Call):
            for a in e.args:
                visit(a)
        elif isinstance(e, relax.Tuple):
            for f in e.fields:
                visit(f)
        elif isinstance(e, relax.TupleGetItem):
            visit(e.tuple_value)

    visit(value)
    return found


def _transparent(kind: str) -> bool:
    """Whether a binding of this kind holds the same value as its input (data movement, aliases)."""
    return kind in MOVEMENT or kind == "DataflowVar" or kind == "Var"


def _converts(kind: str) -> bool:
    """Whether a new binding of this kind may stand for an old binding of another kind: the layout
    stage turns ops into kernels (``call_tir``) or other nn ops (a Linear into a 1x1 conv); a
    decomposition's pieces are arithmetic, and those only match their own kind."""
    return kind == "relax.call_tir" or kind == "relax.matmul" or kind.startswith("relax.nn.")


def _uses(entries: List[tuple], see_through) -> Dict[int, set]:
    """Var id -> the kinds of the bindings that read it, through bindings ``see_through`` accepts."""
    chain: Dict[int, set] = {}  # a value seen through -> itself and what it stands for (any other: itself)
    uses: Dict[int, set] = {}
    for var, kind, _, _, _, ins in entries:
        if see_through(kind):
            chain[var] = {var} | chain.get(ins[0], {ins[0]}) if ins else {var}
            continue
        chain.pop(var, None)  # (a name bound again, by a binding not seen through)
        for v in ins:
            for u in chain.get(v, (v,)):
                found = uses.get(u)
                if found is None:
                    uses[u] = {kind}
                else:
                    found.add(kind)
    return uses


def _compatible(new_uses: set, old_uses: set) -> bool:
    """Whether the readers of a new value can stand for the readers of an old one."""
    if not new_uses or not old_uses:
        return True
    return any(k in old_uses or _converts(k) for k in new_uses)


def _dataflow_matches(before: List[tuple], after: List[tuple], old_params, new_params, anchors: Mapping[int, int]) -> Dict[int, int]:
    """New entry -> old entry, for the new bindings that compute an op from the values the old one
    computed from (order free: a pass may emit the graph in another order): of the same kind, or
    (:func:`_converts`) of another, a view included (a packed layout makes some views kernels and
    drops the others). Data movement on either side, and views on the old side, are seen through. ``anchors``: entries already
    known to be the same binding."""
    chain: Dict[int, set] = {}  # old var -> itself and the old values it views (through movement and views)
    for var, kind, _, _, _, ins in before:
        chain[var] = {var} | (chain.get(ins[0], {ins[0]}) if (_transparent(kind) or kind in VIEWS) and ins else set())
    old_inputs = [set().union(*[chain.get(v, {v}) for v in ins]) for *_rest, ins in before]
    readers: Dict[int, List[int]] = {}  # old var -> the old bindings that read it (in order)
    for i, (_, kind, *_rest) in enumerate(before):
        if not _transparent(kind):
            for v in old_inputs[i]:
                readers.setdefault(v, []).append(i)
    old_uses = _uses(before, lambda kind: _transparent(kind) or kind in VIEWS)
    new_uses = _uses(after, _transparent)
    corr: Dict[int, int] = {_id(n): _id(o) for n, o in zip(new_params, old_params)}  # new var -> old value
    for j, i in anchors.items():
        corr[after[j][0]] = before[i][0]
    matches: Dict[int, int] = {}
    taken = set(anchors.values())
    for j, (var, kind, _, _, _, ins) in enumerate(after):
        if j in anchors:
            continue
        if _transparent(kind):
            if ins and ins[0] in corr:
                corr[var] = corr[ins[0]]
            continue
        mapped = {corr[v] for v in ins if v in corr}
        if not mapped:
            continue
        readers_of = min((readers.get(m, []) for m in mapped), key=len)
        same = [i for i in readers_of if before[i][1] == kind]
        other = [i for i in readers_of if before[i][1] != kind and before[i][1] not in STRUCTURAL] if _converts(kind) else []
        for n, i in enumerate(same + other):
            if i in taken or not mapped <= old_inputs[i]:
                continue
            # another kind only where what reads the new value can be what reads the old one
            if n >= len(same) and not _compatible(new_uses.get(var, set()), old_uses.get(before[i][0], set())):
                continue
            matches[j] = i
            taken.add(i)
            corr[var] = before[i][0]
            break
    return matches


def _union(groups: Sequence[Ops]) -> Ops:
    seen: Dict[str, None] = {}
    for ops in groups:
        for op in ops:
            seen.setdefault(op, None)
    return tuple(seen)


def propagate(old: relax.Function, old_mod: tvm.IRModule, old_ops: Mapping[relax.Var, Ops], new: relax.Function,
              new_mod: tvm.IRModule) -> Dict[relax.Var, Ops]:  # fmt: skip
    """The model ops of ``new``'s bindings, from ``old``'s (see the module docstring)."""
    before = _flat(old, old_mod)
    after = _flat(new, new_mod)
    # (the bindings inside a fused call have the ops of the call)
    ops_of = {_id(var): ops for var, ops in old_ops.items()}
    ops_before = [ops_of.get(var) or ops_of.get(outer, ()) for var, _, _, outer, *_rest in before]
    flat_ops: List[Ops] = [()] * len(after)
    index = {var: i for i, (var, *_rest) in enumerate(before)}
    outer_index = {outer: i for _, _, i, outer, *_rest in before}
    kind_of = {var: kind for var, kind, *_rest in before}  # (a fused call's variable is no entry: its bindings are)
    matched: Dict[int, int] = {}
    for j, (var, kind, *_rest) in enumerate(after):
        # the same variable: the same binding; unless it only named another binding's value (an
        # alias, a tuple's field) and now holds a computation: CanonicalizeBindings moves an output
        # variable onto the op it aliased, which the dataflow match below finds
        if var in index and not (before[index[var]][1] in ALIASES and kind not in ALIASES):
            matched[j] = index[var]
    kept_calls = {j: outer_index[outer] for j, (var, kind, _, outer, *_rest) in enumerate(after)
                  if j not in matched and var == outer and outer in outer_index
                  and not (kind_of.get(outer) in ALIASES and kind not in ALIASES)}  # fmt: skip
    for j, i in _dataflow_matches(before, after, old.params, new.params, dict(matched)).items():
        matched.setdefault(j, i)
    for j, i in matched.items():
        flat_ops[j] = ops_before[i]
    for j, i in kept_calls.items():  # a fused call kept its variable (FuseTIR): the call's ops
        flat_ops[j] = _union([ops_before[k] for k, entry in enumerate(before) if entry[2] == i])
    # the rest, aligned as sequences of op kinds
    # (tuples compute nothing: a decomposed op leaves its tuple behind, and that must not pull the
    # op's name onto whatever else is left)
    used = set(matched.values())
    olds = [i for i in range(len(before)) if i not in used and before[i][1] not in STRUCTURAL]
    news = [j for j in range(len(after)) if j not in matched and j not in kept_calls and not _transparent(after[j][1])
            and after[j][1] not in STRUCTURAL]  # fmt: skip
    inserted = set()
    matcher = SequenceMatcher(None, [before[i][1] for i in olds], [after[j][1] for j in news], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            for k in range(j2 - j1):
                flat_ops[news[j1 + k]] = ops_before[olds[i1 + k]]
        elif tag == "replace":
            merged = _union([ops_before[i] for i in olds[i1:i2]])
            for j in news[j1:j2]:
                flat_ops[j] = merged
        elif tag == "insert":
            inserted.update(news[j1:j2])
    # a run of new bindings that compute (a decomposition) belongs to the binding it feeds, the
    # next one; data movement a pass added (layout transforms, copies) belongs to no model op
    for j in sorted(inserted, reverse=True):
        if j + 1 < len(after) and after[j][1] not in MOVEMENT:
            flat_ops[j] = flat_ops[j + 1]
    # fold fused calls back: a call stands for the union of its inner bindings, which keep their own
    # ops too (a pass that cuts a fused group in parts keeps the inner variables: each part's ops)
    outer: Dict[int, List[Ops]] = {}
    for entry, ops in zip(after, flat_ops):
        outer.setdefault(entry[2], []).append(ops)
    result: Dict[relax.Var, Ops] = {}
    functions = {gv: f for gv, f in new_mod.functions_items() if isinstance(f, relax.Function)}
    j = 0  # (after's entries: each binding, or a fused call's inner bindings in its place, in order)
    for i, (var, value) in enumerate(_bindings(new)):
        callee = _callee(functions, value)
        if callee is not None:
            for inner, _inner_value in _bindings(callee):
                result[inner] = flat_ops[j]
                j += 1
        else:
            j += 1
        result[var] = _union(outer.get(i, []))
    return result


def _main(mod: tvm.IRModule) -> Optional[relax.Function]:
    for gv in mod.get_global_vars():
        if gv.name_hint == "main":
            func = mod[gv]
            return func if isinstance(func, relax.Function) else None
    return None


def model_op_names(func: relax.Function) -> Dict[str, str]:
    """Variable name -> the model op that made it, as :data:`MODEL_OPS_ATTR` records it on ``func``
    (:func:`record_model_ops`); empty where the function has no such record."""
    return dict(func.attrs[MODEL_OPS_ATTR]) if func.attrs is not None and MODEL_OPS_ATTR in func.attrs else {}


def initial_ops(func: relax.Function) -> Dict[relax.Var, Ops]:
    """The model ops :data:`MODEL_OPS_ATTR` records for ``func``'s bindings."""
    names = model_op_names(func)
    return {var: (str(names[var.name]),) for var, _ in _bindings(func) if var.name in names}


@pass_instrument
class ProvenanceTracker:
    """Follows the model ops of ``main``'s bindings through every pass (module docstring)."""

    def __init__(self):
        self.main: Optional[relax.Function] = None
        self.mod: Optional[tvm.IRModule] = None
        self.ops: Dict[relax.Var, Ops] = {}

    def run_before_pass(self, mod, _info):
        if self.main is None:
            main = _main(mod)
            if main is not None:
                self.main, self.mod, self.ops = main, mod, initial_ops(main)

    def run_after_pass(self, mod, _info):
        main = _main(mod)
        if main is None or self.main is None or main.same_as(self.main):
            return
        self.ops = propagate(self.main, self.mod, self.ops, main, mod)
        self.main, self.mod = main, mod

    def per_binding(self) -> List[List[str]]:
        """The model ops of each binding of the last ``main`` seen, in binding order."""
        return [list(self.ops.get(var, ())) for var, _ in _bindings(self.main)] if self.main is not None else []


@contextlib.contextmanager
def tracking() -> Iterator[ProvenanceTracker]:
    """A pass context (the current one's settings, plus the tracker) for the passes run inside."""
    tracker = ProvenanceTracker()
    outer = tvm.transform.PassContext.current()
    with tvm.transform.PassContext(opt_level=outer.opt_level, config=dict(outer.config), instruments=list(outer.instruments) + [tracker]):
        yield tracker


def attach(lowered: tvm.IRModule, tracker: ProvenanceTracker) -> tvm.IRModule:
    """``lowered`` with :data:`PROVENANCE_ATTR` on its ``main`` (unchanged when no op was named)."""
    main = _main(lowered)
    if main is None or tracker.main is None:
        return lowered
    if not tracker.main.same_as(main):  # (a stage's last rewrite the instrument did not see)
        tracker.ops = propagate(tracker.main, tracker.mod, tracker.ops, main, lowered)
        tracker.main, tracker.mod = main, lowered
    ops = tracker.per_binding()
    if not any(ops):
        return lowered
    out = lowered.clone()
    out["main"] = main.with_attr(PROVENANCE_ATTR, ops)
    return out


def provenance(func: relax.Function) -> List[List[str]]:
    """:data:`PROVENANCE_ATTR` of a lowered ``main``: each binding's model ops, in binding order
    (empty when the model's ops were not named)."""
    if func is None or func.attrs is None or PROVENANCE_ATTR not in func.attrs:
        return []
    return [[str(o) for o in ops] for ops in func.attrs[PROVENANCE_ATTR]]
