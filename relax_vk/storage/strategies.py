"""Shared-object assignment strategies: which tensors of one pool share which allocation.

Each strategy takes the :class:`~relax_vk.storage.lifetimes.Lifetime` of one pool (all buffers, or
all textures of one texel format) and returns groups: every group becomes one allocation that
all its members use, so no two members of a group may have overlapping lifetimes. A group's cost
is the allocation it needs: the largest member for buffers; for textures the image whose width,
height and layers are each the largest member's (a 56x56x16 and a 28x28x32 image share a
56x56x32 one, twice the first). These are the shared-object strategies of TFLite's GPU delegate
(``memory_management/greedy_by_size``, ``greedy_by_breadth``, ``greedy_in_order``), the same idea
as ExecuTorch Vulkan's shared objects and TVM's texture pool, plus an exact branch-and-bound
search for pools small enough to search exhaustively.

A tensor joins the group it makes cheapest to grow (best fit among equals) and opens a new
group when growing any would cost as much as its own allocation; no strategy ever grows a
group by more than a fresh allocation would cost. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .lifetimes import Lifetime, by_breadth, by_size, image_bytes, in_order, lower_bound

#: the exact search runs on pools of at most this many tensors, visiting at most EXACT_NODES states
EXACT_MAX_TENSORS = 24
EXACT_NODES = 200_000


@dataclass
class Group:
    """One allocation being planned: its members and the extents that hold them all."""

    members: List[Lifetime] = field(default_factory=list)
    image: Optional[Tuple[int, int, int]] = None
    bytes: int = 0

    def fits_in_time(self, lt: Lifetime) -> bool:
        return not any(m.overlaps(lt) for m in self.members)

    def grown(self, lt: Lifetime) -> Tuple[Optional[Tuple[int, int, int]], int]:
        """The extents and bytes this group would need with ``lt`` added."""
        if lt.image is None:
            return None, max(self.bytes, lt.bytes)
        image = lt.image if self.image is None else tuple(max(a, b) for a, b in zip(self.image, lt.image))
        return image, image_bytes(image, lt.dtype)

    def add(self, lt: Lifetime) -> None:
        self.image, self.bytes = self.grown(lt)
        self.members.append(lt)


def total(groups: Sequence[Group]) -> int:
    return sum(g.bytes for g in groups)


def _place(groups: List[Group], lt: Lifetime, candidates: Optional[Sequence[Group]] = None) -> None:
    """Put ``lt`` in the group it grows least (ties: the smallest group, the best fit), or in a
    new group when every candidate would grow by at least ``lt``'s own bytes."""
    best, best_key = None, None
    for g in groups if candidates is None else candidates:
        if not g.fits_in_time(lt):
            continue
        growth = g.grown(lt)[1] - g.bytes
        if growth >= lt.bytes:
            continue
        key = (growth, g.bytes)
        if best_key is None or key < best_key:
            best, best_key = g, key
    if best is None:
        best = Group()
        groups.append(best)
    best.add(lt)


def greedy_by_size(lifetimes: Sequence[Lifetime]) -> List[Group]:
    """Largest tensor first, each into the group it grows least."""
    groups: List[Group] = []
    for lt in by_size(lifetimes):
        _place(groups, lt)
    return groups


def greedy_by_breadth(lifetimes: Sequence[Lifetime]) -> List[Group]:
    """The steps with the most live bytes first; at each, its unplaced tensors largest first."""
    groups: List[Group] = []
    for lt in by_breadth(lifetimes):
        _place(groups, lt)
    return groups


def greedy_in_order(lifetimes: Sequence[Lifetime]) -> List[Group]:
    """In execution order, each tensor into a group whose tensors have all died (best fit)."""
    groups: List[Group] = []
    for lt in in_order(lifetimes):
        free = [g for g in groups if all(m.last < lt.first for m in g.members)]
        _place(groups, lt, free)
    return groups


def exact(lifetimes: Sequence[Lifetime], bound: Optional[int] = None) -> Tuple[Optional[List[Group]], bool]:
    """``(grouping, proven)``: the cheapest grouping, by branch and bound over every partition
    (largest tensor first; a tensor joins a group it fits in time or opens one). ``bound``: the
    cost of a known grouping; the search only looks for cheaper ones, and the grouping is None
    when there is none (``proven``) or the search gave up: the pool has more than
    ``EXACT_MAX_TENSORS`` tensors or the search visited ``EXACT_NODES`` states (not ``proven``)."""
    order = by_size(lifetimes)
    if len(order) > EXACT_MAX_TENSORS:
        return None, False
    floor = lower_bound(order)
    best: Dict[str, object] = {"cost": bound if bound is not None else sum(t.bytes for t in order) + 1, "groups": None}
    nodes = [0]

    def search(i: int, groups: List[Group], cost: int) -> bool:  # False: out of budget
        nodes[0] += 1
        if nodes[0] > EXACT_NODES:
            return False
        if max(cost, floor) >= best["cost"]:
            return True
        if i == len(order):
            best["cost"] = cost
            best["groups"] = [Group(list(g.members), g.image, g.bytes) for g in groups]
            return True
        lt = order[i]
        options = []
        for g in groups:
            if g.fits_in_time(lt):
                options.append((g.grown(lt)[1] - g.bytes, id(g), g))
        options.sort(key=lambda o: o[:2])
        for growth, _, g in options:
            saved = (g.image, g.bytes)
            g.add(lt)
            ok = search(i + 1, groups, cost + growth)
            g.members.pop()
            g.image, g.bytes = saved
            if not ok:
                return False
        fresh = Group()
        fresh.add(lt)
        groups.append(fresh)
        ok = search(i + 1, groups, cost + lt.bytes)
        groups.pop()
        return ok

    proven = search(0, [], 0)
    return best["groups"], proven  # type: ignore[return-value]


#: the greedy strategies, tried in this order (the first of equally good groupings is kept)
GREEDY: Dict[str, Callable[[Sequence[Lifetime]], List[Group]]] = {
    "greedy_by_size": greedy_by_size,
    "greedy_by_breadth": greedy_by_breadth,
    "greedy_in_order": greedy_in_order,
}
