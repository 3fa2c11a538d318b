"""Structural checks of a scheduled kernel, before any code is generated.

:func:`kernel_problems` lists what would make a scheduled PrimFunc fail in codegen or run wrong:

* a block that no thread binding encloses (it would land in host code: "unknown intrinsic
  tirx.texture2d_store" from LLVM, or a silent CPU loop over device memory);
* a store to a texture buffer that does not write a whole texel: the store must sit in a
  vectorized loop of extent 4 that indexes the texel lanes (TVM's texture lowering writes
  whole texels; anything else fails to lower or writes wrong lanes);
* a texture buffer written and read by the same kernel (image reads do not see the writes of the
  same launch);
* a loop marked for unrolling whose extent is not a constant (TVM's ``UnrollLoop`` fails on it:
  "Cannot unroll non-constant loop");
* a loop outside every thread binding that encloses one (host control flow, which the exported
  program cannot hold: TVM's general-reduction rule builds one for a mean to a 0-d tensor).

An empty list means the kernel is fit for codegen. The scheduling driver
(:mod:`relax_vk.schedules.apply`) uses it to reject a rule's result and fall back.
"""

from __future__ import annotations

from typing import List

from tvm import s_tir, tirx
from tvm.tirx import stmt as S

from ..core.ir_utils import tir_uses_any

LANES = 4


def _is_texture(buffer) -> bool:
    return str(buffer.scope()).startswith("global.texture")


def kernel_problems(func: tirx.PrimFunc) -> List[str]:
    """What is wrong with scheduled ``func`` (empty when nothing is)."""
    problems: List[str] = []
    written, read = set(), set()

    def visit(node, bound: bool, lane_loops: tuple) -> None:
        if isinstance(node, S.For):
            inner_bound = bound or node.kind == S.ForKind.THREAD_BINDING
            lane = lane_loops
            extent = getattr(node.extent, "value", None)
            if node.kind == S.ForKind.VECTORIZED and extent == LANES:
                lane = lane_loops + (node.loop_var,)
            if node.kind == S.ForKind.UNROLLED and extent is None:
                problems.append(f"loop {node.loop_var.name} is marked for unrolling but its extent {node.extent} is not a constant")
            if not bound and node.kind != S.ForKind.THREAD_BINDING and extent != 1 and _binds_threads(node.body):
                problems.append(f"loop {node.loop_var.name} encloses the thread bindings (it would run on the host, launching the kernel per iteration)")
            visit(node.body, inner_bound, lane)
            return
        if isinstance(node, s_tir.SBlockRealize):
            block = node.block
            if block.name_hint != "root" and not bound:
                problems.append(f"block {block.name_hint} is not bound to GPU threads")
            for region in block.reads:
                if _is_texture(region.source):
                    read.add(region.source)
            if block.init is not None:
                visit(block.init, bound, lane_loops)
            visit(block.body, bound, _lane_vars(node, lane_loops))
            return
        if isinstance(node, S.BufferStore) and _is_texture(node.buffer):
            written.add(node.buffer)
            last = node.indices[-1]
            if not lane_loops or not tir_uses_any(last, lane_loops):
                problems.append(f"store to texture {node.buffer.name} does not write whole texels (its lane index is not a vectorized 4-lane loop)")
        for child in _children(node):
            visit(child, bound, lane_loops)

    visit(func.body, False, ())
    both = [b.name for b in written & read]
    if both:
        problems.append(f"texture {', '.join(sorted(both))} is written and read by the same kernel")
    return list(dict.fromkeys(problems))


def _binds_threads(node) -> bool:
    """Whether a thread-bound loop lies somewhere under ``node``."""
    if isinstance(node, S.For) and node.kind == S.ForKind.THREAD_BINDING:
        return True
    if isinstance(node, s_tir.SBlockRealize):
        return _binds_threads(node.block.body)
    return any(_binds_threads(child) for child in _children(node))


def _lane_vars(realize, lane_loops: tuple) -> tuple:
    """Inside a block, the lane loops reach its body through the block's iter vars: the iter vars
    bound to an expression of a lane loop count as lane indices."""
    if not lane_loops:
        return lane_loops
    block = realize.block
    extra = tuple(iv.var for iv, value in zip(block.iter_vars, realize.iter_values) if tir_uses_any(value, lane_loops))
    return lane_loops + extra


def _children(node) -> list:
    if isinstance(node, S.SeqStmt):
        return list(node.seq)
    out = []
    for attr in ("body", "then_case", "else_case", "block"):
        child = getattr(node, attr, None)
        if isinstance(child, S.Stmt):
            out.append(child)
    return out
