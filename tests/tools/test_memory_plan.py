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
