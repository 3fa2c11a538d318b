"""Storage planning: tensors whose lifetimes do not overlap share one allocation.

``plan_storage(lifetimes)`` splits the tensors into pools (buffers; textures per texel format),
runs every shared-object strategy of :mod:`relax_vk.storage.strategies` on each pool (the three
greedy ones always, the exact search on pools small enough) and, for buffers, every arena order
of :mod:`relax_vk.storage.offsets`, and keeps the cheapest per pool. The :class:`StoragePlan` it
returns holds the objects (allocations), which tensor uses which at what byte offset, the
strategy that won each pool, and the three numbers a memory report needs: bytes without reuse
(every tensor its own allocation), with reuse (the objects) and the lower bound (the most bytes
live at once).

An image cannot be bound at an offset, and neither OpenCL images without
``cl_khr_image2d_from_buffer`` nor WebGPU textures can alias two images' memory. Textures whose
kernels address them at an origin (*placed*, :mod:`relax_vk.codegen.texture_origins`) share images
side by side as rectangles (:mod:`relax_vk.storage.rectangles`), so a texture plan whose tensors
change extents from layer to layer (a downsampling CNN: 56x56x16, then 28x28x32 texels) lands near
the lower bound; other textures share whole images, and stay above it by what their extents
waste. Per-pool numbers in :meth:`StoragePlan.to_json` show where. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from .lifetimes import Lifetime, lower_bound
from .offsets import ALIGNMENT, best_arena
from .rectangles import origins as origins_of
from .rectangles import pack
from .strategies import GREEDY, Group, exact, total


@dataclass
class SharedObject:
    """One allocation: a buffer of ``bytes`` or an image of ``image`` texels of ``dtype``."""

    id: int
    pool: str
    bytes: int
    image: Optional[Tuple[int, int, int]]
    dtype: Optional[str]
    tensors: List[int] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"id": self.id, "bytes": self.bytes, "image": list(self.image) if self.image else None, "dtype": self.dtype,
                "tensors": list(self.tensors)}  # fmt: skip


@dataclass
class StoragePlan:
    """Shared objects for a set of lifetimes and the numbers that judge them."""

    objects: List[SharedObject]
    assignment: Dict[int, int]  # tensor id -> object id
    strategies: Dict[str, str]  # pool -> the strategy whose grouping was kept
    without_reuse_bytes: int
    with_reuse_bytes: int
    lower_bound_bytes: int
    offsets: Dict[int, int] = field(default_factory=dict)  # tensor id -> byte offset in its object (arenas)
    pools: Dict[str, dict] = field(default_factory=dict)  # pool -> its own three numbers
    origins: Dict[int, Tuple[int, int]] = field(default_factory=dict)  # placed texture id -> (x0, y0) in its image

    @property
    def ratio(self) -> float:
        """Bytes with reuse over the lower bound (1.0 is optimal; 0 tensors: 1.0)."""
        return self.with_reuse_bytes / self.lower_bound_bytes if self.lower_bound_bytes else 1.0

    def to_json(self) -> dict:
        return {
            "without_reuse_bytes": self.without_reuse_bytes,
            "with_reuse_bytes": self.with_reuse_bytes,
            "lower_bound_bytes": self.lower_bound_bytes,
            "ratio_to_lower_bound": round(self.ratio, 4),
            "shared_objects": len(self.objects),
            "strategies": dict(self.strategies),
            "pools": {pool: dict(numbers) for pool, numbers in self.pools.items()},
        }

    def summary(self) -> str:
        """One line: the three numbers, the ratio and the winning strategies."""
        mib = 1 << 20
        strategies = ", ".join(f"{pool} {name}" for pool, name in sorted(self.strategies.items()))
        return (
            f"intermediate memory: {self.without_reuse_bytes / mib:.2f} MiB without reuse, {self.with_reuse_bytes / mib:.2f} MiB "
            f"with reuse ({len(self.objects)} shared objects; {strategies or 'nothing to share'}), lower bound "
            f"{self.lower_bound_bytes / mib:.2f} MiB ({self.ratio:.2f}x)"
        )


def best_grouping(lifetimes: Sequence[Lifetime]) -> Tuple[str, List[Group]]:
    """``(strategy name, groups)``: the cheapest grouping of one pool's lifetimes."""
    name, groups = "", []
    for strategy, run in GREEDY.items():
        candidate = run(lifetimes)
        if not name or total(candidate) < total(groups):
            name, groups = strategy, candidate
    better, proven = exact(lifetimes, total(groups))
    if better is not None and total(better) < total(groups):
        return ("exact" if proven else "exact (search budget)"), better
    if proven:
        name += " (optimal)"
    return name, groups


def _objects_of_groups(pool: str, groups: Sequence[Group]) -> List[SharedObject]:
    return [
        SharedObject(0, pool, g.bytes, g.image, g.members[0].dtype if g.image else None, sorted(m.tensor for m in g.members))
        for g in sorted(groups, key=lambda g: min(m.first for m in g.members))
    ]


def _plan_pool(pool: str, lifetimes: Sequence[Lifetime], reuse: bool, arenas: bool, alignment: int, arena_limit: Optional[int],
               image_limit: int):  # fmt: skip
    """``(strategy, objects, offsets, origins)`` of one pool."""
    if not reuse:
        return "none", [SharedObject(0, pool, lt.bytes, lt.image, lt.dtype if lt.image else None, [lt.tensor]) for lt in lifetimes], {}, {}
    placed = [lt for lt in lifetimes if lt.placed]
    if placed:  # rectangles side by side (the rest by shared objects), unless whole images for all take less
        name, sheets = pack(placed, image_limit)
        objects = [SharedObject(0, pool, s.bytes, (s.width, s.height, 1), s.dtype, sorted(lt.tensor for lt, _, _ in s.placed)) for s in sheets]
        rest = [lt for lt in lifetimes if not lt.placed]
        if rest:
            rest_name, groups = best_grouping(rest)
            name, objects = f"{name} + {rest_name}", objects + _objects_of_groups(pool, groups)
        whole_name, whole = best_grouping(lifetimes)
        if total(whole) < sum(o.bytes for o in objects):
            return whole_name, _objects_of_groups(pool, whole), {}, {}
        return name, objects, {}, origins_of(sheets)
    name, groups = best_grouping(lifetimes)
    objects = _objects_of_groups(pool, groups)
    if pool == "buffer" and arenas:
        arena_name, offsets, size = best_arena(lifetimes, alignment)
        if size < total(groups) and (arena_limit is None or size <= arena_limit):
            return arena_name, [SharedObject(0, pool, size, None, None, sorted(lt.tensor for lt in lifetimes))], offsets, {}
    return name, objects, {}, {}


def plan_storage(
    lifetimes: Sequence[Lifetime],
    reuse: bool = True,
    arenas: bool = True,
    alignment: int = ALIGNMENT,
    arena_limit: Optional[int] = None,
    private: Sequence[str] = (),
    image_limit: int = 16384,
) -> StoragePlan:
    """The allocations for ``lifetimes`` (see the module docstring). ``reuse=False``: one object
    per tensor, the plan of a runtime that never reuses memory (for comparisons); ``arenas``:
    whether buffers may sit at offsets (``alignment`` bytes) of one allocation, at most
    ``arena_limit`` bytes large (the device's largest allocation; else shared objects);
    ``private``: pools whose tensors keep an allocation each (a device measured to slow down when
    they share: :func:`relax_vk.schedules.tuning.storage_policy`); ``image_limit``: the largest
    width and height of an image that placed textures share (:mod:`relax_vk.storage.rectangles`)."""
    pools: Dict[str, List[Lifetime]] = {}
    for lt in lifetimes:
        pools.setdefault(lt.pool, []).append(lt)
    objects: List[SharedObject] = []
    assignment: Dict[int, int] = {}
    offsets: Dict[int, int] = {}
    origins: Dict[int, Tuple[int, int]] = {}
    strategies: Dict[str, str] = {}
    numbers: Dict[str, dict] = {}
    for pool in sorted(pools):
        strategies[pool], pool_objects, pool_offsets, pool_origins = _plan_pool(
            pool, pools[pool], reuse and pool not in private, arenas, alignment, arena_limit, image_limit
        )
        origins.update(pool_origins)
        if reuse and pool in private:
            strategies[pool] = "none (device policy)"
        offsets.update(pool_offsets)
        for obj in pool_objects:
            obj.id = len(objects)
            objects.append(obj)
            for tid in obj.tensors:
                assignment[tid] = obj.id
        numbers[pool] = {
            "without_reuse_bytes": sum(lt.bytes for lt in pools[pool]),
            "with_reuse_bytes": sum(o.bytes for o in pool_objects),
            "lower_bound_bytes": lower_bound(pools[pool]),
        }
    return StoragePlan(
        objects, assignment, strategies, sum(lt.bytes for lt in lifetimes), sum(o.bytes for o in objects), lower_bound(lifetimes),
        offsets, numbers, origins,
    )  # fmt: skip
