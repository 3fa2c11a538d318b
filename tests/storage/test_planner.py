"""Storage planning per pool (relax_vk.storage.planner)."""

from relax_vk.storage.lifetimes import Lifetime, lower_bound
from relax_vk.storage.planner import plan_storage


def _mixed():
    out = []
    for i in range(3):  # two halves live together, then one whole: only an arena packs them into one
        out += [Lifetime(3 * i, f"a{i}", 3 * i, 3 * i + 1, 2048), Lifetime(3 * i + 1, f"b{i}", 3 * i, 3 * i + 1, 2048),
                Lifetime(3 * i + 2, f"c{i}", 3 * i + 2, 3 * i + 2, 4096)]  # fmt: skip
    out.append(Lifetime(9, "d", 9, 9, 512))
    for i in range(10):
        out.append(Lifetime(10 + i, f"t{i}", i, i + 1, 4 * 4 * 4 * 16, (4, 4, 4), "float32"))
    out.append(Lifetime(20, "h", 3, 4, 4 * 4 * 4 * 8, (4, 4, 4), "float16"))
    return out


def test_pools_never_mix_and_every_tensor_has_one_allocation():
    lts = _mixed()
    plan = plan_storage(lts)
    by_id = {lt.tensor: lt for lt in lts}
    assert sorted(plan.assignment) == sorted(by_id)
    for obj in plan.objects:
        assert {by_id[t].pool for t in obj.tensors} == {obj.pool}
    assert set(plan.strategies) == {"buffer", "texture:float32", "texture:float16"}
    assert plan.strategies["buffer"].startswith("arena")  # buffers at offsets of one arena
    assert set(plan.offsets) == set(range(10))
    assert plan.lower_bound_bytes == lower_bound(lts)
    assert plan.with_reuse_bytes < plan.without_reuse_bytes == sum(lt.bytes for lt in lts)
    numbers = plan.to_json()
    assert numbers["pools"]["buffer"]["with_reuse_bytes"] == 4096 == numbers["pools"]["buffer"]["lower_bound_bytes"]
    assert numbers["shared_objects"] == len(plan.objects) == 1 + 2 + 1


def test_reuse_off_gives_every_tensor_its_own_allocation():
    lts = _mixed()
    plan = plan_storage(lts, reuse=False)
    assert len(plan.objects) == len(lts) and plan.with_reuse_bytes == plan.without_reuse_bytes
    assert set(plan.strategies.values()) == {"none"}


def test_an_arena_larger_than_the_device_allocates_falls_back_to_shared_buffers():
    lts = [Lifetime(i, f"b{i}", 0, 0, 1000) for i in range(4)]  # all live at once: the arena needs 4 x 1024
    plan = plan_storage(lts, arena_limit=2048)
    assert not plan.strategies["buffer"].startswith("arena")
    assert all(o.bytes <= 2048 for o in plan.objects) and len(plan.objects) == 4
    assert not plan.offsets


def test_summary_names_the_three_numbers():
    text = plan_storage(_mixed()).summary()
    assert "without reuse" in text and "with reuse" in text and "lower bound" in text


def test_private_pools_keep_an_allocation_per_tensor():
    lts = _mixed()
    plan = plan_storage(lts, private=("buffer",))
    assert plan.strategies["buffer"] == "none (device policy)"
    buffers = [o for o in plan.objects if o.pool == "buffer"]
    assert len(buffers) == 10 and all(len(o.tensors) == 1 for o in buffers)
    assert len([o for o in plan.objects if o.pool == "texture:float32"]) == 2  # the other pools still share
