"""The memory plan of a scoped module: every tensor's scope, image extents and bytes, and copies.

``plan(mod)`` reads the VDevices that the scope passes wrote (running :func:`scope_pipeline` first
when the module has none). Its JSON form is a stable contract read by tools and tests::

    {"tensors": [{"name", "shape", "dtype", "scope", "bytes", "image", "kind", "reason"}],
     "texture_bytes", "buffer_bytes", "copies", "copy_bytes", "activation_texture_share",
     "scope_rule": {"rule", "kind", "reason", "device", "api", "texture_ms", "buffer_ms", "convs", "measured"} | null}

``image`` is ``[width, height, layers]`` for textures and null for buffers; ``kind`` is one of
``param``, ``tensor``, ``constant``, ``copy``; ``reason`` says why a buffer is a buffer (empty for
textures). ``activation_texture_share`` is the fraction of activation bytes (kind ``tensor``) held
in textures. ``scope_rule`` is the memory-kind decision
(:mod:`relax_vk.passes.scope.choose_memory_kind`): which rule chose textures or buffers
(``prefer``, ``measured``, ``consumer-priority``) and the measured conv times behind it; null
when the module was scoped without measurements and no tool said which rule applied. Keys may be
added, never renamed or removed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import List, Optional

import tvm
from tvm import relax
from tvm.ir.expr import GenericConst

from ..core.ir_utils import tensor_scope
from ..core.scope import GLOBAL, TEXTURE_SCOPES, is_texturable, scope_from_name, static_shape, tensor_bytes
from ..passes.layout.derive_identifiers import source_name
from ..passes.scope.choose_memory_kind import recorded
from ..passes.scope.scope_graph import scoped_functions


@dataclass
class TensorEntry:
    name: str
    shape: Optional[List[int]]
    dtype: str
    scope: str
    bytes: int
    image: Optional[List[int]]
    kind: str
    reason: str = ""


@dataclass
class MemoryPlan:
    tensors: List[TensorEntry] = field(default_factory=list)
    texture_bytes: int = 0
    buffer_bytes: int = 0
    copies: int = 0
    copy_bytes: int = 0
    scope_rule: Optional[dict] = None

    @property
    def texture_share(self) -> float:
        total = self.texture_bytes + self.buffer_bytes
        return self.texture_bytes / total if total else 0.0

    @property
    def activation_texture_share(self) -> float:
        acts = [t for t in self.tensors if t.kind == "tensor"]
        total = sum(t.bytes for t in acts)
        return sum(t.bytes for t in acts if t.scope != GLOBAL.name) / total if total else 0.0

    def to_json(self) -> dict:
        return {
            "tensors": [asdict(t) for t in self.tensors],
            "texture_bytes": self.texture_bytes,
            "buffer_bytes": self.buffer_bytes,
            "copies": self.copies,
            "copy_bytes": self.copy_bytes,
            "activation_texture_share": self.activation_texture_share,
            "scope_rule": self.scope_rule,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    def table(self) -> str:
        """A fixed-width text table followed by totals."""
        rows = [("name", "kind", "shape", "dtype", "scope", "image (w,h,layers)", "bytes", "why a buffer")]
        for t in self.tensors:
            rows.append(
                (
                    t.name,
                    t.kind,
                    "x".join(map(str, t.shape)) if t.shape is not None else "?",
                    t.dtype,
                    t.scope,
                    ",".join(map(str, t.image)) if t.image else "-",
                    str(t.bytes),
                    t.reason,
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append("")
        lines.append(
            f"texture bytes: {self.texture_bytes}  buffer bytes: {self.buffer_bytes}  "
            f"texture share: {100 * self.texture_share:.1f}% (activations {100 * self.activation_texture_share:.1f}%)  "
            f"copies: {self.copies} ({self.copy_bytes} bytes)"
        )
        if self.scope_rule:
            lines.append(f"scope rule: {self.scope_rule['rule']} -> {self.scope_rule['kind']}s ({self.scope_rule['reason']})")
        return "\n".join(lines)


def _buffer_reason(kind: str, shape, dtype: str, limits, is_output: bool = False) -> str:
    """Why a tensor is a buffer, as far as its own type and place tell."""
    if kind == "param":
        return "model input: buffer ABI"
    if is_output:
        return "model output: buffer ABI"
    if kind == "constant":
        return "constant read from a buffer"
    if not is_texturable(shape, dtype):
        return f"not a packed float tensor (shape {list(shape) if shape else shape}, {dtype})"
    if limits is not None and not any(s.fits(shape, dtype, limits) for s in TEXTURE_SCOPES):
        return "fits no texture mapping under the target's limits"
    return "its producer or consumers need a buffer (fewest copies)"


def _entries_for(name: str, ty, kind: str, limits=None, is_output: bool = False) -> List[TensorEntry]:
    if isinstance(ty, relax.TupleType):
        out = []
        for i, f in enumerate(ty.fields):
            out += _entries_for(f"{name}[{i}]", f, kind, limits, is_output)
        return out
    if not isinstance(ty, relax.TensorType) or ty.dtype is None:
        return []
    shape = static_shape(ty.shape.values) if ty.shape is not None and hasattr(ty.shape, "values") else None
    scope = tensor_scope(ty)
    nbytes = tensor_bytes(shape, str(ty.dtype)) if shape is not None else 0
    image = list(scope.image_extents(shape).as_tuple()) if scope.is_texture and shape is not None else None
    reason = "" if scope.is_texture else _buffer_reason(kind, shape, str(ty.dtype), limits, is_output)
    return [TensorEntry(name, list(shape) if shape is not None else None, str(ty.dtype), scope.name, nbytes, image, kind, reason)]


def _is_copy(value) -> bool:
    return isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.to_vdevice"


def _module_limits(mod: tvm.IRModule):
    from ..core.target import texture_limits

    for vdev in mod.global_infos["vdevice"] if "vdevice" in mod.global_infos else []:
        if vdev.target is not None:
            return texture_limits(vdev.target)
    return None


def _output_vars(func: relax.Function) -> set:
    """The variables whose values ``func`` returns, seen through aliases (``gv = lv``) and tuples."""
    alias = {}
    body = func.body
    for block in body.blocks if isinstance(body, relax.SeqExpr) else []:
        for binding in block.bindings:
            if isinstance(binding.value, relax.Var):
                alias[binding.var] = binding.value
            elif isinstance(binding.value, relax.Tuple):
                alias[binding.var] = list(binding.value.fields)
    found, todo = set(), [body.body if isinstance(body, relax.SeqExpr) else body]
    while todo:
        expr = todo.pop()
        if isinstance(expr, relax.Tuple):
            todo += list(expr.fields)
        elif isinstance(expr, relax.Var) and expr not in found:
            found.add(expr)
            target = alias.get(expr)
            todo += target if isinstance(target, list) else [target] if target is not None else []
    return found


def _constants(func: relax.Function) -> List[GenericConst]:
    """The distinct tensor constants of ``func``, in first-use order."""
    found: List[GenericConst] = []
    seen = set()

    def visit(expr):
        if isinstance(expr, GenericConst) and expr not in seen:
            seen.add(expr)
            found.append(expr)

    relax.analysis.post_order_visit(func, visit)
    return found


def plan(mod: tvm.IRModule, target: "tvm.target.Target | str | None" = None, decision=None) -> MemoryPlan:
    """The memory plan of ``mod`` (scoped by :func:`relax_vk.scope_pipeline` first if it has no
    VDevices). ``decision``: the memory-kind decision to report when the module carries none (a
    module carries one only when measurements decided; tools pass :func:`~relax_vk.passes.scope.
    choose_memory_kind.decide`'s answer for the others)."""
    if "vdevice" not in mod.global_infos:
        from ..pipeline import scope_pipeline

        mod = scope_pipeline(target)(mod)
    decision = recorded(mod) or decision
    result = MemoryPlan(scope_rule=decision.to_json() if decision is not None else None)
    functions = list(scoped_functions(mod))
    limits = _module_limits(mod)
    for gvar, func in functions:
        prefix = "" if len(functions) == 1 else f"{gvar.name}/"
        for p in func.params:
            result.tensors += _entries_for(prefix + source_name(func, p.name), p.ty, "param", limits)
        constants = _constants(func)
        outputs = _output_vars(func)
        body = func.body
        blocks = body.blocks if isinstance(body, relax.SeqExpr) else []
        for block in blocks:
            for binding in block.bindings:
                if isinstance(binding.value, (relax.Var, relax.Tuple, relax.TupleGetItem)):
                    continue  # aliases of tensors listed where they are produced
                kind = "copy" if _is_copy(binding.value) else "tensor"
                entries = _entries_for(prefix + source_name(func, binding.var.name), binding.var.ty, kind, limits, binding.var in outputs)
                result.tensors += entries
                if kind == "copy":
                    result.copies += 1
                    result.copy_bytes += sum(e.bytes for e in entries)
        for i, c in enumerate(constants):
            result.tensors += _entries_for(f"{prefix}const{i}", c.ty, "constant", limits)
    if decision is not None and decision.kind == "buffer":  # the decision, not the tensor, made these buffers
        why = "buffers asked for (prefer=buffer)" if decision.rule == "prefer" else "measured: the model's convs run faster in buffers"
        for t in result.tensors:
            if t.reason == "its producer or consumers need a buffer (fewest copies)":
                t.reason = why
    for t in result.tensors:
        if scope_from_name(t.scope).is_texture:
            result.texture_bytes += t.bytes
        else:
            result.buffer_bytes += t.bytes
    return result
