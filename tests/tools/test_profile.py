"""relax_vk.tools.profile: per-op times of the user's model that add up to the device time of
the same run, on OpenCL (pocl) and Vulkan (lavapipe)."""

import json
import sys

import numpy as np
import pytest

from relax_vk.tools.profile import Profile, profile, profile_session

pytest.importorskip("onnx")
from onnx_chain import APIS, chain_model, onnx_chain  # noqa: E402


@pytest.fixture(scope="module")
def model():
    return chain_model()


def _check_adds_up(p: Profile):
    total = sum(r["ms"] for r in p.ops)
    assert p.device_ms > 0
    assert abs(total - p.device_ms) <= 0.05 * p.device_ms  # the rows are the device time of that run
    busy = sum(k["ms"] for k in p.kernels)
    assert busy == pytest.approx(p.device_ms - p.idle_ms, rel=1e-6, abs=1e-9)
    assert sum(r["busy_ms"] for r in p.ops) == pytest.approx(busy, rel=1e-6, abs=1e-9)
    assert sum(k["gap_ms"] for k in p.kernels) == pytest.approx(p.idle_ms, rel=1e-6, abs=1e-9)
    assert all(r["kind"] != "idle" for r in p.ops)  # (every step has its start: the gaps are charged to steps)
    assert p.device_ms in p.device_ms_runs and len(p.device_ms_runs) == p.repeat
    assert p.host_ms == pytest.approx(max(p.wall_ms - p.device_ms, 0.0))


@pytest.mark.parametrize("target,device", APIS)
def test_ops_are_the_models_own_and_add_up_to_the_device_time(model, target, device):
    p = profile(model, device=device, target=target, repeat=3)
    _check_adds_up(p)
    rows = {r["name"]: r for r in p.ops if r["kind"] == "op"}
    assert set(rows) == {"first", "first_relu", "middle", "middle_relu", "last", "squash"}
    # conv + relu run as one kernel: its time is split evenly and each row names the other
    assert rows["first"]["fused_with"] == ["first_relu"] and rows["first_relu"]["fused_with"] == ["first"]
    assert rows["first"]["ms"] == pytest.approx(rows["first_relu"]["ms"])
    assert rows["first"]["kernels"] == rows["first_relu"]["kernels"]
    assert {r["kind"] for r in p.ops} <= {"op", "layout", "copy"}
    starts = [k["start_ms"] for k in p.kernels]
    assert starts == sorted(starts) and starts[0] == 0.0
    doc = json.loads(json.dumps(p.to_json()))
    assert {"device_ms", "ops", "host_ms", "wall_ms", "copies", "kernels"} <= set(doc)
    assert all({"name", "ms"} <= set(r) for r in doc["ops"])


@pytest.mark.parametrize("target,device", APIS)
def test_copies_between_memory_kinds_are_rows_of_their_own(target, device):
    from relax_vk.runtime import load
    from relax_vk.tools.profile import _device

    from runtime_helpers import copy_program

    session = load(copy_program((1, 8, 4, 4), "global.texture", target=target), device=_device(target, device), profile=True)
    p = profile_session(session, [np.ones((1, 8, 4, 4), np.float32)], repeat=2, model="copies")
    _check_adds_up(p)
    assert len(p.copies) == 2 and {c["dst_scope"] for c in p.copies} == {"global.texture", "global"}
    assert [r["kind"] for r in p.ops] == ["copy", "copy"]


def test_plot_writes_a_png_and_a_missing_extra_names_it(model, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    p = profile(model, device="pocl", repeat=1)
    path = tmp_path / "profile.png"
    p.plot(str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from relax_vk.core.extras import MissingExtra

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingExtra, match="notebook"):
        p.plot(str(tmp_path / "again.png"))


def test_table_lists_every_row_and_the_sum(model):
    p = profile(model, device="pocl", repeat=1)
    text = p.table()
    for r in p.ops:
        assert r["name"][:48] in text
    assert "sum of rows" in text and f"{p.device_ms:.3f}" in text


def test_cli_json(tmp_path, capsys):
    import onnx

    from relax_vk.tools.cli import main

    path = str(tmp_path / "chain.onnx")
    onnx.save(onnx_chain(), path)
    assert main(["profile", path, "--device", "lavapipe", "--backend", "vulkan", "--json", "--repeat", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["backend"] == "vulkan" and doc["repeat"] == 2
    assert abs(sum(r["ms"] for r in doc["ops"]) - doc["device_ms"]) <= 0.05 * doc["device_ms"]
    assert {r["name"] for r in doc["ops"] if r["kind"] == "op"} == {"first", "first_relu", "middle", "middle_relu", "last", "squash"}


def test_seeded_inputs_that_index_a_table_are_drawn_within_it():
    """run --check, profile and bisect without --inputs drew integers around 0, negative too; the
    session refused its own draw for an embedding's ids ("value -1 ... is outside 0..99")."""
    from relax_vk.tools.profile import seeded_inputs

    class Session:
        tensors = [{"shape": [3, 50], "dtype": "int64", "index_range": [0, 99]},
                   {"shape": [40, 2], "dtype": "int32", "index_range": [[-2, 1], [-4, 3]]}, {"shape": [4], "dtype": "int64"}]  # fmt: skip
        program = {"inputs": [0, 1, 2]}

    ids, tuples, plain = seeded_inputs(Session())
    assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() <= 99 and len(np.unique(ids)) > 10
    assert tuples[:, 0].min() >= -2 and tuples[:, 0].max() <= 1 and tuples[:, 1].min() >= -4 and tuples[:, 1].max() <= 3
    assert plain.dtype == np.int64
