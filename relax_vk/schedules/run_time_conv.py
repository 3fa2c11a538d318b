"""Convolutions of a run-time spatial size: NCHW buffers, a register tile per thread.

With run-time dims, a conv whose output size depends on a dim keeps TVM's NCHW layout in buffers
(texture plans need static extents), and the NCHW4c conv schedule (:mod:`.conv2d`) does not take
it. The safe schedule gave it a thread per output element, each thread loading one data value and
one weight per term of its sum: PP-OCRv4's recognizer over a line's width spent 2.5x a fixed
build's time in such convs on pocl.

Here a thread computes a tile of ``OC`` output channels by ``PX`` consecutive output columns: each
term of the sum loads ``PX`` data values and ``OC`` weights into registers for ``OC * PX``
multiply-adds, and the accumulators stay in registers until the fused elementwise epilogue (bias,
activation, residual add) writes them back once. A workgroup is :data:`TX` threads along the
output columns (neighbouring threads read neighbouring data and the same weights: one load for
the warp) by :data:`TZ` along the channel tiles; rows are ``blockIdx.y``, batch and channel tiles
``blockIdx.z``, columns ``blockIdx.x``. No index is split back out of a fused one: the safe
schedule's fused index costs 64-bit divisions and modulos by run-time extents at every use, and
with a tile unrolled a kernel of 880 KB of OpenCL C. The padding block is inlined into the data
read.

* ``OC`` divides the output channels exactly (the largest of :data:`OC_TILES` that does), and is 1
  when the data read depends on the output channel (depthwise and grouped convs, pools: each
  channel reads its own data, so a channel tile saves nothing) or when the sum has
  :data:`LONG_SUM` terms or more (threads matter more than reuse there);
* ``PX`` splits the output columns with a guard (their count is the run's);
* the sum's loop steps over :data:`CHANNEL_STEPS` input channels at a time with every kernel row
  and column unrolled (at most :data:`UNROLLED_TERMS` terms: their loads issue together), the
  tile's loops are unrolled so that every register index is a constant;
* the guard on the thread's column is one branch around the sum (:func:`_guarded_once`), not a
  predicate of the sum's update block, which put a branch around every unrolled term (NVIDIA's
  OpenCL compiler merged them, its Vulkan compiler did not). Measured on the H200 with padded reads
  made loads from clamped addresses as well (2026-11-30, RESULTS.md): PP-OCRv4 rec at width 160 /
  640 on Vulkan 1.61 -> 0.93-0.99 / 2.51-2.52 -> 1.84-2.01 ms, ResNet-18 with run-time H, W at 224
  / 320 4.41 -> 2.67 / 6.50 -> 4.13-4.16; the clamped reads alone changed Vulkan by nothing and
  OpenCL's ResNet-18 by 8-10%. The clamped reads are gone: a padded read is TVM's branch again, as
  TVM's simplifier, reading a select's condition, dropped the clamp (``max(y - 1, 0)`` became ``y -
  1``) and the load read before its buffer (PP-OCR cls with a run-time batch crashed pocl);
* a sum of :data:`SLICED_SUM` terms or more over a map whose rows and columns are both run-time
  runs in slices of its input channels (:func:`_sliced_sum`): one kernel writes each slice's
  partial sums to a workspace planned at the dims' bound, a second adds them and applies the
  epilogue. ResNet-18's last two stages (2,304 and 4,608 terms over 14x14 and 7x7 at 224) had a
  thread an output, each a chain of thousands of dependent steps, and too few threads to fill a
  GPU. On the H200 (2026-11-30, H, W in 64..320): at 224, Vulkan 2.06-2.08 -> 1.55-1.57 ms and
  OpenCL 1.68 -> 1.30-1.32 (a fixed build: 0.94-0.98); at 320, 3.18 -> 2.75-2.79 and 2.72-2.75 ->
  2.47-2.48;
* a sum of :data:`SPLIT_SUM` terms or more over a map with static rows or static columns is split
  over a workgroup's threads instead (:func:`_split_long_sum`): few outputs with long sums (a
  recognizer's neck over a line's width) leave too few threads otherwise. A map whose rows and
  columns are both run-time keeps the tile: split, ResNet-18's 1,152-4,608-term convs ran 2.21-2.24
  ms against 2.70-2.81 at 224 on OpenCL but 4.21-4.35 against 3.67-3.79 at 320, and 8.1 against
  6.3 at 320 on Vulkan (every split conv takes about the same time whatever its layer: its lanes'
  reads are a term apart, not coalesced). PP-OCRv4 rec at width 160 on the H200's OpenCL: its 960- and
  480-channel 1x3 convs 0.268 / 0.135 ms -> a run from one artifact at 0.90-1.13x the fixed
  build's time (1.46-1.50x before); on Vulkan 2.4 -> 1.7 ms a run.

A map at most 32 columns wide at the dims' bound (the kernel's ranges, which
:func:`~relax_vk.schedules.apply.ScheduleKernels` gives it) takes a workgroup of 16 columns by 4
channel tiles instead (:data:`NARROW_TILES`): 32 threads along 7 or 14 columns (ResNet-18's last
two stages at 224) left most of them idle. On the H200 (2026-11-30, ResNet-18 with H, W in
64..320): Vulkan 2.46-2.52 -> 2.10-2.11 ms at 224 and 3.77 -> 3.16-3.22 at 320, OpenCL 1.65-1.66
-> 1.69-1.73 and 2.89-2.91 -> 2.74; PP-OCRv4 det as it was; 8 x 8 under 16 columns was no better.

The tile is small because a GPU wants threads more than reuse here: on an H200, PP-OCRv4's
recognizer and detector ran fastest (of seven tile and workgroup shapes, both APIs, two sizes
each) with 2 channels x 1 column, 32 x 2 threads; 8 x 4 with 32 threads was 3-12x slower (too few
threads, each a chain of ``C_in * kh * kw`` dependent steps). On pocl the larger tile is faster
(a CPU vectorises across work-items). Against the safe schedule on the H200 the rule gains
17-32% where maps are large and loses up to 25% on small ones (PP-OCRv4 rec at width 160 on
Vulkan). Measured figures: benchmarks/RESULTS.md.

The rule takes a kernel whose one reduction block writes a 4-D output ``[n, c, h, w]`` over four
spatial axes, reads a window (a row or column index of an output position plus a term of the sum:
convs and pools, not matmuls or means over channels-last tensors), reduces over static extents,
and has at least one run-time spatial extent; anything before it must inline (padding) and
anything after it must be elementwise over its output. Kernels of static size keep their rules
(the NCHW4c schedules and the tuning database).
"""

from __future__ import annotations

import math
from typing import Optional

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..core.dims import kernel_ranges, largest_value
from .analysis import _is_reduction
from .partial_sums import divisor, inline_around, split_sum, static_outputs_and_sum
from .register_tile import accumulate, loop_depth, loop_extent, unroll_constant
from .unchecked import new_schedule

#: output-channel tiles tried, largest first (one must divide the channels, else 1)
OC_TILES = (2,)
#: sums of at least this many terms take one output channel a thread: twice the threads, each as
#: long a chain (PP-OCRv4 rec's 480-channel 3x3 convs on the H200's Vulkan: 8-13% a run)
LONG_SUM = 1024
#: consecutive output columns a thread computes
PX = 1
#: a workgroup's threads along the tiles of columns and along the channel tiles
TX, TZ = 32, 2
#: the workgroup of a map with few output columns at the dims' bound: ``(at most this many
#: columns, TX, TZ)``, the first that holds (:func:`_workgroup`)
NARROW_TILES = ((32, 16, 4),)
#: a step of the sum's serial loop takes this many terms at most, unrolled: its loads issue
#: together instead of one round trip a term (the loop was bound by load latency: PP-OCRv4 rec's
#: 480- and 960-channel 1x3 convs over 20 columns took 5x the fixed build's on the H200's OpenCL)
UNROLLED_TERMS = 36
#: input channels a step takes, largest first (one must divide the channels)
CHANNEL_STEPS = (4, 2, 1)
#: sums of at least this many terms are split over a workgroup's threads (:func:`_split_long_sum`)
SPLIT_SUM = 1024
#: outputs a workgroup (threadIdx.y) and partial sums an output (threadIdx.x) of a split sum
SPLIT_OUTPUTS, SPLIT_LANES = 8, 32
#: sums of at least this many terms over maps of run-time rows and columns run in slices of their
#: input channels, in two kernels (:func:`_sliced_sum`)
SLICED_SUM = 2048
#: slice counts tried, fewest first (one must divide the input channels)
SLICES = (2, 4, 8, 16)
#: at most this many terms a slice, where a slice count in :data:`SLICES` allows (ResNet-18's
#: 2,304- and 4,608-term convs: 8 and 16 slices of 288). On the H200, with H, W in 64..320 at 224:
#: slices of 576 terms 1.63-1.72 ms on Vulkan and 1.33-1.51 on OpenCL, of 288 1.55-1.57 and
#: 1.30-1.32, of 144 (up to 32 slices) 1.53 and 1.28; layer 2's 1,152-term convs in slices too
#: (``SLICED_SUM`` 1024) 1.51-1.52 and 1.31-1.33
SLICE_TERMS = 320


def _static(extent) -> bool:
    return isinstance(extent, tirx.IntImm)


def _terms(block) -> int:
    """The number of terms of ``block``'s sum (its reduction extents, static)."""
    return math.prod(int(iv.dom.extent) for iv in block.iter_vars if iv.iter_type == tirx.IterVar.CommReduce)


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


def _channel_tile(block, channels, terms: Optional[int] = None) -> int:
    """``OC``: 1 when a read other than the weights' depends on the output channel (depthwise and
    grouped convs) or the sum has :data:`LONG_SUM` terms or more, else the largest of
    :data:`OC_TILES` dividing ``channels``."""
    if not _static(channels):
        return 1
    f = block.iter_vars[1].var
    x, y = block.iter_vars[3].var, block.iter_vars[2].var
    for read in block.reads:
        spatial_read = any(_uses(r.min, x) or _uses(r.min, y) for r in read.region)
        if spatial_read and any(_uses(r.min, f) for r in read.region):
            return 1
    if terms is None:
        terms = _terms(block)
    if LONG_SUM is not None and terms >= LONG_SUM:
        return 1
    return next((t for t in OC_TILES if int(channels) % t == 0), 1)


def _channel_step(sch: s_tir.Schedule, red) -> int:
    """How many input channels (the sum's first loop) a step of the serial loop takes, unrolled
    with every kernel row and column: the largest of :data:`CHANNEL_STEPS` dividing the channels
    with at most :data:`UNROLLED_TERMS` terms a step; 0 (nothing unrolled) when the window alone
    passes that or an extent is not static."""
    extents = [loop_extent(sch.get(lp)) for lp in red]
    if any(e < 0 for e in extents):
        return 0
    inner = math.prod(extents[1:])
    return next((u for u in CHANNEL_STEPS if extents[0] % u == 0 and u * inner <= UNROLLED_TERMS), 0)


def _workgroup(func: tirx.PrimFunc, width) -> tuple:
    """``(TX, TZ)`` for a map ``width`` output columns wide: :data:`NARROW_TILES`' first whose column
    count the width stays within at the dims' bound (the kernel's ranges,
    :func:`~relax_vk.core.dims.kernel_ranges`), else :data:`TX`, :data:`TZ`. A thread a column of
    32 leaves most threads idle where a map is 7 or 14 columns wide (ResNet-18's last stages)."""
    if _static(width):
        bound = int(width)
    else:
        ranges = kernel_ranges(func)
        bound = largest_value(width, ranges) if ranges else None
    for most, tx, tz in NARROW_TILES:
        if bound is not None and bound <= most:
            return tx, tz
    return TX, TZ


def _split_long_sum(func: tirx.PrimFunc, conv_name: str, names: list) -> Optional[tirx.PrimFunc]:
    """A conv whose sum has :data:`SPLIT_SUM` terms or more, split over a workgroup's threads
    (:func:`.partial_sums.split_sum`): its run-time output dims on ``blockIdx``, :data:`SPLIT_OUTPUTS`
    (at most) of its static outputs on ``threadIdx.y``, :data:`SPLIT_LANES` partial sums a term
    apart on ``threadIdx.x``. A long sum over few outputs (PP-OCRv4 rec's 960-channel 1x3 conv over
    20 columns: 1,200 outputs of 2,880 terms) had few threads, each a long chain."""
    sch = new_schedule(func)
    epilogue = inline_around(sch, names, names.index(conv_name))
    block = sch.get_sblock(conv_name)
    ivs = sch.get(block).iter_vars
    outputs = math.prod(int(iv.dom.extent) for iv in ivs if iv.iter_type == tirx.IterVar.DataPar and _static(iv.dom.extent))
    terms = _terms(sch.get(block))
    nt, ks = divisor(outputs, SPLIT_OUTPUTS), divisor(terms, SPLIT_LANES)
    if nt < 2 or ks < 8:
        return None
    found = static_outputs_and_sum(sch, block)
    if found is None or not found[0]:
        return None
    static, k = found
    n = sch.fuse(*static) if len(static) > 1 else static[0]
    split_sum(sch, block, epilogue, n, k, nt, ks, "threadIdx.y", "threadIdx.x")
    return sch.mod["main"]


def schedule_run_time_conv(func: tirx.PrimFunc) -> Optional[tirx.PrimFunc]:
    """The schedule of the module docstring, or None for a kernel this rule does not take."""
    sch = new_schedule(func)
    found = _conv_block(sch)
    if found is None:
        return None
    before, conv, after = found
    block = sch.get(conv)
    terms = _terms(block)
    rows, columns = (iv.dom.extent for iv in block.iter_vars[2:4])
    if SPLIT_SUM is not None and terms >= SPLIT_SUM and _channel_tile(block, block.iter_vars[1].dom.extent) == 1 and (_static(rows) or _static(columns)):
        names = [sch.get(b).name_hint for b in (*before, conv, *after)]
        try:
            split = _split_long_sum(func, block.name_hint, names)
        except s_tir.ScheduleError:  # (TVM cannot factor this sum, e.g. a dilated window over a static height: tiled below)
            split = None
        if split is not None:
            return split
    slices = 1 if _static(rows) or _static(columns) else _slices(block, terms)
    if slices > 1:
        try:
            sliced = _sliced_sum(func, block.name_hint, [sch.get(b).name_hint for b in (*before, conv, *after)], slices)
        except Exception:  # (a sum TVM cannot factor, whatever it raises: tiled whole below)
            sliced = None
        if sliced is not None:
            return sliced
    for b in reversed(before):
        sch.compute_inline(b)
    channels, width = block.iter_vars[1].dom.extent, block.iter_vars[3].dom.extent
    guard = _tile(sch, func, conv, after, _channel_tile(block, channels), channels, width)
    return _guarded_once(sch.mod["main"], *guard)


def _tile(sch: s_tir.Schedule, func: tirx.PrimFunc, conv, after: list, oc: int, channels, width) -> tuple:
    """Schedule ``conv`` (its loops: batch, ``channels`` output channels, rows, ``width`` columns,
    then the sum's) as the register tile of the module docstring, ``oc`` channels a thread, with
    the ``after`` blocks folded into its write-back. Returns ``(the update block's name, the sum's
    loop vars)`` for :func:`_guarded_once`."""
    px = 1 if _static(width) and int(width) < PX else PX
    n, f, y, x, *red = sch.get_loops(conv)
    f_o, f_i = sch.split(f, [None, oc])
    x_o, x_i = sch.split(x, [None, px])
    tx = _grid(sch, func, (n, f_o, y, x_o), int(channels) // oc if _static(channels) else None, width, (*red, f_i, x_i))
    step = _channel_step(sch, red)
    if step:
        red = [*sch.split(red[0], [None, step]), *red[1:]]
    acc, init = accumulate(sch, conv, tx, after, red[0])
    if step:
        for lp in red[1:]:
            sch.unroll(lp)
    sch.unroll(f_i)
    sch.unroll(x_i)
    for b in (init, acc):  # (under the workgroup and thread loops: the tile's loops)
        unroll_constant(sch, sch.get_loops(b)[loop_depth(sch, b, tx) :])
    loops = sch.get_loops(conv)
    return sch.get(conv).name_hint, tuple(sch.get(lp).loop_var for lp in loops[loop_depth(sch, conv, tx) :])


def _grid(sch: s_tir.Schedule, func: tirx.PrimFunc, outputs: tuple, tiles: Optional[int], width, inner: tuple):
    """Put the output loops ``outputs`` (batch, channel tiles, rows, columns: ``tiles`` channel
    tiles when static) on the grid both kernels share, ``inner`` (the thread's own loops) under
    it: a row a ``blockIdx.y``, the columns split over ``threadIdx.x`` (:func:`_workgroup`), the
    channel tiles over ``threadIdx.y`` where they split exactly, the batch and what is left of the
    tiles on ``blockIdx.z``. Returns the ``threadIdx.x`` loop."""
    n, f, y, x = outputs
    # a grid axis per output axis, split by constants: no thread's index is divided by a run-time
    # extent (a fused index split back into n, c, h, w costs 64-bit divisions and modulos at
    # every use). Every output row is a workgroup row of its own: the write-back's row is then
    # fixed above the thread loop, and TVM's reverse_compute_at guards no index fixed there (rows
    # split over threads with a partial last tile wrote a row past the output's end: the next
    # channel's).
    threads_x, threads_z = _workgroup(func, width)
    bx, tx = sch.split(x, [None, threads_x])
    bz, tz = sch.split(f, [None, threads_z if tiles is not None and tiles % threads_z == 0 else 1])  # (channel tiles split exactly)
    sch.reorder(n, bz, y, bx, tz, tx, *inner)
    sch.bind(sch.fuse(n, bz), "blockIdx.z")
    sch.bind(y, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(tz, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    return tx


def _slices(block, terms: int) -> int:
    """How many slices of its input channels a sum of ``terms`` terms is cut into
    (:func:`_sliced_sum`): 1 below :data:`SLICED_SUM` terms, else the fewest of :data:`SLICES`
    that divide the channels and leave at most :data:`SLICE_TERMS` terms a slice (else the most
    that divide them)."""
    if SLICED_SUM is None or terms < SLICED_SUM:
        return 1
    channels = next(iv for iv in block.iter_vars if iv.iter_type == tirx.IterVar.CommReduce).dom.extent
    fits = [s for s in SLICES if int(channels) % s == 0]
    return next((s for s in fits if terms // s <= SLICE_TERMS), fits[-1] if fits else 1)


def _sliced_sum(func: tirx.PrimFunc, conv_name: str, names: list, slices: int) -> tirx.PrimFunc:
    """A conv whose sum runs in ``slices`` slices of its input channels, in two kernels. The first
    writes each slice's partial sums to a workspace ``[slices, n, c, h, w]`` (TVM's ``rfactor``;
    :func:`_tile`, a slice beside the batch on ``blockIdx.z``); the second adds each output's
    partials and applies the epilogue (:func:`_summed`). The workspace is planned at the dims'
    bound like the program's tensors."""
    sch = new_schedule(func)
    index = names.index(conv_name)
    for name in reversed(names[:index]):
        sch.compute_inline(sch.get_sblock(name))
    conv = sch.get_sblock(conv_name)
    after = [sch.get_sblock(name) for name in names[index + 1 :]]
    block = sch.get(conv)
    channels, width = block.iter_vars[1].dom.extent, block.iter_vars[3].dom.extent
    oc = _channel_tile(block, channels, _terms(block) // slices)
    loops = sch.get_loops(conv)  # n, f, y, x, the input channels, the window
    part, _ = sch.split(loops[4], [slices, None])
    partial = sch.rfactor(part, 0)  # partial[s, n, f, y, x]; conv now adds the slices
    n, f, y, x, s, *_ = sch.get_loops(partial)
    sch.reorder(s, n, f, y, x)
    sch.fuse(s, n)
    guard = _tile(sch, func, partial, [], oc, channels, width)
    _summed(sch, func, conv, after, channels, width)
    return _guarded_once(sch.mod["main"], *guard)


def _summed(sch: s_tir.Schedule, func: tirx.PrimFunc, total, after: list, channels, width) -> None:
    """The second kernel of :func:`_sliced_sum`: a thread an output, on the tile's grid (a row a
    ``blockIdx.y``, columns on ``threadIdx.x``, channels on ``threadIdx.y``), adding the slices'
    partials in a register and applying the ``after`` blocks as it writes the output."""
    n, f, y, x, s = sch.get_loops(total)
    tx = _grid(sch, func, (n, f, y, x), int(channels) if _static(channels) else None, width, (s,))
    accumulate(sch, total, tx, after, s)
    sch.unroll(s)


def _guarded_once(func: tirx.PrimFunc, update: str, sum_loops: tuple) -> tirx.PrimFunc:
    """``func`` with the predicate of the sum's update block ``update`` (a thread past the output's
    last column: every unrolled term a branch on it) moved to one ``if`` around the sum's outer
    loop ``sum_loops[0]``, the same condition for the same threads; ``func`` itself when the
    predicate names a loop of the sum (``sum_loops``: the outer loop, then those inside it)."""
    guards = []

    def collect(node):
        if node.block.name_hint == update:
            guards.append(node.predicate)
        return node

    tvm_ffi.structural_map(func, [(s_tir.SBlockRealize, collect)])
    if len(guards) != 1 or isinstance(guards[0], tvm.ir.prim.expr.IntImm):
        return func
    if any(v.same_as(o) for v in tirx.analysis.undefined_vars(guards[0]) for o in sum_loops):
        return func

    def unpredicated(node):
        return s_tir.SBlockRealize(node.iter_values, tirx.const(True, "bool"), node.block) if node.block.name_hint == update else node

    def guarded(node):
        return tirx.IfThenElse(guards[0], node, None) if node.loop_var.same_as(sum_loops[0]) else node

    return tvm_ffi.structural_map(func, [(s_tir.SBlockRealize, unpredicated), (tirx.stmt.For, guarded)])


def run_time_conv_rule(func: tirx.PrimFunc, _target) -> Optional[tirx.PrimFunc]:
    return schedule_run_time_conv(func)
