"""Textures placed side by side: tensors as rectangles at origins of shared images.

A *placed* texture (:mod:`relax_vk.codegen.texture_origins`: its kernels address it at an origin
``(x0, y0)``) is a ``w x h`` rectangle of texels in one layer of an image. Tensors whose lifetimes
overlap may share an image as long as their rectangles do not; tensors that are never live together
may overlap freely. A tensor a step writes never shares an image with another tensor that step
binds: WebGPU refuses a texture bound for reading and for storage in one dispatch, and OpenCL
leaves an image read and written by one kernel undefined. Tensors a step only reads may share one
(:func:`relax_vk.storage.lifetimes.partners_of`). This is the offset arena of :mod:`relax_vk.storage.offsets` in two dimensions:
each image grows right and down as tensors are placed, and the cost is its area.

:func:`pack` tries each placement order of :mod:`relax_vk.storage.lifetimes` (largest first, the
busiest steps first, execution order), then shuffled orders of a fixed seed; each tensor goes to
the position of an existing image that grows it least (positions: the corners that the right and
bottom edges of the tensors live with it make, and the origin), or opens an image of its own when
every image would grow by at least its own size. The cheapest order wins. Images never pass ``limit`` texels in either direction.
Standard library only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

from .lifetimes import Lifetime, by_breadth, by_size, image_bytes, in_order

Origin = Tuple[int, int]


@dataclass
class Sheet:
    """One image being planned: its extents and the rectangles placed in it."""

    dtype: str
    width: int = 0
    height: int = 0
    placed: List[Tuple[Lifetime, int, int]] = field(default_factory=list)  # (tensor, x0, y0)

    @property
    def bytes(self) -> int:
        return image_bytes((self.width, self.height, 1), self.dtype) if self.width else 0

    def position(self, lt: Lifetime, limit: int):
        """``(growth in bytes, (x0, y0))`` of the cheapest free position for ``lt``, or None."""
        w, h = rect(lt)
        live = [(q, qx, qy) for q, qx, qy in self.placed if q.overlaps(lt)]
        if any(q.tensor in lt.partners for q, _, _ in live):
            return None  # a kernel binds both and writes one: one image may not be read and written in one dispatch
        xs = sorted({0} | {qx + rect(q)[0] for q, qx, _ in live})
        ys = sorted({0} | {qy + rect(q)[1] for q, _, qy in live})
        best = None
        for y0 in ys:
            for x0 in xs:
                if x0 + w > limit or y0 + h > limit:
                    continue
                if any(x0 < qx + rect(q)[0] and qx < x0 + w and y0 < qy + rect(q)[1] and qy < y0 + h for q, qx, qy in live):
                    continue
                grown = image_bytes((max(self.width, x0 + w), max(self.height, y0 + h), 1), self.dtype) - self.bytes
                key = (grown, y0, x0)
                if best is None or key < best[0]:
                    best = (key, (x0, y0))
        return None if best is None else (best[0][0], best[1])

    def add(self, lt: Lifetime, origin: Origin) -> None:
        w, h = rect(lt)
        self.width, self.height = max(self.width, origin[0] + w), max(self.height, origin[1] + h)
        self.placed.append((lt, origin[0], origin[1]))


def rect(lt: Lifetime) -> Tuple[int, int]:
    """A placed tensor's rectangle ``(w, h)`` (its image has one layer)."""
    w, h, layers = lt.image
    if layers != 1:
        raise ValueError(f"{lt.name}: a placed texture has one layer, not {layers}")
    return w, h


def _pack_in(order: Sequence[Lifetime], limit: int) -> List[Sheet]:
    sheets: List[Sheet] = []
    for lt in order:
        best = None
        for sheet in sheets:
            found = sheet.position(lt, limit)
            if found is None or found[0] >= lt.bytes:
                continue
            if best is None or (found[0], sheet.bytes) < (best[0], best[1].bytes):
                best = (found[0], sheet, found[1])
        if best is None:
            sheet = Sheet(lt.dtype)
            sheets.append(sheet)
            sheet.add(lt, (0, 0))
        else:
            best[1].add(lt, best[2])
    return sheets


#: placements in shuffled orders tried after the three named ones, at most (fewer for larger
#: pools: about SHUFFLE_WORK tensors placed in all); seeded, so a plan is the same every build
SHUFFLES = 64
SHUFFLE_WORK = 4096


def pack(lifetimes: Sequence[Lifetime], limit: int) -> Tuple[str, List[Sheet]]:
    """``(order name, sheets)``: the cheapest placement of ``lifetimes`` (placed textures of one
    texel format) over the three orders (module docstring), then over shuffled orders of a fixed
    seed (``rectangles_shuffled`` when one of those wins: mobilenet_v2's texture plan holds 1.29x
    the bound with them, 1.35x without)."""
    best_name, best, best_bytes = "", [], None

    def consider(name, order):
        nonlocal best_name, best, best_bytes
        sheets = _pack_in(order, limit)
        cost = sum(s.bytes for s in sheets)
        if best_bytes is None or cost < best_bytes:
            best_name, best, best_bytes = name, sheets, cost

    for name, order in (("by_size", by_size), ("by_breadth", by_breadth), ("in_order", in_order)):
        consider(name, order(lifetimes))
    rng = random.Random(len(lifetimes))
    by_id = sorted(lifetimes, key=lambda t: t.tensor)
    for _ in range(min(SHUFFLES, SHUFFLE_WORK // max(len(lifetimes), 1)) if len(lifetimes) > 2 else 0):
        order = list(by_id)
        rng.shuffle(order)
        consider("shuffled", order)
    return f"rectangles_{best_name}", best


def origins(sheets: Sequence[Sheet]) -> Dict[int, Origin]:
    """``tensor id -> (x0, y0)`` of a placement."""
    return {lt.tensor: (x0, y0) for sheet in sheets for lt, x0, y0 in sheet.placed}
