import json

import relax_vk
from relax_vk.models import build_example

from helpers import scoped

KEYS = {"tensors", "texture_bytes", "buffer_bytes", "copies", "copy_bytes"}
TENSOR_KEYS = {"name", "shape", "dtype", "scope", "bytes"}


def test_json_contract():
    data = relax_vk.plan(scoped(build_example("rfc-conv2d"))).to_json()
    assert KEYS <= set(data)
    for t in data["tensors"]:
        assert TENSOR_KEYS <= set(t)
    json.dumps(data)
    by_name = {t["name"]: t for t in data["tensors"]}
    assert by_name["x"]["scope"] == "global" and by_name["x"]["bytes"] == 2 * 64 * 56 * 56 * 4
    textures = [t for t in data["tensors"] if t["scope"] != "global"]
    assert {t["scope"] for t in textures} == {"global.texture", "global.texture-weight"}
    assert data["texture_bytes"] == sum(t["bytes"] for t in textures)
    assert data["buffer_bytes"] == sum(t["bytes"] for t in data["tensors"] if t["scope"] == "global")
    act = [t for t in textures if t["scope"] == "global.texture"][0]
    assert act["shape"] == [2, 16, 56, 56, 4] and act["image"] == [56, 56, 32]


def test_model_inputs_and_outputs_are_buffers_for_the_abi():
    """Parameters and the tensors ``main`` returns (seen through its aliases) say so; nothing else
    is called an output."""
    entries = relax_vk.plan(scoped(build_example("rfc-conv2d"))).tensors
    reasons = {t.name: t.reason for t in entries}
    assert reasons["x"] == reasons["w"] == "model input: buffer ABI"
    outputs = [t for t in entries if t.reason == "model output: buffer ABI"]
    assert [t.shape for t in outputs] == [[2, 32, 54, 54]] and outputs[0].kind == "tensor"
    mixed = relax_vk.plan(scoped(build_example("mixed-consumers"))).tensors
    buffers = [t for t in mixed if t.kind == "tensor" and t.scope == "global"]
    assert [t.reason for t in buffers].count("model output: buffer ABI") == 1
    assert sum(t.reason.startswith("not a packed float tensor") for t in buffers) == 2  # the softmax's NCHW tensors


def test_copies_are_counted():
    data = relax_vk.plan(scoped(build_example("mixed-consumers"), registry=relax_vk.rfc_registry())).to_json()
    assert data["copies"] == 1
    copy = [t for t in data["tensors"] if t["kind"] == "copy"]
    assert len(copy) == 1 and data["copy_bytes"] == copy[0]["bytes"] == 1 * 4 * 20 * 20 * 4 * 4


def test_plan_scopes_an_unscoped_module_first():
    direct = relax_vk.plan(build_example("rfc-conv2d")).to_json()
    assert direct == relax_vk.plan(scoped(build_example("rfc-conv2d"))).to_json()


def test_table_lists_tensors_and_totals():
    text = relax_vk.plan(scoped(build_example("rfc-conv2d"))).table()
    assert "global.texture-weight" in text and "576,8,1" in text
    assert "copies: 0" in text and "texture share:" in text


def test_memory_section_reports_reuse_and_the_lower_bound():
    """conv20: a chain of same-shape textures with residual adds; storage planning gives the
    intermediates a few shared images, at the lower bound, and each tensor says which it uses."""
    plan = relax_vk.plan(scoped(build_example("conv20")))
    data = plan.to_json()["memory"]
    assert {"without_reuse_bytes", "with_reuse_bytes", "lower_bound_bytes", "shared_objects", "strategies", "pools"} <= set(data)
    assert data["lower_bound_bytes"] <= data["with_reuse_bytes"] < data["without_reuse_bytes"] / 4
    assert data["with_reuse_bytes"] == data["lower_bound_bytes"]  # same-shape images: optimal
    shared = [t for t in plan.tensors if t.object is not None]
    assert shared and all(t.kind in ("tensor", "copy") and t.reason != "model output: buffer ABI" for t in shared)
    assert len({t.object for t in shared}) == data["shared_objects"] < len(shared)
    assert all(t.object is None for t in plan.tensors if t.kind in ("param", "constant"))
    text = plan.table()
    assert "without reuse" in text and "lower bound" in text and "#0" in text


def test_compiled_plan_describes_the_lowered_program():
    compiled = relax_vk.build(build_example("residual"))
    memory = compiled.plan().to_json()["memory"]
    artifact = compiled.artifact().program["memory"]
    # the same fused calls: the same numbers as the artifact's storage planning (no workspaces here)
    assert {k: memory[k] for k in ("without_reuse_bytes", "with_reuse_bytes", "lower_bound_bytes")} == {
        k: artifact[k] for k in ("without_reuse_bytes", "with_reuse_bytes", "lower_bound_bytes")
    }
