"""Buffer arenas: every shareable buffer at an offset inside one allocation.

Buffers need not share whole allocations: both APIs bind a buffer range (an OpenCL sub-buffer,
a WebGPU binding offset), so a buffer tensor can live at any suitably aligned offset of one
arena, the scheme of TFLite's offset calculation (``memory_management`` ``GreedyBySize`` for
offsets) and of TVM's ``StaticPlanBlockMemory`` storage tokens. Each strategy places tensors one
after another at the lowest aligned offset (best fit among the gaps) where it overlaps no
already placed tensor that is live at the same time; they differ in the order: largest first,
the widest steps first (largest first within a step), or execution order. The arena is as large
as the highest end. ``ALIGNMENT`` (bytes) is the largest offset alignment the targets ask for:
WebGPU/Vulkan at most 256 bytes, OpenCL ``CL_DEVICE_MEM_BASE_ADDR_ALIGN`` 4096 bits (512
bytes) on NVIDIA, 1024 bits on pocl. Standard library only.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Sequence, Tuple

from .lifetimes import Lifetime, by_breadth, by_size, in_order

ALIGNMENT = 512


def _align(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def place(order: Sequence[Lifetime], alignment: int = ALIGNMENT) -> Dict[int, int]:
    """``tensor id -> offset``: each tensor, in ``order``, at the start of the smallest gap
    between tensors live at the same time that holds it (the end of them all if none does)."""
    placed: List[Tuple[Lifetime, int]] = []
    offsets: Dict[int, int] = {}
    for lt in order:
        busy = sorted((off, off + other.bytes) for other, off in placed if other.overlaps(lt))
        best, best_gap, cursor = None, None, 0
        for start, end in busy:
            gap = start - cursor
            if gap >= lt.bytes and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, _align(end, alignment))
        offset = best if best is not None else cursor
        offsets[lt.tensor] = offset
        placed.append((lt, offset))
    return offsets


def arena_bytes(lifetimes: Sequence[Lifetime], offsets: Dict[int, int]) -> int:
    return max((offsets[lt.tensor] + lt.bytes for lt in lifetimes), default=0)


#: orders tried for arena placement (the first of equally small arenas is kept)
ORDERS: Dict[str, Callable[[Sequence[Lifetime]], List[Lifetime]]] = {
    "arena_by_size": by_size,
    "arena_by_breadth": by_breadth,
    "arena_in_order": in_order,
}


def best_arena(lifetimes: Sequence[Lifetime], alignment: int = ALIGNMENT) -> Tuple[str, Dict[int, int], int]:
    """``(strategy, offsets, arena bytes)`` of the smallest arena the orders give."""
    best = None
    for name, order in ORDERS.items():
        offsets = place(order(lifetimes), alignment)
        size = arena_bytes(lifetimes, offsets)
        if best is None or size < best[2]:
            best = (name, offsets, size)
    assert best is not None
    return best
