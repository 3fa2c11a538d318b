"""HalfArithmetic: scheduled kernels compute in float16, accumulating in float32.

Requires: a lowered, scheduled module (after :func:`relax_vk.lowering_stage`; block-level TIR, its
``main`` carrying provenance when the model's ops were named), and a target whose devices do half
arithmetic (Vulkan ``shader-f16``, OpenCL ``cl_khr_fp16``: the runtimes refuse a device without).

Guarantees, per kernel the :class:`HalfPolicy` lets compute in half (every float32 kernel but those
it keeps in float32: :meth:`HalfPolicy.keeps`):

* its parameters (textures, buffers) keep their float32 dtype: the program's ABI, memory plan and
  texel formats do not change; values read from them are converted to half where they are used
  in arithmetic;
* a float32 value computed by arithmetic (``+ - * /``, ``min``/``max``, selects, the math
  functions of :data:`HALF_MATH`) whose operands are all half-safe is computed in float16;
  half-safe: a parameter's value, a half local, a constant float16 represents (zero, or normal
  magnitudes 2^-14 .. 65504), and half-safe arithmetic of them. Integer-to-float casts (indices,
  coordinates) and constants outside that range keep their expression in float32;
* **accumulators stay float32** (``accumulate="float32"``, the default): a buffer a store reads
  back (``acc = acc + x``, ``max(acc, x)``: reductions, the conv and matmul accumulators,
  workgroup reductions) keeps float32, the update adds the half-computed term (``d * w`` as a
  half product) to the float32 sum; and values derived from an accumulator (a mean, a softmax's
  normalisation, a conv's bias/activation epilogue, the locals holding them) stay float32 until
  stored. ``accumulate="float16"`` computes accumulators in half too (but for one whose initial
  value float16 does not represent, such as max-pooling's -3.4e38, and one that is a parameter:
  they stay float32);
* other float32 locals and workgroup arrays that arithmetic reads (the caches of a conv's input
  and weights) become float16 arrays: half the registers. Locals that only stage copies (a layout
  transform's) keep float32: rounding them would gain nothing.

Kernels kept in float32 are untouched. The decisions are recorded on ``main``
(:data:`ARITH_ATTR`: kernel -> ``"float16"`` or the reason it stays float32) and each rewritten
kernel carries :data:`KERNEL_ATTR`. The textures of kernels kept for overflow keep float32 texels
when textures are otherwise half (:func:`float_texel_functions`: the export and the WGSL emitter
read it).
"""

from __future__ import annotations

import fnmatch
import math
import warnings
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np
import tvm
import tvm_ffi
from tvm import relax, s_tir, tirx
from tvm.ir.prim import expr as E
from tvm.tirx import stmt as S

from ...core.provenance import provenance

HALF_MAX = 65504.0  # the largest finite float16
HALF_MIN_NORMAL = 2.0**-14  # the smallest normal float16
ARITH_ATTR = "relax_vk.arithmetic"  # main: kernel (PrimFunc name) -> "float16" | why it stays float32
FLOAT_TEXELS_ATTR = "relax_vk.float_texels"  # main, half texels with float32 arithmetic: kernel -> why its textures keep float32 texels
KERNEL_ATTR = "relax_vk.half_arithmetic"  # a rewritten PrimFunc: the accumulator dtype
ACCUMULATE = ("float32", "float16")

#: math intrinsics computed in half (OpenCL's cl_khr_fp16 overloads, WGSL's f16 builtins)
HALF_MATH = frozenset(
    f"tirx.{n}" for n in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "fabs", "floor", "ceil", "round",
                          "nearbyint", "trunc", "sin", "cos", "erf")  # fmt: skip
)
_BINARY = (E.Add, E.Sub, E.Mul, E.Div, E.Min, E.Max)
_COMPARE = (E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE)
_IF_THEN_ELSE = ("prim.if_then_else", "tirx.if_then_else")
_LOCAL_SCOPES = ("local", "shared", "shared.dyn", "warp")


@dataclass(frozen=True)
class HalfPolicy:
    """Which kernels compute in half and how they accumulate.

    ``fp32_ops``: kernels that stay float32, each entry a name or ``fnmatch`` pattern matched
    against a kernel's model ops (ONNX node names, PyTorch module paths: ``relax-vk bisect`` and
    ``profile`` name them), its kernel name (with or without the ``_kernel`` suffix codegen
    appends) and the Relax variable it writes. ``overflow``: model op -> the largest magnitude a
    calibration run saw (:func:`relax_vk.analysis.fp16_range.overflowing_ops`): those kernels stay
    float32 too. ``accumulate``: the accumulator dtype (module docstring)."""

    accumulate: str = "float32"
    fp32_ops: Tuple[str, ...] = ()
    overflow: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self):
        if self.accumulate not in ACCUMULATE:
            raise ValueError(f"HalfPolicy(accumulate={self.accumulate!r}): expected one of {', '.join(ACCUMULATE)}")

    def keeps(self, names: Iterable[str], ops: Iterable[str]) -> Optional[str]:
        """Why a kernel with these names (kernel, tensor) and model ``ops`` stays float32, or None."""
        names, ops = [n for n in names if n], list(ops)
        for pattern in self.fp32_ops:
            hit = next((n for n in ops + names if fnmatch.fnmatchcase(n, pattern)), None)
            if hit is not None:
                return f"fp32_ops: {pattern!r} names {hit}"
        hot = [(op, self.overflow[op]) for op in ops if op in self.overflow]
        if hot:
            op, peak = max(hot, key=lambda x: x[1])
            return f"overflow: {op} reaches {peak:.3g} (float16 ends at {HALF_MAX:g})"
        return None


# ---------------------------------------------------------------------------------------------
# the TIR rewrite


def _dt(e):
    return e.ty.dtype


def _is_f32(dtype) -> bool:
    return int(dtype.type_code) == 2 and int(dtype.bits) == 32


def _is_f16(dtype) -> bool:
    return int(dtype.type_code) == 2 and int(dtype.bits) == 16


def _like(dtype, element: str) -> str:
    return element if int(dtype.lanes) == 1 else f"{element}x{int(dtype.lanes)}"


def half_represents(value: float) -> bool:
    """Whether float16 holds ``value`` to its 11 significant bits (zero or a normal magnitude)."""
    return value == 0.0 or (math.isfinite(value) and HALF_MIN_NORMAL <= abs(value) <= HALF_MAX)


def _reads(expr) -> List:
    found: List = []

    def visit(x):
        found.append(x.source)
        return x

    tvm_ffi.structural_map(expr, [(tvm.ir.expr.TensorLoad, visit)])
    return found


def _collect(func: tirx.PrimFunc):
    """``(stores, allocated, matched)``: every ``(buffer, value)`` store, the buffers blocks
    allocate, the buffers match_buffer regions view."""
    stores, allocated, matched = [], [], []

    def on_store(s):
        stores.append((s.buffer, s.value))
        return s

    def on_block(b):
        allocated.extend(b.alloc_buffers)
        for m in b.match_buffers:
            matched.extend([m.buffer, m.source.source])
        return b

    tvm_ffi.structural_map(func.body, [(S.BufferStore, on_store), (tvm.s_tir.SBlock, on_block)])
    return stores, allocated, matched


def _in(buf, bufs) -> bool:
    return any(buf.same_as(b) for b in bufs)


class _Rewriter:
    """The expression rewrite of one kernel (module docstring). ``kept``: the float32 locals
    whose values are not half-safe (accumulators and what derives from them)."""

    def __init__(self, kept: Sequence):
        self.kept = list(kept)

    # -- which expressions may compute in half
    def safe(self, e) -> bool:
        if not _is_f32(_dt(e)):
            return _is_f16(_dt(e))
        if isinstance(e, E.FloatImm):
            return half_represents(float(e.value))
        if isinstance(e, tvm.ir.expr.TensorLoad):
            return not _in(e.source, self.kept)
        if isinstance(e, E.Cast):
            return _is_f16(_dt(e.value))  # a half local read in a float32 context; int->float stays float32
        if isinstance(e, _BINARY):
            return self.safe(e.a) and self.safe(e.b)
        if isinstance(e, E.Select):
            return self.safe(e.true_value) and self.safe(e.false_value)
        if isinstance(e, tvm.ir.expr.Call) and isinstance(e.op, tvm.ir.Op):
            name = e.op.name
            if name in _IF_THEN_ELSE:
                return self.safe(e.args[1]) and self.safe(e.args[2])
            if name in HALF_MATH:
                return all(self.safe(a) for a in e.args)
        return False

    @staticmethod
    def computes(e) -> bool:
        """Whether ``e`` does arithmetic (a bare read or constant gains nothing from half)."""
        if isinstance(e, _BINARY):
            return True
        if isinstance(e, tvm.ir.expr.Call) and isinstance(e.op, tvm.ir.Op):
            if e.op.name in HALF_MATH:
                return True
            if e.op.name in _IF_THEN_ELSE:
                return _Rewriter.computes(e.args[1]) or _Rewriter.computes(e.args[2])
        if isinstance(e, E.Select):
            return _Rewriter.computes(e.true_value) or _Rewriter.computes(e.false_value)
        return False

    # -- rewrites
    def half(self, e):
        """``e`` (half-safe) computed in float16."""
        dtype = _dt(e)
        h = _like(dtype, "float16")
        if _is_f16(dtype):
            return e
        if isinstance(e, E.FloatImm):
            return tirx.FloatImm(h, float(e.value))
        if isinstance(e, tvm.ir.expr.TensorLoad):
            return tirx.Cast(h, e)
        if isinstance(e, E.Cast):
            return e.value
        if isinstance(e, _BINARY):
            return type(e)(self.half(e.a), self.half(e.b))
        if isinstance(e, E.Select):
            return tirx.Select(self.any(e.condition), self.half(e.true_value), self.half(e.false_value))
        name = e.op.name
        if name in _IF_THEN_ELSE:
            return tirx.call_intrin(h, name, self.any(e.args[0]), self.half(e.args[1]), self.half(e.args[2]))
        return tirx.call_intrin(h, name, *[self.half(a) for a in e.args])

    def any(self, e):
        """``e`` with its half-safe arithmetic in float16: float16 where ``e`` itself is (its
        caller converts), else ``e``'s dtype."""
        if _is_f32(_dt(e)) and self.safe(e) and self.computes(e):
            return self.half(e)
        return self.rebuild(e)

    def wide(self, e):
        """``any(e)``, converted back to ``e``'s dtype when it came out half."""
        out = self.any(e)
        return tirx.Cast(_dt(e), out) if _is_f16(_dt(out)) and not _is_f16(_dt(e)) else out

    def rebuild(self, e):
        """``e`` in its own dtype, its operands rewritten (float32 arithmetic on float32 values)."""
        if isinstance(e, _BINARY) and _is_f32(_dt(e)):
            return type(e)(self.wide(e.a), self.wide(e.b))
        if isinstance(e, _COMPARE):
            a, b = self.any(e.a), self.any(e.b)
            if _dt(a) != _dt(b):
                a, b = self.wide(e.a), self.wide(e.b)
            return type(e)(a, b)
        if isinstance(e, (E.And, E.Or)):
            return type(e)(self.any(e.a), self.any(e.b))
        if isinstance(e, E.Not):
            return E.Not(self.any(e.a))
        if isinstance(e, E.Select):
            t, f = self.wide(e.true_value), self.wide(e.false_value)
            return tirx.Select(self.any(e.condition), t, f)
        if isinstance(e, tvm.ir.expr.Call) and isinstance(e.op, tvm.ir.Op) and _is_f32(_dt(e)):
            name = e.op.name
            if name in _IF_THEN_ELSE:
                return tirx.call_intrin(str(_dt(e)), name, self.any(e.args[0]), self.wide(e.args[1]), self.wide(e.args[2]))
            if name in HALF_MATH:
                return tirx.call_intrin(str(_dt(e)), name, *[self.wide(a) for a in e.args])
        return e  # leaves, index arithmetic, casts, other calls: as they are

    def store_value(self, buffer, value):
        """The value a store into ``buffer`` (its new dtype) writes."""
        want = buffer.dtype
        if _is_f16(want):
            out = self.half(value) if _is_f32(_dt(value)) and self.safe(value) else self.rebuild(value)
        else:
            out = self.any(value)
        if str(_dt(out)) != str(want) and int(_dt(out).type_code) == 2 and int(tvm.DataType(str(want)).type_code) == 2:
            out = tirx.Cast(str(want), out)
        return out


def to_half_arithmetic(func: tirx.PrimFunc, accumulate: str = "float32") -> tirx.PrimFunc:
    """``func`` (a scheduled kernel) computing in half (module docstring)."""
    if accumulate not in ACCUMULATE:
        raise ValueError(f"accumulate={accumulate!r}: expected one of {', '.join(ACCUMULATE)}")
    stores, allocated, matched = _collect(func)
    reads = [(buf, value, _reads(value)) for buf, value in stores]
    accumulators = [buf for buf, _, read in reads if _in(buf, read)]
    kept: List = []
    for buf, value, _ in reads:
        if not _in(buf, accumulators) or _in(buf, kept):
            continue
        convertible = _in(buf, allocated) and buf.scope() in _LOCAL_SCOPES
        if accumulate == "float32" or not convertible or (isinstance(value, E.FloatImm) and not half_represents(float(value.value))):
            kept.append(buf)
    grew = True
    while grew:  # what derives from a float32 accumulator stays float32
        grew = False
        for buf, _, read in reads:
            if _in(buf, allocated) and not _in(buf, kept) and any(_in(r, kept) for r in read):
                kept.append(buf)
                grew = True
    computed = [r for _, value, read in reads if _Rewriter.computes(value) for r in read]  # (read by arithmetic)
    converted = {}
    for buf in allocated:
        if (_is_f32(tvm.DataType(str(buf.dtype))) and buf.scope() in _LOCAL_SCOPES and not _in(buf, kept) and not _in(buf, matched)
                and _in(buf, computed)):  # fmt: skip
            converted[buf] = buf.with_dtype("float16")

    def swap(v):
        return converted.get(v, v)

    def widen(x):  # a read of a converted local, where a float32 value stood
        if _is_f16(tvm.DataType(str(x.source.dtype))) and _is_f32(_dt(x)):
            return tirx.Cast(_like(_dt(x), "float32"), tirx.BufferLoad(x.source, x.indices))
        return x

    body = tvm_ffi.structural_map(func.body, [(tvm.ir.expr.Var, swap), (tvm.ir.expr.TensorLoad, widen)])
    rewriter = _Rewriter(kept)

    def on_store(s):
        return S.BufferStore(s.buffer, rewriter.store_value(s.buffer, s.value), s.indices)

    body = tvm_ffi.structural_map(body, [(S.BufferStore, on_store)])
    return func.with_body(body).with_attr(KERNEL_ATTR, accumulate)


# ---------------------------------------------------------------------------------------------
# the module pass


def _call_sites(main: relax.Function) -> List[Tuple[str, str, List[str]]]:
    """``(PrimFunc name, written variable, model ops)`` per ``call_tir`` binding of ``main``."""
    ops = provenance(main)
    out, i = [], 0
    for block in main.body.blocks:
        for b in block.bindings:
            value = b.value
            if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.call_tir":
                out.append((value.args[0].name_hint, b.var.name, ops[i] if i < len(ops) else []))
            i += 1
    return out


def input_key(index: int) -> str:
    """The key under which calibration (:func:`relax_vk.analysis.fp16_range.overflowing_ops`)
    reports the model's ``index``-th input as past float16's range."""
    return f"<input {index}>"


def _input_packings(main: relax.Function, overflow: Mapping[str, float]) -> Dict[str, str]:
    """PrimFunc name -> why, for the kernels that read a model input (a ``main`` parameter) the
    calibration inputs take past float16's range (``overflow`` holds :func:`input_key`): the
    input's packing (a layout transform no model op names) would otherwise write it into half
    texels (an input of 1e5: 0.67 off on lavapipe, inf on pocl)."""
    over = {p: overflow[input_key(i)] for i, p in enumerate(main.params) if input_key(i) in overflow}
    out: Dict[str, str] = {}
    for block in main.body.blocks if over else ():
        for b in block.bindings:
            value = b.value
            if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.call_tir":
                args = value.args[1].fields if isinstance(value.args[1], relax.Tuple) else [value.args[1]]
                for a in args:
                    if a in over:
                        out.setdefault(value.args[0].name_hint, f"overflow: input {a.name} reaches {over[a]:.3g} (float16 ends at {HALF_MAX:g})")
    return out


def _large_constants(main: relax.Function) -> Dict[str, float]:
    """PrimFunc name -> the largest magnitude of a constant argument float16 does not hold
    (a static bound: such a weight overflows when read as half)."""
    out: Dict[str, float] = {}
    for block in main.body.blocks:
        for b in block.bindings:
            value = b.value
            if not (isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.call_tir"):
                continue
            args = value.args[1].fields if isinstance(value.args[1], relax.Tuple) else [value.args[1]]
            for a in args:
                data = a.value.numpy() if isinstance(a, tvm.ir.expr.Constant) else None
                if data is not None and data.dtype == np.float32 and data.size:
                    peak = float(np.max(np.abs(data)))
                    if peak > HALF_MAX:
                        name = value.args[0].name_hint
                        out[name] = max(out.get(name, 0.0), peak)
    return out


def float_texel_functions(main: relax.Function) -> Set[str]:
    """The PrimFuncs kept in float32 because their values overflow float16 (calibration or a
    constant weight): the textures they write keep float32 texels under half-texel storage too
    (an rgba16float texel would saturate what the float32 arithmetic kept)."""
    if main.attrs is None:
        return set()
    kept = {str(k) for k, v in main.attrs[ARITH_ATTR].items() if str(v).startswith(("overflow", "constant"))} if ARITH_ATTR in main.attrs else set()
    return kept | ({str(k) for k in main.attrs[FLOAT_TEXELS_ATTR]} if FLOAT_TEXELS_ATTR in main.attrs else set())


def HalfTexelOverflow(overflow: Mapping[str, float]) -> tvm.transform.Pass:
    """Half texels with float32 arithmetic (``ScopeOptions(precision="fp16")`` alone): record on
    ``main`` (:data:`FLOAT_TEXELS_ATTR`) the kernels whose model ops overflow float16 on the
    calibration run (``overflow``, :func:`relax_vk.analysis.fp16_range.overflowing_ops`), so that
    the textures they write keep float32 texels, as under half arithmetic: a squeeze-excite
    block's conv output of 6e5 in a half texel came back infinite (NaN on pocl). Nothing else
    changes."""

    @tvm.transform.module_pass(opt_level=0, name="relax_vk.HalfTexelOverflow")
    def _pass(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        policy = HalfPolicy(overflow=overflow)
        kept: Dict[str, str] = {}
        for name, var, ops in _call_sites(mod["main"]):
            reason = policy.keeps([name, f"{name}_kernel", var], ops)
            if reason is not None:
                kept.setdefault(name, reason)
        for name, reason in _input_packings(mod["main"], overflow).items():
            kept.setdefault(name, reason)
        if not kept:
            return mod
        out = mod.clone()
        out["main"] = out["main"].with_attr(FLOAT_TEXELS_ATTR, kept)
        return out

    return _pass


def _unlowerable(func: tirx.PrimFunc) -> Optional[str]:
    """Why TVM's cross-thread reduction lowering refuses ``func`` (the first line), else None: a
    GroupNorm's reduction over a workgroup's threads, rewritten to float16 partial sums, violated
    its condition #7 and stopped the build."""
    try:
        s_tir.transform.LowerCrossThreadReduction()(tvm.IRModule({"main": func}))
    except Exception as err:  # noqa: BLE001 (TVM raises ValueError or TVMError; any means the same)
        return str(err).splitlines()[0][:160] if str(err) else type(err).__name__
    return None


def HalfArithmetic(policy: HalfPolicy) -> tvm.transform.Pass:
    """The pass (module docstring)."""

    @tvm.transform.module_pass(opt_level=0, name="relax_vk.HalfArithmetic")
    def _pass(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        main = mod["main"]
        why: Dict[str, str] = {}
        for name, peak in _large_constants(main).items():
            why[name] = f"constant: a weight reaches {peak:.3g} (float16 ends at {HALF_MAX:g})"
        for name, var, ops in _call_sites(main):
            reason = policy.keeps([name, f"{name}_kernel", var], ops)
            if reason is not None and name not in why:
                why[name] = reason  # (a kernel two call sites share stays float32 if either asks)
        for name, reason in _input_packings(main, policy.overflow).items():
            why.setdefault(name, reason)
        out = mod.clone()
        decided: Dict[str, str] = {}
        kernels = {name for name, _, _ in _call_sites(main)}
        for gv, func in mod.functions_items():
            if not isinstance(func, tirx.PrimFunc) or gv.name_hint not in kernels:
                continue
            if gv.name_hint in why:
                decided[gv.name_hint] = why[gv.name_hint]
                continue
            half = to_half_arithmetic(func, policy.accumulate)
            refused = _unlowerable(half)
            if refused is not None:  # (a norm's cross-thread reduction whose combiner TVM no longer recognises)
                decided[gv.name_hint] = f"float32: TVM cannot lower its float16 form ({refused})"
                continue
            out[gv] = half
            decided[gv.name_hint] = "float16"
        out["main"] = out["main"].with_attr(ARITH_ATTR, decided)
        for pattern in policy.fp32_ops:  # (a pattern that names nothing keeps nothing float32: say so)
            if not any(why.startswith(f"fp32_ops: {pattern!r}") for why in decided.values()):
                warnings.warn(f"fp32_ops {pattern!r} names no kernel, model op or tensor of this model: nothing is kept in float32 by it "
                              "(relax-vk profile and bisect name the model's ops)", stacklevel=2)  # fmt: skip
        return out

    return _pass
