"""Convolutions of a run-time spatial size: NCHW buffers, a register tile per thread.

With run-time dims, a conv whose output size depends on a dim keeps TVM's NCHW layout in buffers
(texture plans need static extents), and the NCHW4c conv schedule (:mod:`.conv2d`) does not take
it. The safe schedule gave it a thread per output element, each thread loading one data value and
one weight per term of its sum: PP-OCRv4's recognizer over a line's width spent 2.5x a fixed
build's time in such convs on pocl.

Here a thread computes a tile of ``OC`` output channels by ``PX`` consecutive output columns: each
term of the sum loads ``PX`` data values and ``OC`` weights into registers and makes ``OC * PX``
multiply-adds, and the accumulators stay in registers until the fused elementwise epilogue (bias,
activation, residual add) writes them back once. A workgroup's :data:`THREADS` threads run along
the output columns, so that neighbouring threads read neighbouring data and the same weights (one
load for the warp); rows are ``blockIdx.y``, batch and channel tiles ``blockIdx.z``: no index is
split back out of a fused one (a division by a run-time extent at every use). The padding block is
inlined into the data read.

* ``OC`` divides the output channels exactly (the largest of :data:`OC_TILES` that does), and is 1
  when the data read depends on the output channel (depthwise and grouped convs: each channel reads
  its own data, so a channel tile saves nothing);
* ``PX`` splits the output columns with a guard (their count is the run's); a width of one static
  column takes ``PX = 1``;
* the sum's loops (input channels, kernel rows and columns) stay serial, the tile's loops are
  unrolled so that every register index is a constant.

The rule takes a kernel whose one reduction block writes a 4-D output ``[n, c, h, w]`` over four
spatial axes, reads a window (a row or column index of an output position plus a term of the sum:
convs and pools, not matmuls or means over channels-last tensors), reduces over static extents,
and has at least one run-time spatial extent; anything
before it must inline (padding) and anything after it must be elementwise over its output. Kernels
of static size keep their rules (the NCHW4c schedules and the tuning database).
"""

from __future__ import annotations

from typing import Optional

from tvm import s_tir, tirx

from .analysis import _is_reduction
from .register_tile import unroll_constant

#: output-channel tiles tried, largest first (one must divide the channels, else 1)
OC_TILES = (8, 4, 2)
#: consecutive output columns a thread computes
PX = 4
#: threads of a workgroup, along the tiles of columns (rows and channel tiles: blockIdx.y, .z)
THREADS = 32


def _static(extent) -> bool:
    return isinstance(extent, tirx.IntImm)


def _uses(index, var) -> bool:
    return any(u.same_as(var) for u in tirx.analysis.undefined_vars(index))


def _conv_block(sch: s_tir.Schedule):
    """``(before, conv, after)`` blocks of a kernel this rule takes (module docstring), or None."""
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    stmts = [sch.get(b) for b in blocks]
    reductions = [i for i, b in enumerate(stmts) if _is_reduction(b)]
    if len(reductions) != 1:
        return None
    index = reductions[0]
    block = stmts[index]
    ivs = block.iter_vars
    spatial = [iv for iv in ivs if iv.iter_type == tirx.IterVar.DataPar]
    reduce = [iv for iv in ivs if iv.iter_type == tirx.IterVar.CommReduce]
    if len(spatial) != 4 or ivs[:4] != spatial or len(block.writes) != 1 or len(block.writes[0].region) != 4:
        return None
    if not all(_static(iv.dom.extent) for iv in reduce) or all(_static(iv.dom.extent) for iv in spatial):
        return None
    if not all(r.min.same_as(iv.var) for r, iv in zip(block.writes[0].region, spatial)):
        return None
    if not _windowed(block):
        return None
    if any(_is_reduction(b) for b in stmts[index + 1 :]):
        return None
    return blocks[:index], blocks[index], blocks[index + 1 :]


def _windowed(block) -> bool:
    """Whether a read indexes a row or column through an output position and a term of the sum
    together (``y * stride + ry``): a conv's or a pool's window, not a matmul's or a mean's."""
    positions = [iv.var for iv in block.iter_vars[2:4]]
    terms = [iv.var for iv in block.iter_vars if iv.iter_type == tirx.IterVar.CommReduce]
    return any(
        any(_uses(r.min, p) for p in positions) and any(_uses(r.min, t) for t in terms) for read in block.reads for r in read.region
    )


def _channel_tile(block, channels) -> int:
    """``OC``: 1 when a read other than the weights' depends on the output channel (depthwise and
    grouped convs), else the largest of :data:`OC_TILES` dividing ``channels``."""
    if not _static(channels):
        return 1
    f = block.iter_vars[1].var
    x, y = block.iter_vars[3].var, block.iter_vars[2].var
    for read in block.reads:
        spatial_read = any(_uses(r.min, x) or _uses(r.min, y) for r in read.region)
        if spatial_read and any(_uses(r.min, f) for r in read.region):
            return 1
    return next((t for t in OC_TILES if int(channels) % t == 0), 1)


def schedule_run_time_conv(func: tirx.PrimFunc) -> Optional[tirx.PrimFunc]:
    """The schedule of the module docstring, or None for a kernel this rule does not take."""
    sch = s_tir.Schedule(func)
    found = _conv_block(sch)
    if found is None:
        return None
    before, conv, after = found
    block = sch.get(conv)
    oc = _channel_tile(block, block.iter_vars[1].dom.extent)
    width = block.iter_vars[3].dom.extent
    px = 1 if _static(width) and int(width) < PX else PX
    for b in reversed(before):
        sch.compute_inline(b)
    n, f, y, x, *red = sch.get_loops(conv)
    f_o, f_i = sch.split(f, [None, oc])
    x_o, x_i = sch.split(x, [None, px])
    # a grid axis per output axis: no thread's index is divided by a run-time extent (a fused
    # index split back into n, c, h, w costs 64-bit divisions and modulos at every use)
    bx, tx = sch.split(x_o, [None, THREADS])
    sch.reorder(n, f_o, y, bx, tx, *red, f_i, x_i)
    sch.bind(sch.fuse(n, f_o), "blockIdx.z")
    sch.bind(y, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    acc = sch.cache_write(conv, 0, "local")
    sch.reverse_compute_at(acc, tx, preserve_unit_loops=True)
    for b in after[:-1]:
        sch.compute_inline(b)
    if after:
        sch.reverse_compute_inline(after[-1])
    init = sch.decompose_reduction(conv, red[0])
    sch.unroll(f_i)
    sch.unroll(x_i)
    for b in (init, acc):  # (under the workgroup and thread loops: the tile's loops)
        unroll_constant(sch, sch.get_loops(b)[4:])
    return sch.mod["main"]


def run_time_conv_rule(func: tirx.PrimFunc, _target) -> Optional[tirx.PrimFunc]:
    return schedule_run_time_conv(func)
