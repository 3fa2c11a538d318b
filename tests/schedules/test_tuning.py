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


def _record(workload: str, config: dict, api="opencl", memory="texture"):
    from relax_vk.schedules.tuning import Record

    return Record(api, memory, workload, config, ms=0.01)


def test_an_untuned_conv_takes_what_its_nearest_tuned_neighbours_chose(db_dir):
    """A workload the database lacks gets the configuration that most of its nearest records (same
    API, memory kind and kernel) won with, if it is one of its own candidates; else the default."""
    from relax_vk.schedules.conv2d import Conv2dConfig, default_config, learned_config, parse_workload

    one = {"px": 1, "oc": 1, "threads": 32}
    db = Database("my-gpu")
    for w in ("conv_n1_oc192_h1_w196_ic192_k1x1_s1_d1", "conv_n1_oc384_h1_w196_ic384_k1x1_s1_d1", "conv_n1_oc768_h1_w196_ic192_k1x1_s1_d1"):
        db.add(_record(w, one))
    db.add(_record("conv_n1_oc64_h56_w56_ic64_k1x1_s1_d1", {"px": 4, "oc": 2, "threads": 64}))  # far away: outvoted
    db.add(_record("conv_n1_oc192_h1_w197_ic768_k3x3_s1_d1", {"px": 2, "oc": 2, "threads": 64}))  # another kernel size
    db.add(_record("conv_n1_oc192_h1_w197_ic768_k1x1_s1_d1", {"px": 2, "oc": 4, "threads": 128}, api="vulkan"))  # another API
    db.save(str(db_dir / "my-gpu.json"))
    w = parse_workload("conv_n1_oc192_h1_w197_ic768_k1x1_s1_d1")
    assert w is not None and w.key() == "conv_n1_oc192_h1_w197_ic768_k1x1_s1_d1" and parse_workload("winograd_f2") is None
    assert learned_config("my-gpu", "opencl", "texture", w) == Conv2dConfig(**one) != default_config(w)
    assert learned_config("my-gpu", "opencl", "buffer", w) is None  # no record of that memory kind
    assert learned_config("my-gpu", "vulkan", "texture", w) is None
    # a neighbour's configuration that is no candidate of this workload (4 texels do not divide 3) is not counted
    odd = parse_workload("conv_n1_oc12_h1_w197_ic768_k1x1_s1_d1")
    db.add(_record("conv_n1_oc16_h1_w197_ic768_k1x1_s1_d1", {"px": 1, "oc": 4, "threads": 32}, memory="buffer"))
    db.save(str(db_dir / "my-gpu.json"))
    from relax_vk.schedules.tuning import clear_cache

    clear_cache()
    assert learned_config("my-gpu", "opencl", "buffer", odd) is None
    # and a build says where the configuration came from
    import torch

    from relax_vk.frontends import from_torch

    x = torch.randn(1, 768, 1, 197)
    compiled = relax_vk.build(from_torch(torch.nn.Conv2d(768, 192, 1).eval(), (x,)), relax_vk.target.opencl(device_name="my-gpu"))
    (conv,) = [k for k in compiled.artifact().program["kernels"] if k.get("workload")]
    assert conv["workload"] == w.key() and conv["config"] == Conv2dConfig(**one).key() and conv["config_source"] == "learned"


def test_a_conv_with_weights_in_a_buffer_takes_the_texture_record_of_the_same_conv(db_dir, pocl):
    """A conv whose weights are in a buffer (integer weights, or weights past the texture limit;
    here forced with ``weights_in_texture=False``) and which has no record of its own memory kind
    takes the all-texture record of the same workload ("learned"); its own record wins when there
    is one ("tuned"); and the kernel is right on pocl."""
    import numpy as np
    import torch

    from relax_vk.frontends import from_torch
    from relax_vk.runtime import load
    from relax_vk.schedules.conv2d import Conv2dConfig, default_config, parse_workload
    from relax_vk.schedules.tuning import clear_cache

    key = "conv_n1_oc16_h6_w6_ic8_k3x3_s1_d1"
    texture, own = {"px": 2, "oc": 2, "threads": 32}, {"px": 1, "oc": 1, "threads": 64}
    assert default_config(parse_workload(key)) not in (Conv2dConfig(**texture), Conv2dConfig(**own))
    model, x = torch.nn.Conv2d(8, 16, 3, padding=1).eval(), torch.randn(1, 8, 6, 6)
    with torch.no_grad():
        want = model(x).numpy()
    mod = from_torch(model, (x,))

    def build():
        clear_cache()
        compiled = relax_vk.build(mod, relax_vk.target.opencl(device_name="my-gpu"), options=ScopeOptions(weights_in_texture=False))
        artifact = compiled.artifact()
        (conv,) = [k for k in artifact.program["kernels"] if k.get("workload")]
        assert conv["workload"] == key and conv["memory"] == "texture+wbuf"
        np.testing.assert_allclose(load(artifact, device=pocl).run([x.numpy()])[0], want, rtol=1e-4, atol=1e-4)
        return conv["config"], conv["config_source"]

    db = Database("my-gpu")
    db.add(_record(key, texture))
    db.save(str(db_dir / "my-gpu.json"))
    assert build() == (Conv2dConfig(**texture).key(), "learned")
    db.add(_record(key, own, memory="texture+wbuf"))
    db.save(str(db_dir / "my-gpu.json"))
    assert build() == (Conv2dConfig(**own).key(), "tuned")
