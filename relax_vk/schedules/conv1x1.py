"""1x1 convolutions as packed GEMMs: register blocks over flattened pixels and output texels.

For the ``conv2d_NCHWc_OIHWo`` block of a 1x1 conv (stride 1 or 2, no padding, not grouped;
padding folded into the loads; textures and packed buffers alike) with its fused elementwise epilogue (bias, batch norm,
relu/relu6/clip, residual add). A 1x1 conv is a GEMM ``out[o, p] = sum_c w[o, c] * in[c, p]``
over the ``P = out_h * out_w`` pixels of each image; this schedule treats it as one:

* the pixel axis is the flattened ``(oh, ow)``: a thread's block is ``px`` consecutive pixels of
  the map, not of one row, so the block size is free of the row length (the direct schedule
  :mod:`.conv2d` needs ``px`` to divide ``out_w``: 7x7 and 14x14 maps get 7 or 2 pixels there);
  a last block that runs past the map is masked (every read, update and store of a pixel past
  the end is guarded, so nothing is read or written out of bounds);
* one thread computes ``px`` pixels x ``oc`` output texels (``px * oc * 4`` accumulators in
  registers); ``oc`` divides the output texels: with a tail of output texels and more than one
  workgroup of pixels, TVM left the tail's stores unguarded (a 1x1 conv to 12 channels on a 45x17
  map wrote past its output: wrong numbers in images, a corrupted heap on pocl and lavapipe; fuzz
  seed 150288), so such a block is refused;
* per input-channel texel (4 channels, ``ic4``) the thread loads its ``px`` input texels once and
  the ``4 * oc`` weight texels once, and accumulates ``acc[o, p] += in[p].lane(i) * w[o, i]``:
  every input texel feeds ``16 * oc`` FMAs, every weight texel ``4 * px``;
* the weights stay in relax_vk's OIHW4o packing, which for a 1x1 kernel is ``[O/4][I/4][4i][4o]``
  (OIHW4i4o): the ``4`` texels of one (output texel, ``ic4``) step are contiguous, in a buffer
  and along an image row, and the packing is folded into the constant at build time
  (:mod:`relax_vk.passes.layout.convert_layout`); the tuner's candidates take weights as program
  inputs in the same layout, so no second layout is needed;
* the write-back stores whole texels and computes the fused epilogue on the way out.

:func:`gemm_applies` says which workloads it takes; :mod:`.conv2d` dispatches here for
configurations with ``gemm=True`` (tuning candidates, or forced with :func:`.conv2d.conv1x1_kernel`).
"""

from __future__ import annotations

from typing import Optional

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from .register_tile import accumulate_in_registers, loop_extent, read_index, texel_loops, unroll_constant


def gemm_applies(w) -> bool:
    """Whether this schedule takes a :class:`~relax_vk.schedules.conv2d.Conv2dWorkload`: a 1x1
    conv, stride 1 or 2, dilation irrelevant, not depthwise, not grouped."""
    return w.kh == 1 and w.kw == 1 and not w.depthwise and w.groups == 1 and w.stride in (1, 2)


def gemm_threads(w, px: int, oc: int, threads: int) -> int:
    """Threads per workgroup the schedule uses: never more than the pixel blocks of the kernel
    (with a single block every index is a constant, and TVM then puts no guard on the cache and
    write-back stages, so idle threads would store garbage)."""
    return max(1, min(threads, w.n * (-(-w.out_h * w.out_w // px))))


def _flatten_pixels(sch: s_tir.Schedule, conv, epilogue, out_h: int, out_w: int) -> None:
    """Give the conv block and every epilogue block one pixel iterator ``p = y * out_w + x`` in
    place of ``(y, x)``, and the buffers they pass between them (allocated in the kernel) one
    pixel axis: TVM then bounds a thread's block of consecutive pixels exactly (as a range of
    ``p``), where ``(y, x)`` regions would cover whole rows."""
    from tvm.tirx import IndexMap

    for block in [conv] + list(epilogue):
        # the NCHW4c output iterators come first (n, c4, y, x, lane), then the conv's reduction ones
        ndim = len(sch.get(block).iter_vars)
        sch.transform_block_layout(block, IndexMap.from_func(lambda *v: [v[0], v[1], v[2] * out_w + v[3], *v[4:]], ndim=ndim))
    allocated = sch.get(sch.get_sblock("root")).alloc_buffers  # (a kernel output keeps its layout)
    for block in [conv] + list(epilogue)[:-1]:
        for index, region in enumerate(sch.get(block).writes):
            buf = region.source
            if not any(buf.same_as(a) for a in allocated):
                continue
            if len(buf.shape) == 5 and int(buf.shape[2]) == out_h and int(buf.shape[3]) == out_w:
                sch.transform_layout(block, ("write", index), lambda n, c, y, x, lane: (n, c, y * out_w + x, lane))


def schedule_conv1x1_gemm(sch: s_tir.Schedule, conv, pad, epilogue, w, px: int, oc: int, threads: int) -> Optional[tirx.PrimFunc]:
    """The GEMM schedule (module docstring) on ``sch``, or None when it does not take the kernel
    (not :func:`gemm_applies`, an epilogue that is not elementwise over the output, or a block
    size below 1). A padded 1x1 conv's pad is inlined into the input loads (a guarded read)."""
    if not gemm_applies(w) or px < 1 or oc < 1 or w.oc_chunks % min(oc, w.oc_chunks):
        return None
    out_shape = [loop_extent(sch.get(lp)) for lp in sch.get_loops(conv)[:5]]
    if any([loop_extent(sch.get(lp)) for lp in sch.get_loops(b)] != out_shape for b in epilogue):
        return None  # an epilogue that is not elementwise over the NCHW4c output
    if pad is not None:
        sch.compute_inline(pad)
    if not epilogue:  # the conv writes the output: a copy stage, so the accumulators can be flattened
        epilogue = [sch.cache_write(conv, 0, "global")]
    data_buf = sch.get(conv).reads[0].source
    weight_buf = sch.get(conv).reads[1].source
    _flatten_pixels(sch, conv, epilogue, w.out_h, w.out_w)
    # the input texels of a thread's pixels, indexed by the conv's own iterators (a range of
    # pixels, where the data's (y, x) region of consecutive pixels spans whole rows)
    data_cache = sch.reindex(conv, ("read", read_index(sch, conv, data_buf)))
    n, occ, pixels, ocb, ic, kh, kw = sch.get_loops(conv)
    occ_o, occ_i = sch.split(occ, [None, min(oc, w.oc_chunks)])
    pix_o, pix_i = sch.split(pixels, [None, min(px, w.out_h * w.out_w)])
    ic_o, ic_i = sch.split(ic, [None, 4])
    sch.reorder(occ_o, n, pix_o, ic_o, kh, kw, ic_i, occ_i, pix_i, ocb)
    blocks = sch.fuse(n, pix_o)
    bx, tx = sch.split(blocks, [None, gemm_threads(w, px, oc, threads)])
    sch.bind(occ_o, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    accumulate_in_registers(sch, conv, tx, epilogue, ic_o)
    # per ic4 step: the block's input texels once (a 1x1 window: nothing slides), its weight texels
    sch.compute_at(data_cache, kw, preserve_unit_loops=True)
    sch.set_scope(data_cache, 0, "local")
    weight_cache = sch.cache_read(conv, read_index(sch, conv, weight_buf), "local")
    sch.compute_at(weight_cache, kw, preserve_unit_loops=True)
    depth = 6  # occ_o, bx, tx, ic_o, kh, kw: the loops above the per-step stages
    for cache in (data_cache, weight_cache):
        texel_loops(sch, cache, depth)
    unroll_constant(sch, sch.get_loops(conv)[depth:])
    func = sch.mod["main"]
    budget = private_budget(px, oc)
    if private_elements(func) > budget:
        return None  # TVM's region analysis widened a stage past the block (see private_elements)
    return func


def private_budget(px: int, oc: int) -> int:
    """Elements of private ("local") memory a GEMM block of ``px`` pixels x ``oc`` output texels
    needs: its accumulators (``px * oc * 4`` lanes), the input texels of one step (``px * 4``) and
    the weight texels of one step (``oc * 16``), four times over: slack for a padded input's
    guarded window and a masked tail (224 elements for a padded 2x4 block); a stage TVM widened to
    whole rows holds thousands."""
    return 4 * (px * oc * 4 + px * 4 + oc * 16)


def private_elements(func: tirx.PrimFunc) -> int:
    """Elements of the kernel's largest private ("local") allocation. Where a token map's pixel
    count is not a multiple of the block (475 tokens, 4 pixels a thread), TVM's region analysis of
    the reindexed input and the accumulators can cover whole rows of the flattened map: 2,048 and
    4,096 floats a thread: slow on a GPU (private memory spills), and wrong outputs on pocl (fuzz
    seed 80110). Such a schedule is refused: the rule falls back to the direct kernel. Measured
    after TVM's own buffer compaction, as the kernel will allocate them."""
    mod = tvm.IRModule({"main": func})
    for stage in (s_tir.transform.LowerInitBlock(), s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
                  s_tir.transform.ConvertBlocksToOpaque(), s_tir.transform.CompactBufferAllocation()):  # fmt: skip
        mod = stage(mod)
    largest = 0

    def on_block(block):
        nonlocal largest
        for buf in block.alloc_buffers:
            if str(buf.scope()) == "local":
                n = 1
                for e in buf.shape:
                    n *= int(e) if isinstance(e, (int, tirx.IntImm)) else 1 << 30
                largest = max(largest, n)
        return block

    tvm_ffi.structural_map(mod["main"].body, [(s_tir.SBlock, on_block)])
    return largest
