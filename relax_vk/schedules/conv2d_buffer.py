"""conv2d_buffer: direct NCHW convolutions on buffers whose spatial size is a run-time dim.

Tensors whose shape depends on a run-time dim stay NCHW buffers (the packing and texture passes
reason about static shapes), and their convolutions had only the safe schedule: a thread per output
element, every input element read once per output channel. This rule gives each thread ``V`` output
channels of one pixel (8, 4 or 2, what divides the channels): each input element it reads feeds
``V`` accumulators held in registers, the padding is folded into the
reads and the epilogue (bias, activation, residual add) is applied as the registers are written
back. Static convolutions keep the NCHW4c texture schedule (:mod:`.conv2d`), which comes first.
"""

from __future__ import annotations

from typing import Optional

from tvm import s_tir, tirx

#: threads per workgroup
THREADS = 64
#: output channels per thread, the first that divides the channel count
CHANNEL_BLOCKS = (8, 4, 2)


def _is_conv(sch: s_tir.Schedule, block) -> bool:
    """TOPI's ``conv2d_nchw`` block: four spatial iterators (n, c, y, x), then three reduction ones
    (input channels, window). (Transposed convolutions are left to the safe schedule: blocked the
    same way, their kernels took pocl minutes to compile.)"""
    kinds = [iv.iter_type for iv in sch.get(block).iter_vars]
    return sch.get(block).name_hint.startswith("conv2d_nchw") and kinds == [tirx.IterVar.DataPar] * 4 + [tirx.IterVar.CommReduce] * 3


def _symbolic(extent) -> bool:
    return not isinstance(extent, tirx.IntImm)


def conv2d_buffer_rule(func: tirx.PrimFunc, target) -> Optional[tirx.PrimFunc]:
    """The schedule (module docstring), or None for any other kernel."""
    sch = s_tir.Schedule(func)
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    regions = [r for b in blocks for r in list(sch.get(b).reads) + list(sch.get(b).writes)]
    if any(str(r.source.scope()).startswith("global.texture") for r in regions):
        return None
    convs = [b for b in blocks if _is_conv(sch, b)]
    if len(convs) != 1:
        return None
    conv = convs[0]
    out = sch.get(conv).writes[0].source
    if len(out.shape) != 4 or not (_symbolic(out.shape[2]) or _symbolic(out.shape[3])) or _symbolic(out.shape[1]):
        return None
    channels = int(out.shape[1])
    block = next((v for v in CHANNEL_BLOCKS if channels % v == 0), None)
    if block is None or len(sch.get_loops(conv)) != 7:
        return None
    for producer in sch.get_producers(conv):  # the padding: folded into the reads
        sch.compute_inline(producer)
    epilogue = list(sch.get_consumers(conv))
    n, f, y, x, rc, ry, rx = sch.get_loops(conv)
    fo, fi = sch.split(f, [None, block])
    sch.reorder(n, fo, y, x, rc, ry, rx, fi)
    pixel = sch.fuse(n, fo, y, x)
    bx, tx = sch.split(pixel, [None, THREADS])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    write_back = sch.cache_write(conv, 0, "local")
    sch.reverse_compute_at(write_back, tx)
    init = sch.decompose_reduction(conv, rc)
    sch.unroll(fi)  # (the accumulators stay registers; unrolling the window too cost 4x the build time)
    sch.unroll(sch.get_loops(init)[-1])
    while epilogue:  # bias, activation, residual: applied as the registers are written back
        consumer = epilogue.pop(0)
        nxt = list(sch.get_consumers(consumer))
        sch.reverse_compute_inline(consumer)
        epilogue = nxt + epilogue
    return _guarded(sch.mod["main"], sch.get(write_back).name_hint, _realize(sch, conv).predicate)


def _realize(sch: s_tir.Schedule, block):
    from tvm_ffi import get_global_func

    return get_global_func("s_tir.schedule.GetSBlockRealize")(sch, block)


def _guarded(func: tirx.PrimFunc, name: str, predicate) -> tirx.PrimFunc:
    """``func`` with block ``name`` (the write-back) under ``predicate`` (the accumulation's).

    The pixels are split over the threads, so the last workgroup has threads past the end; the
    accumulation carries that bound as its predicate, but ``reverse_compute_at`` gives the
    write-back none, and those threads' wrapped-around indices then stored never-computed registers
    over real outputs (a stride-2 conv at 33x17 was 3.8 off)."""
    import tvm_ffi

    def guard(realize):
        if realize.block.name_hint != name:
            return realize
        return s_tir.SBlockRealize(list(realize.iter_values), tirx.And(realize.predicate, predicate) if not _true(realize.predicate) else predicate, realize.block)

    return tvm_ffi.structural_map(func, [(s_tir.SBlockRealize, guard)])


def _true(expr) -> bool:
    return isinstance(expr, tirx.IntImm) and int(expr) == 1
