"""The memory plan of a scoped module: every tensor's scope, image extents and bytes, and copies.

``plan(mod)`` reads the VDevices that the scope passes wrote (running :func:`scope_pipeline` first
when the module has none). Its JSON form is a stable contract read by tools and tests::

    {"tensors": [{"name", "shape", "dtype", "scope", "bytes", "image", "kind", "reason", "object"}],
     "texture_bytes", "buffer_bytes", "copies", "copy_bytes", "activation_texture_share",
     "scope_rule": {"rule", "kind", "reason", "device", "api", "texture_ms", "buffer_ms", "convs", "measured"} | null,
     "memory": {"without_reuse_bytes", "with_reuse_bytes", "lower_bound_bytes", "ratio_to_lower_bound",
                "shared_objects", "strategies": {pool: strategy}, "pools": {pool: {the three numbers}}}}

``image`` is ``[width, height, layers]`` for textures and null for buffers; ``kind`` is one of
``param``, ``tensor``, ``constant``, ``copy``; ``reason`` says why a buffer is a buffer (empty for
textures). ``activation_texture_share`` is the fraction of activation bytes (kind ``tensor``) held
in textures. ``scope_rule`` is the memory-kind decision
(:mod:`relax_vk.passes.scope.choose_memory_kind`): which rule chose textures or buffers
(``prefer``, ``measured``, ``consumer-priority``) and the measured conv times behind it; null
when the module was scoped without measurements and no tool said which rule applied.
``memory`` is storage planning (:mod:`relax_vk.storage`) over the function's intermediates
(``tensor`` and ``copy`` entries that are not outputs; each call binding is one step): bytes
without reuse, with reuse and the lower bound (the most bytes live at once); a tensor's
``object`` is the allocation it shares (null for inputs, outputs and constants). On a lowered
module (``CompiledModule.plan()``) these are the artifact's intermediates and allocations (less
any kernel workspaces); on a scoped one, before fusion, they describe unfused calls. Keys may be
added, never renamed or removed.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass, field
from typing import List, Optional

import tvm
from tvm import relax
from tvm.ir.expr import GenericConst

from ..core.ir_utils import tensor_scope
from ..core.scope import GLOBAL, MAX_ORIGINS, TEXTURE_SCOPES, is_texturable, placed_extents, scope_from_name, static_shape, tensor_bytes
from ..passes.layout.derive_identifiers import source_name
from ..passes.scope.choose_memory_kind import recorded
from ..passes.scope.scope_graph import scoped_functions
from ..storage import Lifetime, StoragePlan, plan_storage
from ..passes.lower.half_arithmetic import float_texel_functions
from ..storage.lifetimes import half_texels, image_bytes, partners_of, past_half, snorm8_values


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
    object: Optional[int] = None  # the allocation it shares (storage planning); None: its own
    texel: Optional[str] = None  # a texture's texel dtype when it differs from dtype (fp16 storage; snorm8: a quantized weight's bytes)


@dataclass
class MemoryPlan:
    tensors: List[TensorEntry] = field(default_factory=list)
    texture_bytes: int = 0
    buffer_bytes: int = 0
    copies: int = 0
    copy_bytes: int = 0
    scope_rule: Optional[dict] = None
    storage: Optional[StoragePlan] = None  # storage planning of the intermediates

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
            "memory": self.storage.to_json() if self.storage is not None else None,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    def table(self) -> str:
        """A fixed-width text table followed by totals."""
        rows = [("name", "kind", "shape", "dtype", "scope", "image (w,h,layers)", "bytes", "shares", "why a buffer")]
        for t in self.tensors:
            rows.append(
                (
                    t.name,
                    t.kind,
                    "x".join(map(str, t.shape)) if t.shape is not None else "?",
                    t.dtype if not t.texel else f"{t.dtype} ({t.texel} texels)",
                    t.scope,
                    ",".join(map(str, t.image)) if t.image else "-",
                    str(t.bytes),
                    f"#{t.object}" if t.object is not None else "-",
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
        if self.storage is not None:
            lines.append(self.storage.summary())
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


def _entries_for(name: str, ty, kind: str, limits=None, is_output: bool = False, texel: str = "float32") -> List[TensorEntry]:
    if isinstance(ty, relax.TupleType):
        out = []
        for i, f in enumerate(ty.fields):
            out += _entries_for(f"{name}[{i}]", f, kind, limits, is_output, texel)
        return out
    if not isinstance(ty, relax.TensorType) or ty.dtype is None:
        return []
    shape = static_shape(ty.shape.values) if ty.shape is not None and hasattr(ty.shape, "values") else None
    scope = tensor_scope(ty)
    nbytes = tensor_bytes(shape, str(ty.dtype)) if shape is not None else 0
    image = list(scope.image_extents(shape).as_tuple()) if scope.is_texture and shape is not None else None
    reason = "" if scope.is_texture else _buffer_reason(kind, shape, str(ty.dtype), limits, is_output)
    half = image is not None and half_texels(str(ty.dtype), texel)
    if half:
        nbytes = image_bytes(image, texel)
    return [TensorEntry(name, list(shape) if shape is not None else None, str(ty.dtype), scope.name, nbytes, image, kind, reason,
                        texel=texel if half else None)]  # fmt: skip


def _is_copy(value) -> bool:
    return isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.to_vdevice"


def _module_target(mod: tvm.IRModule) -> Optional[tvm.target.Target]:
    """The target of the module's first VDevice that has one (None: none has)."""
    for vdev in mod.global_infos["vdevice"] if "vdevice" in mod.global_infos else []:
        if vdev.target is not None:
            return vdev.target
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


def _lifetimes(func: relax.Function, entries_of: dict, outputs: set, image_limit: Optional[int] = None, max_origins: int = 0) -> List[Lifetime]:
    """Lifetimes of ``func``'s intermediates: each call binding is one step; ``entries_of`` maps a
    bound variable to its ``(index, TensorEntry)`` pairs (tuple fields in order). With
    ``image_limit``, activation textures are folded and placed as the exported program's kernels
    address them (:mod:`relax_vk.codegen.texture_origins`: at most ``max_origins`` a step)."""
    alias: dict = {}
    span: dict = {}
    groups: list = []  # (the tensors each step binds, those it writes)
    fixed: set = set()
    entry_at = {i: e for pairs in entries_of.values() for i, e in pairs}

    def folded(i):
        e = entry_at.get(i)
        if image_limit is None or e is None or e.shape is None:
            return None
        return placed_extents(e.shape, e.dtype, scope_from_name(e.scope), image_limit)

    def resolve(var) -> list:
        found, todo, seen = [], [var], set()
        while todo:
            v = todo.pop()
            if v in seen:
                continue
            seen.add(v)
            if v in entries_of:
                found += [i for i, _ in entries_of[v]]
            todo += alias.get(v, [])
        return found

    def touch(indices, step):
        for i in indices:
            first, _ = span.get(i, (step, step))
            span[i] = (first, step)

    step = 0
    body = func.body
    for block in body.blocks if isinstance(body, relax.SeqExpr) else []:
        for binding in block.bindings:
            value = binding.value
            used: list = []
            relax.analysis.post_order_visit(value, lambda e: used.append(e) if isinstance(e, relax.Var) else None)
            if isinstance(value, (relax.Var, relax.Tuple, relax.TupleGetItem)):
                alias[binding.var] = used
                continue
            written = [i for i, _ in entries_of.get(binding.var, [])]
            bound = [i for var in used for i in resolve(var)] + written
            touch(bound, step)
            groups.append((bound, set(written)))
            textures = sorted({i for i in bound if folded(i) is not None}, key=lambda i: -entry_at[i].bytes)
            fixed.update(textures[max_origins:])
            step += 1
    partners = partners_of(groups)
    out = []
    for var, entries in entries_of.items():
        if var in outputs:
            continue
        for i, e in entries:
            if i in span and e.bytes and e.kind in ("tensor", "copy") and e.shape is not None:
                first, last = span[i]
                image = folded(i)
                if image is None:
                    out.append(Lifetime(i, e.name, first, last, e.bytes, tuple(e.image) if e.image else None, e.texel or e.dtype))
                else:
                    out.append(Lifetime(i, e.name, first, last, e.bytes, image.as_tuple(), e.texel or e.dtype, i not in fixed,
                                        partners.get(i, frozenset())))  # fmt: skip
    return out


def _callee(value) -> Optional[str]:
    """The PrimFunc a ``call_tir`` binding calls, else None."""
    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.call_tir":
        return value.args[0].name_hint
    return None


def plan(mod: tvm.IRModule, target: "tvm.target.Target | str | None" = None, decision=None, texel: str = "float32") -> MemoryPlan:
    """The memory plan of ``mod`` (scoped by :func:`relax_vk.scope_pipeline` first if it has no
    VDevices). ``decision``: the memory-kind decision to report when the module carries none (a
    module carries one only when measurements decided; tools pass :func:`~relax_vk.passes.scope.
    choose_memory_kind.decide`'s answer for the others). ``texel="float16"``: textures are stored
    as half texels (``ScopeOptions(precision="fp16")``): their bytes are halved."""
    if "vdevice" not in mod.global_infos:
        from ..pipeline import scope_pipeline

        mod = scope_pipeline(target)(mod)
    decision = recorded(mod) or decision
    result = MemoryPlan(scope_rule=decision.to_json() if decision is not None else None)
    functions = list(scoped_functions(mod))
    from ..core.target import target_api, target_device, target_limits, texture_limits
    from ..schedules.tuning import private_pools

    target = _module_target(mod)
    limits = texture_limits(target) if target is not None else None
    # activation textures as the exported program's kernels fold and place them (codegen.texture_origins)
    image_limit = target_limits(target).textures.spatial if target is not None else None
    max_origins = MAX_ORIGINS.get(target_api(target), 0) if target is not None else 0
    lifetimes: List[Lifetime] = []
    for gvar, func in functions:
        prefix = "" if len(functions) == 1 else f"{gvar.name}/"
        for p in func.params:
            result.tensors += _entries_for(prefix + source_name(func, p.name), p.ty, "param", limits, texel=texel)
        constants = _constants(func)
        outputs = _output_vars(func)
        entries_of: dict = {}
        # (what the export stores in float32 texels under half ones: the textures of kernels kept
        # for overflow, and constants past float16's range)
        float_texels = float_texel_functions(func) if texel == "float16" else set()
        body = func.body
        blocks = body.blocks if isinstance(body, relax.SeqExpr) else []
        for block in blocks:
            for binding in block.bindings:
                if isinstance(binding.value, (relax.Var, relax.Tuple, relax.TupleGetItem)):
                    continue  # aliases of tensors listed where they are produced
                kind = "copy" if _is_copy(binding.value) else "tensor"
                written = _callee(binding.value)
                entries = _entries_for(prefix + source_name(func, binding.var.name), binding.var.ty, kind, limits, binding.var in outputs,
                                       "float32" if written in float_texels else texel)  # fmt: skip
                entries_of[binding.var] = [(len(result.tensors) + i, e) for i, e in enumerate(entries)]
                result.tensors += entries
                if kind == "copy":
                    result.copies += 1
                    result.copy_bytes += sum(e.bytes for e in entries)
        for i, c in enumerate(constants):
            entries = _entries_for(f"{prefix}const{i}", c.ty, "constant", limits, texel="float32" if past_half(c.value.numpy()) else texel)
            if entries and entries[0].image is not None and snorm8_values(c.value.numpy()) is not None:  # a quantized weight's bytes
                entries = [dataclasses.replace(entries[0], texel="snorm8", bytes=image_bytes(entries[0].image, "snorm8"))]
            result.tensors += entries
        # functions run one after another: their steps do not overlap
        offset = max((lt.last + 1 for lt in lifetimes), default=0)
        lifetimes += [dataclasses.replace(lt, first=lt.first + offset, last=lt.last + offset)
                      for lt in _lifetimes(func, entries_of, outputs, image_limit, max_origins)]  # fmt: skip
    if decision is not None and decision.kind == "buffer":  # the decision, not the tensor, made these buffers
        why = "buffers asked for (prefer=buffer)" if decision.rule == "prefer" else ("measured: the model runs faster in buffers" if getattr(decision, "basis", "") == "model" else "measured: the model's convs run faster in buffers")
        for t in result.tensors:
            if t.reason == "its producer or consumers need a buffer (fewest copies)":
                t.reason = why
    for t in result.tensors:
        if scope_from_name(t.scope).is_texture:
            result.texture_bytes += t.bytes
        else:
            result.buffer_bytes += t.bytes
    result.storage = plan_storage(lifetimes, arena_limit=target_limits(target).max_alloc_bytes if target is not None else None,
                                  image_limit=image_limit if image_limit is not None else 16384,
                                  private=private_pools(target_device(target), target_api(target)) if target is not None else ())  # fmt: skip
    for tid, obj in result.storage.assignment.items():
        result.tensors[tid].object = obj
    return result
