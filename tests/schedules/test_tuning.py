"""The tuning database's storage facts (relax_vk.schedules.tuning.storage_policy) and the storage
planning that follows them."""

import relax_vk
from relax_vk.core.options import ScopeOptions
from relax_vk.models import build_example
from relax_vk.schedules.tuning import Database, storage_policy


def test_storage_policy_round_trips_and_keeps_buffers_apart_on_that_api_only(db_dir):
    db = Database("my-gpu", storage={"opencl": {"reuse_buffers": False, "evidence": "measured"}})
    path = db.save(str(db_dir / "my-gpu.json"))
    assert Database.load(path).storage == db.storage
    assert storage_policy("my-gpu", "opencl")["reuse_buffers"] is False
    assert storage_policy("my-gpu", "vulkan") == {} and storage_policy(None, "opencl") == {}
    mod = build_example("residual")  # (a few convs: the policy does not depend on the model's size)
    strategies = {}
    for api in ("opencl", "vulkan"):
        make = relax_vk.target.vulkan if api == "vulkan" else relax_vk.target.opencl
        for prefer in ("buffer", "texture"):
            compiled = relax_vk.build(mod, make(device_name="my-gpu"), options=ScopeOptions(prefer=prefer))
            program = compiled.artifact().program
            strategies[api, prefer] = program["memory"]["strategies"]
            assert compiled.plan().to_json()["memory"]["strategies"] == strategies[api, prefer]  # the report says what runs
    assert strategies["opencl", "buffer"] == {"buffer": "none (device policy)"}
    assert strategies["vulkan", "buffer"]["buffer"] != "none (device policy)"
    assert strategies["opencl", "texture"]["texture:float32"].startswith(("rectangles", "greedy"))  # images still share
