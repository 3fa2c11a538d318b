"""relax-vk tune (relax_vk.tools.tune): candidates built here, checked and timed on a device, the
best kept in the tuning database; builds and the memory-kind decision then use it."""

import json

import pytest


import relax_vk
from relax_vk.core.limits import device_slug
from relax_vk.models import build_example
from relax_vk.passes.scope.choose_memory_kind import recorded
from relax_vk.runtime.measure import measure_bundle
from relax_vk.schedules.tuning import Database
from relax_vk.schedules.workloads import ConvSpec
from relax_vk.tools.cli import main
from relax_vk.tools.tune import candidate_module, import_results, write_bundle


def test_tune_on_pocl_then_build_uses_the_database(pocl, db_dir):
    # (direct candidates only: Winograd's compete in test_winograd_candidates_compete_for_the_conv_record,
    # and a build follows a Winograd record in tests/schedules/test_winograd.py)
    assert main(["tune", "conv20", "--device", "pocl", "--target", "opencl", "--threads", "64", "--repeat", "2",
                 "--no-winograd", "--db", str(db_dir)]) == 0  # fmt: skip
    slug = device_slug(pocl.name.strip())
    db = Database.load(str(db_dir / f"{slug}.json"))
    key = "conv_n1_oc32_h28_w28_ic32_k3x3_s1_d1"
    assert {(r.memory, r.workload) for r in db.records.values()} == {("texture", key), ("buffer", key)}
    # (a record counts its own case's candidates: F(4,3) with one workgroup size is a case of one)
    assert all(r.ms > 0 and r.candidates >= 1 for r in db.records.values())
    mod = build_example("conv20")
    for kind in ("texture", "buffer"):
        compiled = relax_vk.build(mod, target=relax_vk.target.opencl(device_name=pocl.name), options=relax_vk.ScopeOptions(prefer=kind))
        convs = [k for k in compiled.artifact().program["kernels"] if k.get("workload") == key]
        expected = db.best("opencl", kind, key).config  # the fastest candidate
        assert convs and all(k["config_source"] == "tuned" and k["memory"] == kind for k in convs)
        assert all(k["config"] == f"px{expected['px']}_oc{expected['oc']}_t{expected['threads']}" for k in convs)
    # prefer=auto: the database has every conv in both kinds, so the measured times decide
    scoped = relax_vk.scope_pipeline(relax_vk.target.opencl(device_name=pocl.name))(mod)
    decision = recorded(scoped)  # (a module carries the decision when measurements made it)
    faster = "buffer" if db.best("opencl", "buffer", key).ms < db.best("opencl", "texture", key).ms else "texture"
    assert decision.rule == "measured" and decision.kind == faster and decision.measured == decision.convs == 20


def test_measure_on_lavapipe_and_import(lavapipe, tmp_path, db_dir):
    spec = ConvSpec((1, 8, 6, 6), (8, 8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1)
    index = write_bundle([candidate_module(spec, 1)], str(tmp_path / "bundle"), apis=("vulkan",), memories=("texture",),
                         threads=(32,), log=lambda _line: None, winograd=False)  # fmt: skip
    assert [c["memory"] for c in index["cases"]] == ["texture"]
    results = measure_bundle(str(tmp_path / "bundle"), {"vulkan": lavapipe}, repeat=2, log=lambda _line: None)
    assert not results["failures"] and len(results["records"]) == 1
    candidates = results["results"][0]["candidates"]
    assert len(candidates) == len(index["cases"][0]["configs"]) and all(c["ok"] and c["max_err"] < 1e-4 for c in candidates)
    summary = import_results(json.loads(json.dumps(results)), str(db_dir))
    assert list(summary.values()) == [(1, 1)]


def test_a_wrong_candidate_is_never_kept(tmp_path, pocl):
    spec = ConvSpec((1, 4, 5, 5), (4, 4, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1)
    write_bundle([candidate_module(spec, 1)], str(tmp_path / "b"), apis=("opencl",), memories=("buffer",), threads=(32,),
                 log=lambda _line: None, winograd=False)  # fmt: skip
    index = json.loads((tmp_path / "b" / "tune.json").read_text())
    index["cases"][0]["conv"]["padding"] = [0, 0, 0, 0]  # the reference now disagrees with every candidate
    (tmp_path / "b" / "tune.json").write_text(json.dumps(index))
    results = measure_bundle(str(tmp_path / "b"), {"opencl": pocl}, repeat=1, log=lambda _line: None)
    assert results["records"] == [] and all(not c["ok"] for c in results["results"][0]["candidates"])


def test_a_bundle_for_a_tuned_device_holds_only_what_its_database_lacks(tmp_path, pocl, db_dir):
    spec = ConvSpec((1, 8, 6, 6), (8, 8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1)
    quiet = dict(apis=("opencl",), threads=(32,), log=lambda _line: None, winograd=False)
    write_bundle([candidate_module(spec, 1)], str(tmp_path / "b1"), memories=("buffer",), **quiet)
    import_results(measure_bundle(str(tmp_path / "b1"), {"opencl": pocl}, repeat=1, log=lambda _line: None), str(db_dir))
    index = write_bundle([candidate_module(spec, 1)], str(tmp_path / "b2"), memories=("buffer", "texture"), missing_for=pocl.name, **quiet)
    assert [c["memory"] for c in index["cases"]] == ["texture"]  # (the buffer case is recorded)
    index = write_bundle([candidate_module(spec, 1)], str(tmp_path / "b3"), memories=("buffer", "texture"), missing_for="another GPU", **quiet)
    assert sorted(c["memory"] for c in index["cases"]) == ["buffer", "texture"]
    # a record measured over fewer candidates than the tuning space now holds (a schedule variant
    # added since) is measured again; one over the whole space is not
    from relax_vk.schedules.tuning import clear_cache

    path = db_dir / f"{device_slug(pocl.name.strip())}.json"
    doc = json.loads(path.read_text())
    whole = doc["records"][0]["candidates"]
    doc["records"][0]["candidates"] = whole - 1
    path.write_text(json.dumps(doc))
    clear_cache()
    index = write_bundle([candidate_module(spec, 1)], str(tmp_path / "b4"), memories=("buffer",), missing_for=pocl.name, **quiet)
    assert [c["memory"] for c in index["cases"]] == ["buffer"] and len(index["cases"][0]["configs"]) == whole


def test_a_measurement_split_by_a_time_budget_resumes_to_the_same_records(tmp_path, pocl, db_dir):
    """A GPU lent for minutes at a time: --budget ends a call between cases, the checkpointed results
    resume with --resume, and the chunks import into the database as one measurement would."""
    specs = [ConvSpec((1, 4, 5, 5), (4, 4, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
             ConvSpec((1, 8, 6, 6), (8, 8, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1)]  # fmt: skip
    bundle = str(tmp_path / "b")
    index = write_bundle([candidate_module(s, 1) for s in specs], bundle, apis=("opencl",), memories=("buffer",), threads=(32,),
                         log=lambda _line: None, winograd=False)  # fmt: skip
    assert len(index["cases"]) == 2
    out = str(tmp_path / "r.json")
    common = ["tune", "--measure", bundle, "--device", "pocl", "--target", "opencl", "--repeat", "1", "-o", out, "--resume"]
    # a spent budget still measures one case per call (so calls always progress), then returns
    assert main(common + ["--budget", "0"]) == 0
    partial = json.loads(open(out).read())
    assert partial["complete"] is False and partial["remaining"] == 1 and len(partial["results"]) == 1
    seen = []
    again = measure_bundle(bundle, {"opencl": pocl}, repeat=1, log=lambda _line: None, budget_s=0, checkpoint=seen.append)
    assert [d["remaining"] for d in seen] == [1] and again["remaining"] == 1  # a checkpoint after the case it measured
    # resuming measures only the other case and keeps the first
    lines = []
    done = measure_bundle(bundle, {"opencl": pocl}, repeat=1, log=lines.append, resume=partial)
    assert done["complete"] and done["remaining"] == 0
    assert sorted(r["id"] for r in done["results"]) == sorted(c["id"] for c in index["cases"])
    measured_first = partial["results"][0]["id"]
    assert not any(line.startswith(measured_first + " ") for line in lines)  # not measured again
    assert done["results"][0] == partial["results"][0]
    # results of another bundle are refused
    write_bundle([candidate_module(specs[0], 1)], str(tmp_path / "other"), apis=("opencl",), memories=("texture",), threads=(32,),
                 log=lambda _line: None)  # fmt: skip
    with pytest.raises(ValueError, match="another bundle"):
        measure_bundle(str(tmp_path / "other"), {"opencl": pocl}, repeat=1, log=lambda _line: None, resume=done)
    # the CLI resumes from its own checkpoint file and the chunks import together
    assert main(common) == 0
    whole = json.loads(open(out).read())
    assert whole["complete"] and len(whole["records"]) == 2
    chunk = str(tmp_path / "chunk.json")
    json.dump(partial, open(chunk, "w"))
    assert main(["tune", "--import", chunk, out, "--db", str(db_dir)]) == 0
    db = Database.load(str(db_dir / f"{device_slug(pocl.name.strip())}.json"))
    assert {r.workload for r in db.records.values()} == {c["workload"] for c in index["cases"]}


@pytest.mark.full_only("tests/runtime/test_without_tvm.py::test_tune_measure_runs_without_tvm")
def test_winograd_candidates_compete_for_the_conv_record(tmp_path, pocl, db_dir):
    """A 3x3 stride-1 conv gets one more case per Winograd tile size, under the conv's workload
    key; every candidate is checked against the reference (weights are program inputs: the
    transformed weight comes from a weight-transform kernel, not timed), and the record is the
    fastest of all. ``--missing-for`` builds a tile size's case again unless the record is of it."""
    from relax_vk.schedules.tuning import clear_cache

    spec = ConvSpec((1, 8, 7, 8), (8, 8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1)  # (7 rows: a partial tile row)
    quiet = dict(apis=("opencl",), memories=("buffer",), threads=(32,), log=lambda _line: None)
    index = write_bundle([candidate_module(spec, 1)], str(tmp_path / "b"), **quiet)
    configs = [c["configs"] for c in index["cases"]]
    assert len({c["workload"] for c in index["cases"]}) == 1
    assert len(configs) == 3 and all(k.startswith("px") for k in configs[0])
    assert all(k.startswith("wino2") for k in configs[1]) and all(k.startswith("wino4") for k in configs[2])
    assert "wino2_oc1_t32_x2" in configs[1]  # two tiles per thread along the row
    results = measure_bundle(str(tmp_path / "b"), {"opencl": pocl}, repeat=2, log=lambda _line: None)
    assert not results["failures"]
    assert all(c["ok"] for r in results["results"] for c in r["candidates"])
    import_results(json.loads(json.dumps(results)), str(db_dir))
    clear_cache()
    best = min((c for r in results["results"] for c in r["candidates"]), key=lambda c: c["ms"])
    db = Database.load(str(db_dir / f"{device_slug(pocl.name.strip())}.json"))
    (record,) = db.records.values()
    assert record.ms == best["ms"]
    again = write_bundle([candidate_module(spec, 1)], str(tmp_path / "b2"), missing_for=pocl.name, **quiet)
    tiles = {int(record.config["winograd"])} if "winograd" in record.config else set()
    rebuilt = {int(c["configs"][0][4]) for c in again["cases"] if c["configs"][0].startswith("wino")}
    assert rebuilt == {2, 4} - tiles  # (the recorded algorithm is not measured again)
