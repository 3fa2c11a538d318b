"""Shared-object strategies and buffer arenas (relax_vk.storage.strategies, relax_vk.storage.offsets)."""

import itertools
import random

import pytest

from relax_vk.storage.lifetimes import Lifetime, lower_bound
from relax_vk.storage.offsets import ORDERS, arena_bytes, best_arena, place
from relax_vk.storage.strategies import GREEDY, exact, total


def _random_lifetimes(seed, n, textures=False):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        first = rng.randrange(0, 2 * n)
        last = first + rng.randrange(0, 5)
        if textures:
            image = (rng.choice([2, 4, 8]), rng.choice([2, 4, 8]), rng.choice([1, 2, 4, 8]))
            out.append(Lifetime(i, f"t{i}", first, last, image[0] * image[1] * image[2] * 16, image, "float32"))
        else:
            out.append(Lifetime(i, f"t{i}", first, last, rng.choice([64, 128, 256, 1000, 4096])))
    return out


def _check_groups(groups, lifetimes):
    members = sorted(m.tensor for g in groups for m in g.members)
    assert members == sorted(lt.tensor for lt in lifetimes)
    for g in groups:
        for a, b in itertools.combinations(g.members, 2):
            assert not a.overlaps(b), f"{a.name} and {b.name} share while both live"
        for m in g.members:
            if m.image is None:
                assert m.bytes <= g.bytes
            else:
                assert all(x <= y for x, y in zip(m.image, g.image))


@pytest.mark.parametrize("textures", [False, True], ids=["buffers", "textures"])
@pytest.mark.parametrize("strategy", sorted(GREEDY))
def test_greedy_groupings_are_safe_and_between_the_bounds(strategy, textures):
    for seed in range(20):
        lts = _random_lifetimes(seed, 30, textures)
        groups = GREEDY[strategy](lts)
        _check_groups(groups, lts)
        assert lower_bound(lts) <= total(groups) <= sum(lt.bytes for lt in lts)


def test_exact_search_is_never_worse_than_greedy_and_reaches_the_bound_when_it_can():
    for seed in range(15):
        lts = _random_lifetimes(seed, 9, textures=seed % 2 == 1)
        best_greedy = min(total(run(lts)) for run in GREEDY.values())
        groups, proven = exact(lts)
        assert proven and groups is not None
        _check_groups(groups, lts)
        assert lower_bound(lts) <= total(groups) <= best_greedy


def test_exact_search_finds_what_every_greedy_strategy_misses():
    spans = [(4, 6, 50), (3, 4, 20), (0, 1, 40), (1, 3, 40), (2, 4, 10)]  # (found by a random search)
    lts = [Lifetime(i, f"t{i}", first, last, nbytes) for i, (first, last, nbytes) in enumerate(spans)]
    assert min(total(run(lts)) for run in GREEDY.values()) == 110
    groups, proven = exact(lts)
    assert proven and total(groups) == 100
    _check_groups(groups, lts)


def test_exact_search_gives_up_on_large_pools():
    groups, proven = exact(_random_lifetimes(0, 40))
    assert groups is None and not proven


def test_textures_share_only_images_that_hold_both():
    a = Lifetime(0, "a", 0, 0, 8 * 8 * 4 * 16, (8, 8, 4), "float32")
    b = Lifetime(1, "b", 1, 1, 4 * 4 * 8 * 16, (4, 4, 8), "float32")  # half of a, but twice its layers
    groups = GREEDY["greedy_by_size"]([a, b])
    # sharing would need an 8x8x8 image (a's bytes again): cheaper to allocate b alone
    assert len(groups) == 2 and total(groups) == a.bytes + b.bytes
    c = Lifetime(2, "c", 1, 1, 4 * 4 * 2 * 16, (4, 4, 2), "float32")
    groups = GREEDY["greedy_by_size"]([a, c])
    assert len(groups) == 1 and groups[0].image == (8, 8, 4)


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_arena_offsets_never_overlap_live_tensors_and_are_aligned(order):
    for seed in range(20):
        lts = _random_lifetimes(seed, 40)
        offsets = place(ORDERS[order](lts), alignment=256)
        for a, b in itertools.combinations(lts, 2):
            if a.overlaps(b):
                lo_a, lo_b = offsets[a.tensor], offsets[b.tensor]
                assert lo_a + a.bytes <= lo_b or lo_b + b.bytes <= lo_a, f"{a.name} and {b.name} overlap in time and bytes"
        assert all(off % 256 == 0 for off in offsets.values())
        assert arena_bytes(lts, offsets) >= lower_bound(lts)


def test_best_arena_reaches_the_lower_bound_on_a_chain():
    # a chain of layers (each reads the previous): two tensors live at a time, the arena holds two
    lts = [Lifetime(i, f"t{i}", i, i + 1, 4096 >> (i // 3)) for i in range(12)]  # shrinking, as a CNN's layers
    name, offsets, size = best_arena(lts, alignment=512)
    assert size == lower_bound(lts)
    assert name in ORDERS
