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
  program cannot hold: TVM's general-reduction rule builds one for a mean to a 0-d tensor);
* a reduction accumulating into global memory while some of the workgroup's threads do not index
  what it writes (a ``threadIdx`` axis no enclosing loop binds, or one none of its iter values
  use): every such thread adds into the same elements at once, a race a CPU driver that runs a
  workgroup's threads one after another never shows (pocl), but a GPU does.
* a workgroup or thread buffer (``shared``, ``local``) whose size is still a run-time value once
  TVM has compacted it to the region the kernel touches (a kernel of run-time size whose staged
  region depends on the dims: TVM's OpenCL codegen stops at "Can only handle constant size stack
  allocation"). At schedule time a staged buffer's shape is the whole tensor's, so it is checked
  after :data:`COMPACTING`, the lowering passes that size it.

An empty list means the kernel is fit for codegen. The scheduling driver
(:mod:`relax_vk.schedules.apply`) uses it to reject a rule's result and fall back.
"""

from __future__ import annotations

from typing import List, Optional

import tvm
from tvm import s_tir, tirx
from tvm.tirx import stmt as S

from ..core.ir_utils import run_time_size, tir_uses_any

LANES = 4


def _is_texture(buffer) -> bool:
    return str(buffer.scope()).startswith("global.texture")


def kernel_problems(func: tirx.PrimFunc) -> List[str]:
    """What is wrong with scheduled ``func`` (empty when nothing is)."""
    problems: List[str] = []
    written, read = set(), set()

    threads: list = []  # the (tag, var) of the thread-bound loops (extent > 1) enclosing the node being visited
    lanes = _thread_axes(func.body)  # the workgroup's axes of more than one thread

    def visit(node, bound: bool, lane_loops: tuple) -> None:
        tag = _wide_thread_tag(node)
        if tag is not None:
            threads.append((tag, node.loop_var))
            try:
                _visit(node, bound, lane_loops)
            finally:
                threads.pop()
            return
        _visit(node, bound, lane_loops)

    def _visit(node, bound: bool, lane_loops: tuple) -> None:
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
            reduces = any(iv.iter_type == tirx.IterVar.CommReduce for iv in block.iter_vars)
            if reduces and bound and any(str(w.source.scope()) in ("global", "") for w in block.writes):
                # a thread axis no enclosing loop binds runs the block in every one of its threads
                idle = sorted(lanes - {tag for tag, _ in threads})
                idle += [tag for tag, var in threads if tag.startswith("threadIdx") and not any(tir_uses_any(v, (var,)) for v in node.iter_values)]
                if idle:
                    problems.append(f"block {block.name_hint} accumulates into global memory from threads that do not index what it writes "
                                    f"({', '.join(idle)}): a race")
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
    problems += _run_time_scratch(func)
    return list(dict.fromkeys(problems))


#: the lowering passes, in order, that size each staged buffer to the region its kernel touches:
#: the start of relax_vk's TIR pipeline (:mod:`relax_vk.codegen.tir_pipeline`, after the texture
#: flattening), which runs these
COMPACTING = (
    s_tir.transform.CanonicalizeLoop,
    s_tir.transform.LowerCrossThreadReduction,
    s_tir.transform.LowerInitBlock,
    s_tir.transform.PlanAndUpdateBufferAllocationLocation,
    s_tir.transform.ConvertBlocksToOpaque,
    s_tir.transform.LiftThreadBinding,
    s_tir.transform.ManifestSharedMemoryLocalStage,
    s_tir.transform.CompactBufferAllocation,
)


def compacted(func: tirx.PrimFunc) -> Optional[tirx.PrimFunc]:
    """``func`` through :data:`COMPACTING`, or None where TVM's lowering refuses it (a region it
    cannot bound)."""
    try:
        return tvm.transform.Sequential([make() for make in COMPACTING])(tvm.IRModule({"main": func}))["main"]
    except tvm.error.InternalError:
        return None


def _run_time_scratch(func: tirx.PrimFunc) -> List[str]:
    """The workgroup and thread buffers of ``func`` whose compacted size is not a constant (none
    for a kernel of static shape, which is not lowered here)."""
    if not run_time_size(func):
        return []
    try:
        lowered = compacted(func)
    except Exception:  # (a kernel these passes cannot take fails them again in the build, with TVM's message)
        return []
    if lowered is None:
        return []
    found: List[str] = []

    def visit(node) -> None:
        if isinstance(node, s_tir.SBlock):
            for buf in node.alloc_buffers:
                if str(buf.scope()) != "global" and any(not isinstance(d, tirx.IntImm) for d in buf.shape):
                    found.append(f"{buf.scope()} buffer {buf.name} has a run-time size ({', '.join(str(d) for d in buf.shape)})")
        for child in _children(node):
            visit(child)

    visit(lowered.body)
    return found


def _wide_thread_tag(node) -> Optional[str]:
    """The thread tag of ``node`` when it is a thread-bound loop of more than one thread."""
    if isinstance(node, S.For) and node.kind == S.ForKind.THREAD_BINDING and getattr(node.extent, "value", 2) != 1:
        return str(node.thread_binding.thread_tag)
    return None


def _thread_axes(node) -> set:
    """The ``threadIdx`` tags bound somewhere under ``node`` with an extent other than 1."""
    tag = _wide_thread_tag(node)
    found = {tag} if tag is not None and tag.startswith("threadIdx") else set()
    if isinstance(node, s_tir.SBlockRealize):
        return found | _thread_axes(node.block.body) | (_thread_axes(node.block.init) if node.block.init is not None else set())
    for child in _children(node):
        found |= _thread_axes(child)
    return found


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
