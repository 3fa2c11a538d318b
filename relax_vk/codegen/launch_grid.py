"""FoldLaunchGrid: no grid dimension longer than the target's workgroup limit.

Vulkan guarantees only 65,535 workgroups per grid dimension (``maxComputeWorkGroupCount``), and a
schedule may bind a longer loop to ``blockIdx.x`` (a matmul over a 6,625-class vocabulary, an
average pool over a large map). This pass runs on lowered kernels, just before TVM splits host from
device code, where each thread binding is an ``AttrStmt(thread_extent)``. A binding of ``N``
groups to an axis, with ``N`` over the limit ``M``, becomes two bindings on that axis and on a grid
axis the kernel does not use::

    blockIdx.y: ceil(N / M) groups
      blockIdx.x: M groups
        blockIdx_x_old = blockIdx.y * M + blockIdx.x
        if blockIdx_x_old < N: <body, unchanged>

The guard is uniform across a workgroup (it reads only group ids), so kernels with barriers stay
correct. A kernel with every grid axis in use and one over the limit raises
:class:`~relax_vk.core.errors.LimitError` naming it.
"""

from __future__ import annotations

import tvm
from tvm import tirx
from tvm.tirx import stmt as S

from ..core.errors import LimitError

AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z")


def _block_axes(stmt) -> set:
    """The blockIdx axes bound anywhere in ``stmt``."""
    found = set()

    def visit(node):
        if isinstance(node, S.AttrStmt):
            if node.attr_key == "thread_extent" and str(node.node.thread_tag).startswith("blockIdx"):
                found.add(str(node.node.thread_tag))
            visit(node.body)
            return
        for child in _children(node):
            visit(child)

    visit(stmt)
    return found


def _children(node) -> list:
    if isinstance(node, S.SeqStmt):
        return list(node.seq)
    out = []
    for attr in ("body", "then_case", "else_case"):
        child = getattr(node, attr, None)
        if isinstance(child, S.Stmt):
            out.append(child)
    return out


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


def _fold(node, limit: int, name: str):
    """``node`` with its over-long grid bindings folded (the node itself when nothing changes)."""
    if isinstance(node, S.AttrStmt) and node.attr_key == "thread_extent":
        tag = str(node.node.thread_tag)
        extent = getattr(node.value, "value", None)
        if tag in AXES and extent is not None and int(extent) > limit:
            free = [a for a in AXES if a not in _block_axes(node)]
            if not free:
                raise LimitError(f"kernel {name}: {int(extent)} workgroups along {tag} exceed the limit {limit}, and every grid axis is in use")
            old = node.node.var
            dtype = str(old.ty.dtype) if hasattr(old, "ty") else "int32"
            outer_n = -(-int(extent) // limit)
            outer = tirx.IterVar(tvm.ir.Range(0, outer_n), tirx.Var(f"{free[0].replace('.', '_')}_fold", dtype), 1, free[0])
            inner = tirx.IterVar(tvm.ir.Range(0, limit), tirx.Var(f"{tag.replace('.', '_')}_fold", dtype), 1, tag)
            index = outer.var * tirx.const(limit, dtype) + inner.var
            shared, rest = _pull_shared(node.body)  # OpenCL: __local declarations stay at kernel scope
            guarded = S.IfThenElse(old < tirx.const(int(extent), dtype), rest, None)
            body = S.SeqStmt([*shared, S.Bind(old, index), guarded])
            return S.AttrStmt(outer, "thread_extent", tirx.const(outer_n, "int32"), S.AttrStmt(inner, "thread_extent", tirx.const(limit, "int32"), body))
        body = _fold(node.body, limit, name)
        return node if body.same_as(node.body) else S.AttrStmt(node.node, node.attr_key, node.value, body)
    if isinstance(node, S.SeqStmt):
        seq = [_fold(s, limit, name) for s in node.seq]
        return node if all(a.same_as(b) for a, b in zip(seq, node.seq)) else S.SeqStmt(seq)
    if isinstance(node, S.For):
        body = _fold(node.body, limit, name)
        return node if body.same_as(node.body) else S.For(node.loop_var, node.min, node.extent, node.kind, body, node.thread_binding, node.annotations)
    if isinstance(node, S.IfThenElse):
        then_case = _fold(node.then_case, limit, name)
        else_case = _fold(node.else_case, limit, name) if node.else_case is not None else None
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
        body = _fold(func.body, bound, name)
        return func if body.same_as(func.body) else func.with_body(body)

    return tvm.tirx.transform.prim_func_pass(transform, opt_level=0, name="relax_vk.FoldLaunchGrid")
