"""relax_vk's token-matmul schedule: register tiles, whole-texel operand loads, epilogues fused.

For the ``token_matmul`` block of :func:`relax_vk.legalize.tokens.token_matmul` (attention's
``q @ k^T`` and ``p @ v``, textures and packed buffers alike), with any elementwise epilogue fused
after it (the ``* scale`` of the scores) and producers before it. One thread computes ``rows`` output rows times ``cols``
output texels (4 columns each) of one batch:

* the output rows are split by batch first (``row = g * rows_per_batch + r``), so a thread's rows
  all belong to one batch and the rows of ``B`` it reads are the same for each of them;
* the tile shrinks (to one texel) until the kernel has enough threads to fill a large GPU
  (:func:`tile`);
* per reduction texel ``k4`` the thread loads its ``rows`` texels of ``A`` and the ``4 * cols``
  texels of ``B`` it needs (whole texels, one vector load each, into registers) and accumulates
  ``rows * cols * 16`` products: each loaded texel feeds 4 to 16 FMAs (the safe schedule fetches a
  texel of ``B`` per output texel per ``k4``);
* the accumulators live in registers (inner loops unrolled), and the write-back stores whole
  texels, computing the fused epilogue on the way out;
* producers before the matmul are inlined into its register loads: an operand read through a
  texel table (a ``token_gather`` stage: attention's heads read straight from the qkv
  projection; one table read per texel fetched) and fused elementwise producers (``q * scale``).

Tiles never straddle a batch or run past the output: ``rows`` divides the rows of a batch and
``cols`` the output texels (:func:`tile`).
"""

from __future__ import annotations

from typing import Optional, Tuple

from tvm import s_tir, tirx
from tvm.ir.expr import Expr as PrimExpr

from .register_tile import accumulate_in_registers, loop_extent, unroll_constant
from .unchecked import new_schedule

BLOCK = "token_matmul"
THREADS = 64
MIN_THREADS = 16384  # threads a tile choice keeps (a few warps per core on large GPUs)


def tile(rows_per_batch: int, out_texels: int, batches: int = 1) -> Tuple[int, int]:
    """``(rows, cols)`` per thread: the largest tile (up to 4 rows x 2 texels, the conv schedule's
    default block) that divides the batch's rows and the output texels and still leaves
    :data:`MIN_THREADS` threads; ``(1, 1)`` when none does. Attention's matmuls are small (a ViT's
    ``p @ v`` has 19k output texels): on a large GPU, threads matter more than register reuse."""
    tiles = [(px, oc) for px in (4, 2, 1) for oc in (2, 1) if rows_per_batch % px == 0 and out_texels % oc == 0]
    tiles.sort(key=lambda t: (-t[0] * t[1], -t[0]))
    for px, oc in tiles:
        if batches * (rows_per_batch // px) * (out_texels // oc) >= MIN_THREADS:
            return px, oc
    return 1, 1


def _floordivs(expr, var, found: set) -> None:
    """Collect ``c`` of every ``var // c`` in the TIR expression ``expr``."""
    if isinstance(expr, tirx.FloorDiv) and expr.a.same_as(var) and isinstance(expr.b, tirx.IntImm):
        found.add(int(expr.b.value))
    for field in ("a", "b", "value", "condition", "true_value", "false_value"):
        child = getattr(expr, field, None)
        if isinstance(child, PrimExpr):
            _floordivs(child, var, found)
    for child in list(getattr(expr, "args", None) or []) + list(getattr(expr, "indices", None) or []):
        if isinstance(child, PrimExpr):
            _floordivs(child, var, found)


def _rows_per_batch(block, row_var, rows: int) -> Optional[int]:
    """The rows of one batch: ``c`` of the ``row // c`` with which the block's reads find a row's
    batch (all rows when there is none: one batch); None when they use several."""
    found: set = set()
    for region in block.reads:
        for r in region.region:
            _floordivs(r.min, row_var, found)
    if len(found) > 1:
        return None
    return found.pop() if found else rows


def _threads(pixels: int, most: int, exact: bool) -> Optional[int]:
    """Threads per workgroup along a batch's ``pixels`` (row tiles): all of them when they fit,
    else a divisor of them (``exact``: a partial workgroup would hide from TVM's bound analysis
    that a thread's rows stay in its batch) or, with one batch, ``THREADS``."""
    if pixels <= most:
        return pixels
    if not exact:
        return min(THREADS, most)
    fits = [t for t in range(most, 31, -1) if pixels % t == 0]
    return fits[0] if fits else None


def schedule_token_matmul(func: tirx.PrimFunc, max_threads: int = 256) -> Optional[tirx.PrimFunc]:
    """``func`` scheduled (module docstring), or None when it is not a token-matmul kernel."""
    sch = new_schedule(func)
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    names = [sch.get(b).name_hint for b in blocks]
    if names.count(BLOCK) != 1:
        return None
    at = names.index(BLOCK)
    producers, mm, epilogue = blocks[:at], blocks[at], blocks[at + 1 :]
    loops = sch.get_loops(mm)
    if len(loops) != 6:
        return None
    n, j4, h, row, lane, k4 = loops
    extents = [loop_extent(sch.get(lp)) for lp in loops]
    if extents[0] != 1 or extents[2] != 1 or extents[4] != 4:
        return None
    block = sch.get(mm)
    rows_per_batch = _rows_per_batch(block, block.iter_vars[3].var, extents[3])
    if rows_per_batch is None or extents[3] % rows_per_batch:
        return None
    operands = [r.source for r in block.reads]
    if len(operands) != 2:
        return None
    px, oc = tile(rows_per_batch, extents[1], extents[3] // rows_per_batch)
    batches, pixels = extents[3] // rows_per_batch, rows_per_batch // px
    threads = _threads(pixels, max_threads, exact=batches > 1)
    if threads is None:
        return None
    g, r = sch.split(row, [None, rows_per_batch])
    r_o, r_i = sch.split(r, [None, px])
    r_oo, r_oi = sch.split(r_o, [None, threads])
    j_o, j_i = sch.split(j4, [None, oc])
    sch.reorder(j_o, n, h, g, r_oo, r_oi, k4, j_i, r_i, lane)
    sch.bind(j_o, "blockIdx.y")
    sch.bind(sch.fuse(n, h, g, r_oo), "blockIdx.x")
    sch.bind(r_oi, "threadIdx.x")
    # loops [0, 3) are the bound ones (j_o, blocks, threads); [3] is k4 where it exists
    acc, init = accumulate_in_registers(sch, mm, r_oi, epilogue, k4)
    caches = []
    for operand in operands:  # A's texels, then B's, for one k4 step
        index = [r.source.same_as(operand) for r in sch.get(mm).reads].index(True)
        cache = sch.cache_read(mm, index, "local")
        sch.compute_at(cache, k4, preserve_unit_loops=True)
        caches.append(cache)
    for producer in reversed(producers):  # into the register loads (a texel table read per texel)
        try:
            sch.compute_inline(producer)
        except s_tir.ScheduleError:
            return None
    for block in caches + [acc, init, mm]:
        if any(loop_extent(sch.get(lp)) < 0 for lp in sch.get_loops(block)):
            return None  # a region TVM could not bound (padded, clamped reads): the safe schedule
    for cache in caches:
        cache_loops = sch.get_loops(cache)
        sch.vectorize(cache_loops[-1])
        unroll_constant(sch, cache_loops[4:-1])
    unroll_constant(sch, sch.get_loops(mm)[4:])
    return sch.mod["main"].with_attrs(func.attrs) if func.attrs is not None else sch.mod["main"]


def token_matmul_rule(func: tirx.PrimFunc, target) -> Optional[tirx.PrimFunc]:
    """The schedule rule (:func:`schedule_token_matmul`, at most the target's threads per group)."""
    from .apply import max_threads

    return schedule_token_matmul(func, max_threads(target))
