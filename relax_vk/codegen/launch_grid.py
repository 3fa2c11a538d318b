"""FoldLaunchGrid: no grid dimension longer than the target's workgroup limit.

Vulkan guarantees only 65,535 workgroups per grid dimension (``maxComputeWorkGroupCount``), and a
schedule may bind a longer loop to a ``blockIdx`` axis (a matmul over a 6,625-class vocabulary, an
average pool over a large map); a cut-down target limit (``max_workgroups``) makes every kernel
fold. This pass runs on lowered kernels, just before TVM splits host from device code, where each
thread binding is an ``AttrStmt(thread_extent)``. When a launch binds an axis to more groups than
the limit ``M``, its grid ``(X, Y, Z)`` is linearised and redistributed over new ``blockIdx``
bindings of at most ``M`` each::

    blockIdx.x: X' groups, blockIdx.y: Y' groups, blockIdx.z: Z' groups   (X' Y' Z' >= X Y Z)
      <the launch's threadIdx bindings, unchanged>
        l = (z' * Y' + y') * X' + x'
        b = min(l, X * Y * Z - 1)
        x, y, z = b % X, b / X % Y, b / (X * Y)
        <body, each run of its barrier-free statements under one "if l < X * Y * Z">

A workgroup past the grid's end skips every statement but its barriers (and the bindings and
declarations the others read), its block index clamped to the last block so that whatever it does
run stays in bounds: no barrier sits under a condition (the guard used to wrap the whole body:
uniform, as OpenCL allows, but pocl then ran no workgroup's cross-thread reduction of a folded
grid, and a LayerNorm's matmul came out as the zeros its output held).
Shared-memory declarations stay at kernel scope (OpenCL requires it). Only a grid of
more than ``M**3`` groups raises :class:`~relax_vk.core.errors.LimitError`, naming the kernel. A
grid whose size depends on run-time dims is folded the same way with its extents as expressions
(``X' = min(X Y Z, M)``, ...): the runtime computes them per run and refuses a grid past ``M``;
unless the kernel carries its dims' ranges (:data:`~relax_vk.core.dims.KERNEL_RANGES_ATTR`, ``{name: (min, max)}``, which the
compiler copies from ``main``) and the grid stays within ``M`` over all of them: it is then left
as it is (the fold's index arithmetic sits in every thread's indices, the inner loops' included).
"""

from __future__ import annotations

import tvm
from tvm import tirx
from tvm.sym import Analyzer
from tvm.tirx import stmt as S

from ..core.dims import kernel_ranges, largest_value
from ..core.errors import LimitError
from .run_time_shapes import substitute

AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z")


def _is_shared_decl(node) -> bool:
    if not isinstance(node, (S.AllocBuffer, S.DeclBuffer)):
        return False
    return str(node.buffer.scope()).startswith("shared")


def _pull_shared(node):
    """``(shared-memory declarations, node without them)``: declarations reachable through
    sequences and attributes (the kernel's outermost scope) are lifted out."""
    if isinstance(node, S.AttrStmt):
        found, body = _pull_shared(node.body)
        return (found, S.AttrStmt(node.node, node.attr_key, node.value, body)) if found else ([], node)
    if isinstance(node, S.SeqStmt):
        found, rest = [], []
        for s in node.seq:
            if _is_shared_decl(s):
                found.append(s)
                continue
            pulled, s2 = _pull_shared(s)
            found += pulled
            rest.append(s2)
        if not found:
            return [], node
        return found, (S.SeqStmt(rest) if len(rest) != 1 else rest[0]) if rest else S.Evaluate(0)
    return [], node


def _launch_stmts(node):
    """Every statement of one launch (the subtree below its outermost binding) in program order,
    through attributes, sequences, loops and both branches of conditions."""
    yield node
    if isinstance(node, S.SeqStmt):
        for c in node.seq:
            yield from _launch_stmts(c)
    elif isinstance(node, (S.AttrStmt, S.For)):
        yield from _launch_stmts(node.body)
    elif isinstance(node, S.IfThenElse):
        yield from _launch_stmts(node.then_case)
        if node.else_case is not None:
            yield from _launch_stmts(node.else_case)


def _is_block_attr(node) -> bool:
    return isinstance(node, S.AttrStmt) and node.attr_key == "thread_extent" and str(node.node.thread_tag) in AXES


def _block_attrs(node) -> list:
    """Every blockIdx binding of one launch."""
    return [n for n in _launch_stmts(node) if _is_block_attr(n)]


def _inner_lets(node, lets=None) -> dict:
    """The values of the variables bound inside one launch, in terms of what is bound before it
    (``lets``) and the kernel's parameters: TVM's common-subexpression pass may name a nested
    ``blockIdx`` binding's extent (``cse_v19 = (H - 1) // 2 + 1``) below the outermost binding,
    and folding hoists that extent above it. A value this pass cannot read is left out."""
    found = dict(lets or {})
    inner = {}
    for n in _launch_stmts(node):
        if isinstance(n, S.Bind):
            try:
                inner[n.var] = found[n.var] = substitute(n.value, found)
            except Exception:  # (not a size expression: a grid extent never reads it)
                pass
    return inner


def _strip_block_attrs(node):
    """``node`` with every blockIdx binding replaced by its body (the ids are rebound above)."""
    if isinstance(node, S.AttrStmt):
        body = _strip_block_attrs(node.body)
        if _is_block_attr(node):
            return body
        return node if body.same_as(node.body) else S.AttrStmt(node.node, node.attr_key, node.value, body)
    if isinstance(node, S.SeqStmt):
        seq = [_strip_block_attrs(c) for c in node.seq]
        return node if all(a.same_as(b) for a, b in zip(seq, node.seq)) else S.SeqStmt(seq)
    if isinstance(node, S.For):
        body = _strip_block_attrs(node.body)
        return node if body.same_as(node.body) else S.For(node.loop_var, node.min, node.extent, node.kind, body, node.thread_binding, node.annotations)
    if isinstance(node, S.IfThenElse):
        then_case = _strip_block_attrs(node.then_case)
        else_case = _strip_block_attrs(node.else_case) if node.else_case is not None else None
        return S.IfThenElse(node.condition, then_case, else_case)
    return node


def _extent(attr) -> int:
    return int(attr.value.value) if isinstance(attr.value, tirx.IntImm) else -1


def _refold(launch, limit: int, name: str):
    """``launch`` (a kernel's outermost blockIdx binding) with its grid redistributed. A grid whose
    extents depend on run-time dims gets the same redistribution with its extents as expressions
    the runtime computes per run (a grid within the limit keeps its count: ``X' = min(X Y Z, M)``,
    ``Y' = min(ceil(X Y Z / X'), M)``, ``Z' = ceil(X Y Z / (X' Y'))``; more than ``M`` along z is
    then refused by the runtime)."""
    attrs = _block_attrs(launch)
    tags = [str(a.node.thread_tag) for a in attrs]
    if len(set(tags)) != len(tags):
        raise LimitError(f"kernel {name}: a grid over the workgroup limit {limit} with repeated bindings cannot be folded")
    blocks = dict(zip(tags, attrs))
    dtype = "int32"
    inner = _inner_lets(launch)  # (in terms of the variables bound above the launch, which stay)

    def extent(axis):  # an int, or an int32 expression of the kernel's size parameters
        if axis not in blocks:
            return 1
        if _extent(blocks[axis]) >= 0:
            return _extent(blocks[axis])
        value = blocks[axis].value
        if inner and any(v in inner for v in tirx.analysis.undefined_vars(value)):
            try:  # (the new bindings sit above the launch: no variable bound inside it)
                value = substitute(value, inner)
            except Exception:
                raise LimitError(f"kernel {name}: the grid's {axis} extent {value} is bound inside the launch and cannot be folded") from None
        return value if str(value.ty.dtype) == dtype else tirx.Cast(dtype, value)

    def ceil_div(a, b):
        return -(-a // b) if isinstance(a, int) and isinstance(b, int) else tirx.floordiv(a + b - 1, b)

    def at_most(a, b):
        return min(a, b) if isinstance(a, int) else tirx.min(a, tirx.const(b, dtype))

    def expr(n):
        return tirx.const(n, dtype) if isinstance(n, int) else n

    dims = [extent(a) for a in AXES]
    total = dims[0] * dims[1] * dims[2]
    new_dims = [at_most(total, limit)]
    new_dims.append(at_most(ceil_div(total, new_dims[0]), limit))
    new_dims.append(ceil_div(total, new_dims[0] * new_dims[1]))
    if isinstance(new_dims[2], int) and new_dims[2] > limit:
        raise LimitError(f"kernel {name}: a grid of {total} workgroups does not fit {limit}**3 (the workgroup limit per dimension)")
    # an axis of one workgroup (known at compile time) is left unbound, but for x
    bound = [k == 0 or not isinstance(n, int) or n > 1 for k, n in enumerate(new_dims)]
    ids = [tirx.IterVar(tvm.ir.Range(0, n), tirx.Var(f"{axis.replace('.', '_')}_fold", dtype), 1, axis) for axis, n in zip(AXES, new_dims)]
    used = [iv.var if b else tirx.const(0, dtype) for iv, b in zip(ids, bound)]
    linear = (used[2] * expr(new_dims[1]) + used[1]) * expr(new_dims[0]) + used[0]
    index = tirx.Var("block_linear", dtype)
    block = tirx.Var("block_index", dtype)  # (past the end: the last block's, only its barriers run)
    binds = [S.Bind(index, linear), S.Bind(block, tirx.min(index, expr(total) - 1))]
    stride = 1
    for axis, n in zip(AXES, dims):
        if axis in blocks:
            old = blocks[axis].node.var
            value = tirx.floordiv(block, expr(stride)) if not (isinstance(stride, int) and stride == 1) else block
            rebound = tirx.floormod(value, expr(n))
            old_dtype = str(old.ty.dtype)
            binds.append(S.Bind(old, rebound if old_dtype == dtype else tirx.Cast(old_dtype, rebound)))
        stride = stride * n
    shared, rest = _pull_shared(_strip_block_attrs(launch))
    body = S.SeqStmt([*shared, *binds, _guard_work(rest, index < expr(total))])
    for iv, n, b in reversed(list(zip(ids, new_dims, bound))):
        if b:
            body = S.AttrStmt(iv, "thread_extent", expr(n) if not isinstance(n, int) else tirx.const(n, "int32"), body)
    return body


#: what every thread of a workgroup must reach together: barriers, cross-thread reductions
_SYNCS = ("tirx.tvm_storage_sync", "tirx.tvm_thread_allreduce")


def _call_name(node):
    if isinstance(node, S.Evaluate) and isinstance(node.value, tvm.ir.Call) and isinstance(node.value.op, tvm.ir.Op):
        return str(node.value.op.name)
    return None


def _has(node, leaf) -> bool:
    """Whether a statement of ``node`` satisfies ``leaf``."""
    if leaf(node):
        return True
    if isinstance(node, S.SeqStmt):
        return any(_has(c, leaf) for c in node.seq)
    if isinstance(node, (S.AttrStmt, S.For, S.While)):
        return _has(node.body, leaf)
    if isinstance(node, S.IfThenElse):
        return _has(node.then_case, leaf) or (node.else_case is not None and _has(node.else_case, leaf))
    return False


def _has_sync(node) -> bool:
    """Whether ``node`` holds a statement every thread of the workgroup must reach (:data:`_SYNCS`)."""
    return _has(node, lambda n: _call_name(n) in _SYNCS)


def _guard_work(node, cond):
    """``node`` run only where ``cond`` holds, but for its barriers: each largest run of statements
    without a barrier is guarded whole (an image store's loop over the texel's lanes stays one loop,
    as codegen.texture_stores reads it; :func:`_guard_run`), and declarations (bindings, buffers)
    that statements after the run read stay unguarded. A statement with a barrier runs everywhere,
    its parts guarded the same way: what it computes for a workgroup past the end is never stored."""
    if isinstance(node, (S.Bind, S.AllocBuffer, S.DeclBuffer)):
        return node
    if not _has_sync(node):
        return _guarded(node, cond)
    if isinstance(node, S.SeqStmt):
        out, run = [], []
        for k, child in enumerate(node.seq):
            if _has_sync(child):
                out += _guard_run(run, node.seq[k:], cond)
                out.append(_guard_work(child, cond))
                run = []
            else:
                run.append(child)
        out += _guard_run(run, [], cond)
        return S.SeqStmt(out) if len(out) != 1 else out[0]
    if isinstance(node, S.AttrStmt):
        return S.AttrStmt(node.node, node.attr_key, node.value, _guard_work(node.body, cond))
    if isinstance(node, S.For):
        return S.For(node.loop_var, node.min, node.extent, node.kind, _guard_work(node.body, cond), node.thread_binding, node.annotations, node.step)
    if isinstance(node, S.While):
        return S.While(node.condition, _guard_work(node.body, cond))
    if isinstance(node, S.IfThenElse):
        else_case = _guard_work(node.else_case, cond) if node.else_case is not None else None
        return S.IfThenElse(node.condition, _guard_work(node.then_case, cond), else_case)
    return node


def _guarded(node, cond):
    """``node`` under ``if cond``, when it does any work (a store or a call)."""
    return S.IfThenElse(cond, node, None) if _has(node, _does_work) else node


def _declared(node):
    """The variable a declaration defines (None for any other statement)."""
    if isinstance(node, S.Bind):
        return node.var
    if isinstance(node, (S.AllocBuffer, S.DeclBuffer)):
        return node.buffer.data
    return None


def _guard_run(run, later, cond) -> list:
    """Consecutive barrier-free statements ``run`` under as few guards as can be: one, but for the
    declarations that the statements ``later`` than the run read, which stay outside it (an unrolled
    loop under one guard is one block whose loads issue together; a guard per statement took a
    GEMV's loads apart)."""
    if not run:
        return []
    declared = [d for d in (_declared(s) for s in run) if d is not None]
    read = set()
    if declared and later:
        names = tirx.analysis.undefined_vars(S.SeqStmt(list(later)) if len(later) > 1 else later[0])
        read = {d for d in declared if any(v.same_as(d) for v in names)}
    out, group = [], []

    def close():
        if group:
            out.append(_guarded(S.SeqStmt(list(group)) if len(group) > 1 else group[0], cond))
            group.clear()

    for stmt in run:
        d = _declared(stmt)
        if d is not None and any(d.same_as(r) for r in read):
            close()
            out.append(stmt)
        else:
            group.append(stmt)
    close()
    return out


def _does_work(node) -> bool:
    return isinstance(node, (S.BufferStore, S.Evaluate))


def _over(attr, limit: int, ranges, lets=None) -> bool:
    """Whether a grid binding may exceed ``limit`` (a run-time extent: at its dims' largest, the
    values ``lets`` binds substituted: TVM's common-subexpression pass names a grid's size
    ``cse_v5 = ((H - 5) // 2 + 1) * ((W - 5) // 2 + 1)`` before this pass runs)."""
    if _extent(attr) >= 0:
        return _extent(attr) > limit
    value = attr.value
    if Analyzer().const_int_bound(value).max_value <= limit:  # (bounded whatever the dims: min(P, 18))
        return False
    if lets:
        try:
            value = substitute(value, lets)
        except Exception:  # (a binding this pass cannot read: the grid counts as unbounded)
            return True
    top = largest_value(value, ranges) if ranges else None
    return top is None or top > limit


def _fold(node, limit: int, name: str, ranges=None, lets=None):
    """``node`` with its over-long grids folded (the node itself when nothing changes); ``lets``:
    the values of the variables bound before ``node``."""
    if _is_block_attr(node):
        # (a grid of run-time size that may exceed the limit at some size: folded too)
        inner = {**(lets or {}), **_inner_lets(node, lets)}
        if any(_over(a, limit, ranges, inner) for a in _block_attrs(node)):
            return _refold(node, limit, name)
        return node  # one launch, within the limit
    if isinstance(node, S.AttrStmt):
        body = _fold(node.body, limit, name, ranges, lets)
        return node if body.same_as(node.body) else S.AttrStmt(node.node, node.attr_key, node.value, body)
    if isinstance(node, S.SeqStmt):
        seq, lets = [], dict(lets or {})
        for stmt in node.seq:
            seq.append(_fold(stmt, limit, name, ranges, lets))
            if isinstance(stmt, S.Bind):
                try:  # (in terms of the dims: the earlier bindings substituted)
                    lets[stmt.var] = substitute(stmt.value, lets)
                except Exception:  # (a value this pass cannot read: left as the variable, unbounded)
                    pass
        return node if all(a.same_as(b) for a, b in zip(seq, node.seq)) else S.SeqStmt(seq)
    if isinstance(node, S.For):
        body = _fold(node.body, limit, name, ranges, lets)
        return node if body.same_as(node.body) else S.For(node.loop_var, node.min, node.extent, node.kind, body, node.thread_binding, node.annotations)
    if isinstance(node, S.IfThenElse):
        then_case = _fold(node.then_case, limit, name, ranges, lets)
        else_case = _fold(node.else_case, limit, name, ranges, lets) if node.else_case is not None else None
        if then_case.same_as(node.then_case) and (else_case is None or else_case.same_as(node.else_case)):
            return node
        return S.IfThenElse(node.condition, then_case, else_case)
    return node


def FoldLaunchGrid(limit: "int | None" = None) -> tvm.transform.Pass:
    """Fold every grid binding longer than ``limit`` (default: each kernel's target's
    :func:`~relax_vk.core.target.workgroup_limit`; see the module docstring)."""
    from ..core.target import workgroup_limit

    def transform(func: tirx.PrimFunc, mod: tvm.IRModule, _ctx) -> tirx.PrimFunc:
        attrs = func.attrs if func.attrs is not None else {}
        name = str(attrs["global_symbol"]) if "global_symbol" in attrs else "kernel"
        bound = limit
        if bound is None:
            target = attrs["target"] if "target" in attrs else tvm.target.Target.current(allow_none=True)
            bound = workgroup_limit(target) if target is not None else None
        if bound is None:
            return func
        ranges = kernel_ranges(func)
        body = _fold(func.body, bound, name, ranges)
        return func if body.same_as(func.body) else func.with_body(body)

    return tvm.tirx.transform.prim_func_pass(transform, opt_level=0, name="relax_vk.FoldLaunchGrid")
