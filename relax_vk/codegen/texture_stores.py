"""Repair texture stores that TVM 0.27's ``VectorizeLoop`` scalarised.

``TextureFlatten`` types each ``texture2d_store`` call with its image pointer's type, which is not
a primitive type, so ``VectorizeLoop`` never reaches its texture-store rule: it scalarises the
4-lane loop instead, and every iteration writes a *whole texel* built from one scalar
(``write_imagef(img, p, as_float4(v))`` broadcasts ``v``). OpenCL compiles it and the last lane
wins everywhere: wrong numbers, no error. Every texture-writing kernel of upstream's pipeline is
affected; relax_vk found it by running the kernels on pocl.

This device-side pass (run first among the finalisation passes, on fully lowered kernels)
rewrites each such loop (its body: texture stores and ``Bind``s)::

    for l_s in range(4): texture2d_store(img, x, y, z, bits, value(l_s)); ...

(``x, y, z`` independent of ``l_s``) into::

    <loop-invariant Binds>
    stage = alloc local float32[4]
    for l_s in range(4): <Binds that depend on l_s>; stage[l_s] = value(l_s); ...
    texture2d_store(img, x, y, z, bits, stage[0:4]); ...

which writes each texel once with its four lanes. Texture loads in the loop's values that read
one texel for all four lanes (coordinates independent of ``l_s``, lane ``l_s``: every elementwise
op on textures, every texel gather) are hoisted the same way: the texel is read whole, once,
into a local array before the loop, rather than once per lane (a driver need not merge four
``read_imagef``/``textureLoad`` of one texel), except a load under a select (a concat's branch)
whose coordinates read a buffer: a gather's table index is valid only in its own branch. A store of one scalar with no lane loop left
(a constant fill) stores it broadcast to the four lanes. A texture store left inside any other
loop shape raises an error naming the kernel rather than producing wrong code.
"""

from __future__ import annotations

import tvm
from tvm import tirx
from tvm.ir.expr import Expr as PrimExpr
from tvm.tirx import stmt as S

from tvm_ffi import structural_equal

from ..core.errors import RelaxVKError
from ..core.ir_utils import tir_uses_any

_STORE = "tirx.texture2d_store"
_LOAD = "tirx.texture2d_load"


class TextureStoreError(RelaxVKError, RuntimeError):
    """A texture store the repair cannot prove correct."""


def _is_store(node) -> bool:
    return (
        isinstance(node, S.Evaluate)
        and isinstance(node.value, tvm.ir.expr.Call)
        and getattr(node.value.op, "name", "") == _STORE
    )


def _body_list(body):
    return list(body.seq) if isinstance(body, S.SeqStmt) else [body]


def _is_scalarised_store_loop(loop: S.For) -> bool:
    """A serial loop whose body is texture stores (and ``Bind``s) only: what scalarisation leaves."""
    if loop.kind == S.ForKind.VECTORIZED:
        return False
    stmts = _body_list(loop.body)
    return any(_is_store(x) for x in stmts) and all(_is_store(x) or isinstance(x, S.Bind) for x in stmts)


def _repair_loop(loop: S.For, kernel: str, counter: list):
    lanes = int(loop.extent.value) if hasattr(loop.extent, "value") else -1
    if lanes != 4:
        raise TextureStoreError(f"kernel {kernel}: texture stores in a {lanes}-iteration scalarised loop")
    dependent = [loop.loop_var]  # the loop var and every Bind computed from it
    hoisted, inner, stages, stores = [], [], [], []
    texel_loads: list = []  # (texture load of a whole texel, the local array it is read into)
    for x in _body_list(loop.body):
        if isinstance(x, S.Bind):
            if tir_uses_any(x.value, dependent):
                dependent.append(x.var)
                inner.append(x)
            else:
                hoisted.append(x)  # loop-invariant: defined once, before the loop
            continue
        args = list(x.value.args)
        if any(tir_uses_any(a, dependent) for a in args[1:4]):
            raise TextureStoreError(f"kernel {kernel}: a scalarised texture store changes its texel coordinate per lane")
        value = _hoist_texel_loads(args[-1], loop.loop_var, dependent, texel_loads)
        stage = tirx.decl_buffer((4,), str(value.ty.dtype), f"texel_stage{counter[0]}", scope="local")
        counter[0] += 1
        stages.append(stage)
        inner.append(S.BufferStore(stage, value, [loop.loop_var]))
        vector = tirx.BufferLoad(stage, [tirx.Ramp(tirx.IntImm("int32", 0), tirx.IntImm("int32", 1), 4)])
        stores.append(S.Evaluate(tirx.call_intrin("handle", _STORE, *args[:-1], vector)))
    fill = S.For(loop.loop_var, loop.min, loop.extent, S.ForKind.SERIAL, S.SeqStmt(inner) if len(inner) > 1 else inner[0])
    reads = [S.BufferStore(buf, load, [_LANES]) for load, buf in texel_loads]
    allocs = [S.AllocBuffer(buf) for _, buf in texel_loads] + [S.AllocBuffer(stage) for stage in stages]
    return hoisted + allocs + reads + [fill] + stores


_LANES = tirx.Ramp(tirx.IntImm("int32", 0), tirx.IntImm("int32", 1), 4)


def _hoist_texel_loads(expr, lane, dependent, found: list):
    """``expr`` with every texture load of lane ``lane`` at coordinates independent of
    ``dependent`` replaced by a read of a local 4-lane array (appended to ``found`` with the
    whole-texel load that fills it); unchanged where it holds an expression kind not rebuilt here."""
    try:
        return _rebuild(expr, lane, dependent, found)
    except _Unknown:
        return expr


class _Unknown(Exception):
    pass


def _reads_memory(expr) -> bool:
    """Whether ``expr`` loads from a buffer (an index that may be out of bounds off its branch)."""
    if isinstance(expr, tvm.ir.expr.TensorLoad):
        return True
    children = [getattr(expr, f, None) for f in ("a", "b", "value", "condition", "true_value", "false_value")]
    children += list(getattr(expr, "args", None) or [])
    return any(isinstance(c, PrimExpr) and _reads_memory(c) for c in children)


def _rebuild(e, lane, dependent, found, guarded=False):
    """(``guarded``: ``e`` is evaluated only under a condition, a branch of a select: a load whose
    coordinates read a buffer, e.g. a gather's table at an index valid only in that branch, stays
    where it is, since hoisted it would run for every thread)"""
    E = tvm.ir.prim.expr
    if isinstance(e, tvm.ir.expr.Call):
        if getattr(e.op, "name", "") == _LOAD and len(e.args) == 6 and e.args[5].same_as(lane) and str(e.ty.dtype) in ("float32", "float16"):
            hoistable = not (guarded and any(_reads_memory(a) for a in e.args[2:5]))
            if hoistable and not any(tir_uses_any(a, dependent) for a in e.args[2:5]):  # (x, y, layer)
                for load, buf in found:
                    if all(structural_equal(p, q) for p, q in zip(load.args[:5], e.args[:5])):
                        return tirx.BufferLoad(buf, [lane])
                whole = tvm.ir.expr.Call(e.op, list(e.args[:5]) + [_LANES], ret_ty=f"{e.ty.dtype}x4")
                buf = tirx.decl_buffer((4,), str(e.ty.dtype), f"texel_in{len(found)}", scope="local")
                found.append((whole, buf))
                return tirx.BufferLoad(buf, [lane])
        branches = getattr(e.op, "name", "") in ("tirx.if_then_else", "prim.if_then_else")
        args = [_rebuild(a, lane, dependent, found, guarded or (branches and i > 0)) for i, a in enumerate(e.args)]
        return tvm.ir.expr.Call(e.op, args, e.attrs, ret_ty=e.ty)
    if isinstance(e, (tirx.IntImm, tirx.FloatImm, tirx.Var, tvm.ir.expr.StringImm)):
        return e
    if isinstance(e, tvm.ir.expr.TensorLoad):  # (what tirx.BufferLoad builds)
        return tirx.BufferLoad(e.source, [_rebuild(i, lane, dependent, found, guarded) for i in e.indices])
    if isinstance(e, E.Not):
        return E.Not(_rebuild(e.a, lane, dependent, found, guarded))
    if isinstance(e, (E.BinaryOpExpr, E.CmpExpr, E.LogicalExpr)):
        return type(e)(_rebuild(e.a, lane, dependent, found, guarded), _rebuild(e.b, lane, dependent, found, guarded))
    if isinstance(e, E.Cast):
        return E.Cast(e.ty.dtype, _rebuild(e.value, lane, dependent, found, guarded))
    if isinstance(e, E.Select):
        condition = _rebuild(e.condition, lane, dependent, found, guarded)
        return E.Select(condition, *(_rebuild(x, lane, dependent, found, True) for x in (e.true_value, e.false_value)))
    raise _Unknown(type(e).__name__)


def _rewrite(node, kernel: str, counter: list):
    """``node`` with repaired stores (a Stmt, or a list of Stmts to splice into a sequence)."""
    if isinstance(node, S.SeqStmt):
        out, changed = [], False
        for s in node.seq:
            new = _rewrite(s, kernel, counter)
            if isinstance(new, list):
                out.extend(new)
                changed = True
            else:
                out.append(new)
                changed = changed or not new.same_as(s)
        return S.SeqStmt(out) if changed else node
    if isinstance(node, S.For):
        if _is_scalarised_store_loop(node):
            return _repair_loop(node, kernel, counter)
        body = _as_stmt(_rewrite(node.body, kernel, counter))
        if body.same_as(node.body):
            return node
        return S.For(node.loop_var, node.min, node.extent, node.kind, body, node.thread_binding, node.annotations)
    if isinstance(node, S.AttrStmt):
        body = _as_stmt(_rewrite(node.body, kernel, counter))
        return node if body.same_as(node.body) else S.AttrStmt(node.node, node.attr_key, node.value, body)
    if isinstance(node, S.IfThenElse):
        then_case = _as_stmt(_rewrite(node.then_case, kernel, counter))
        else_case = _as_stmt(_rewrite(node.else_case, kernel, counter)) if node.else_case is not None else None
        if then_case.same_as(node.then_case) and (else_case is None or else_case.same_as(node.else_case)):
            return node
        return S.IfThenElse(node.condition, then_case, else_case)
    if _is_store(node) and node.value.args[-1].ty.dtype.lanes == 1:
        # a texel of one value (a constant fill, whose lane loop the simplifier removed): broadcast
        # it to the four lanes (OpenCL has no ``as_float4`` of a scalar)
        args = list(node.value.args)
        return S.Evaluate(tirx.call_intrin("handle", _STORE, *args[:-1], tirx.Broadcast(args[-1], 4)))
    return node


def _as_stmt(new):
    return S.SeqStmt(new) if isinstance(new, list) else new


def repair_texture_stores(func: tirx.PrimFunc, name: str) -> tirx.PrimFunc:
    body = _as_stmt(_rewrite(func.body, name, [0]))
    return func if body.same_as(func.body) else func.with_body(body)


def RepairTextureStores() -> tvm.transform.Pass:
    """Apply :func:`repair_texture_stores` to every device kernel."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        out = mod.clone()
        for gvar, func in mod.functions_items():
            if isinstance(func, tirx.PrimFunc):
                fixed = repair_texture_stores(func, gvar.name_hint)
                if not fixed.same_as(func):
                    out[gvar] = fixed
        return out

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.RepairTextureStores")
