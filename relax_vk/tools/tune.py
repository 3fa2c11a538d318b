"""``relax-vk tune``: measure the conv schedule's configurations on a real device, keep the best.

Three steps, which may run on two machines (TVM here, the GPU there):

1. :func:`write_bundle` (needs TVM): every distinct conv2d of the models (shapes and attributes
   from the imported Relax module and from it after the layout stage, which turns Linears over
   token tensors into 1x1 convs: :func:`collect_convs`), for each API and memory kind, becomes
   one small program ``relu(conv2d(x, w) + b_i)`` with one conv kernel per candidate
   configuration (:func:`relax_vk.schedules.conv2d.candidate_configs`, each forced through
   :data:`~relax_vk.schedules.conv2d.CONFIG_ATTR`), built with relax_vk's own pipeline and written
   as an ``.rvk`` artifact; 3x3 stride-1 convs get one more program per Winograd tile size
   (:func:`build_winograd_case`, candidates of the same workload). Weights and inputs are program inputs, so no tensor travels.
2. :func:`relax_vk.runtime.measure.measure_bundle` (numpy and the native runtime, no TVM): on the
   device, each candidate is checked against a float64 numpy reference and timed.
3. :func:`import_results`: the fastest correct candidate per (device, API, memory kind, workload)
   is merged into the package's tuning database (:mod:`relax_vk.schedules.tuning`), which
   ``relax_vk.build`` consults for targets that name that device.

``relax-vk tune MODEL --device D`` does all three on a local device. Tuning time is dominated by
step 1 (about 0.2 s per candidate kernel on two cores); step 2 takes well under a second per case.
Several devices: TVM's RPC tracker (``python -m tvm.exec.rpc_tracker``) is the existing way to
share a device farm; step 2 is the function an RPC server would run, with the bundle and the
results as the files it sends and returns (see docs/tuning.md).
"""

from __future__ import annotations

import gzip
import json
import os
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import tvm
from tvm import relax

from ..runtime.measure import BUNDLE_FORMAT, RESULTS_FORMAT, VERSION
from ..legalize.winograd import TILES
from ..schedules.workloads import ConvSpec, collect_convs, conv_workload
from .staging import staged_folder

MEMORY_OPTIONS = {"texture": {}, "buffer": {"textures": False}}


def candidate_module(spec: ConvSpec, count: int) -> tvm.IRModule:
    """``main(x, w, b_0..b_{count-1}) -> (relu(conv2d(x, w) + b_i) for each i)``: one conv per
    candidate (distinct biases keep the calls apart)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(spec.data, "float32"))
    w = relax.Var("w", relax.TensorType(spec.weight, "float32"))
    biases = [relax.Var(f"b{i}", relax.TensorType((1, spec.weight[0], 1, 1), "float32")) for i in range(count)]
    with bb.function("main", [x, w, *biases]):
        with bb.dataflow():
            outs = []
            for b in biases:
                conv = bb.emit(relax.op.nn.conv2d(x, w, spec.strides, spec.padding, spec.dilation, spec.groups))
                outs.append(bb.emit(relax.op.nn.relu(bb.emit(relax.op.add(conv, b)))))
            result = bb.emit_output(relax.Tuple(outs))
        bb.emit_func_output(result)
    return bb.get()


def _conv_calls(lowered: tvm.IRModule) -> List[tvm.ir.GlobalVar]:
    """The conv kernels (direct or Winograd) of a lowered (unscheduled) module, in the order
    ``main`` calls them."""
    from ..schedules.unchecked import new_schedule

    from ..schedules.conv2d import find_conv
    from ..schedules.winograd import find_winograd

    calls: List[tvm.ir.GlobalVar] = []

    def is_conv(func) -> bool:
        sch = new_schedule(func)
        return find_conv(sch) is not None or find_winograd(sch) is not None

    def visit(expr) -> None:
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name == "relax.call_tir":
            gv = expr.args[0]
            func = lowered[gv]
            if isinstance(func, tvm.tirx.PrimFunc) and is_conv(func) and gv not in calls:
                calls.append(gv)

    relax.analysis.post_order_visit(lowered["main"], visit)
    return calls


RECORDED = "recorded"  # build_case's answer for a case its ``recorded`` predicate skips


def build_case(spec: ConvSpec, api: str, memory: str, threads: Sequence[int] = (32, 64, 128),
               recorded: Optional[Callable[[str, int], bool]] = None):  # fmt: skip
    """The candidate program of one conv for one API and memory kind: ``(artifact, workload key,
    default config key, config keys)``, or None when the conv schedule does not take this conv.
    ``recorded(workload key, candidate count)``: when true, nothing is built and :data:`RECORDED`
    is returned (a database record measured over at least as many candidates)."""
    from ..schedules.unchecked import new_schedule

    from ..core import target as _target
    from ..core.options import ScopeOptions
    from ..pipeline import _lowering_stage, _scope_pipeline
    from ..schedules.conv2d import candidate_configs, default_config, find_conv, workload

    tgt = _target.resolve(api)
    options = ScopeOptions(**MEMORY_OPTIONS[memory])
    probe = candidate_module(spec, 1)
    scoped = _scope_pipeline(tgt, None, options)(probe)
    lowered = _lowering_stage(tgt, schedule=False)(scoped)
    calls = _conv_calls(lowered)
    if len(calls) != 1:
        return None
    sch = new_schedule(lowered[calls[0]])
    w = workload(sch, find_conv(sch)[0])
    if w is None:
        return None
    default = default_config(w)
    configs = _distinct(w, [default] + [c for c in candidate_configs(w, threads) if c != default])
    if recorded is not None and recorded(w.key(), len(configs)):
        return RECORDED
    artifact = _candidate_artifact(spec, tgt, options, w.key(), configs, "conv")
    return artifact, w.key(), default_config(w).key(), [c.key() for c in configs]


def _candidate_artifact(spec: ConvSpec, tgt, options, key: str, configs: Sequence, what: str):
    """The artifact of ``len(configs)`` copies of ``spec``'s conv, the i-th scheduled with
    ``configs[i]`` (:func:`build_case` and :func:`build_winograd_case`)."""
    from ..compiler import compile_lowered
    from ..core import target as _target
    from ..pipeline import _lowering_stage, _scope_pipeline
    from ..schedules import schedule_passes
    from ..schedules.conv2d import CONFIG_ATTR

    scoped = _scope_pipeline(tgt, None, options)(candidate_module(spec, len(configs)))
    lowered = _lowering_stage(tgt, schedule=False)(scoped)
    calls = _conv_calls(lowered)
    if len(calls) != len(configs):
        raise RuntimeError(f"{key}: {len(calls)} {what} kernels for {len(configs)} candidates")
    for gv, config in zip(calls, configs):
        lowered.update_func(gv, lowered[gv].with_attr(CONFIG_ATTR, config.key()))
    with _target.lowering_target(tgt):
        lowered = tvm.transform.Sequential(schedule_passes())(lowered)
    return compile_lowered(tgt, scoped, lowered, model={"tune": key}).artifact()


def build_winograd_case(spec: ConvSpec, api: str, memory: str, m: int, threads: Sequence[int] = (32, 64, 128),
                        recorded: Optional[Callable[[str, int], bool]] = None):  # fmt: skip
    """The Winograd F(m,3) candidates of one conv as a candidate program, like :func:`build_case`
    (the same workload key: Winograd is a candidate of the conv workload, and the database keeps
    whichever algorithm measured fastest); None when the conv is not one Winograd computes. The
    weight is a program input here, so each candidate's transformed weight comes from a weight
    transform kernel, which is not timed (a model's constant weights are transformed at build time)."""
    from ..core import target as _target
    from ..core.options import ScopeOptions
    from ..schedules.winograd import candidate_configs, default_config

    w = conv_workload(spec)  # (ChooseConvAlgorithm's eligible(): 3x3, both strides and dilations 1, one group)
    if w is None or (w.kh, w.kw, w.depthwise, spec.groups, spec.strides, spec.dilation) != (3, 3, False, 1, (1, 1), (1, 1)):
        return None
    tgt = _target.resolve(api)
    options = ScopeOptions(**MEMORY_OPTIONS[memory], winograd="f23" if m == 2 else "f43")
    default = default_config(w, m)
    configs = [default] + [c for c in candidate_configs(w, tiles=(m,), threads=threads) if c != default]
    if recorded is not None and recorded(w.key(), len(configs)):
        return RECORDED
    artifact = _candidate_artifact(spec, tgt, options, w.key(), configs, "Winograd")
    return artifact, w.key(), default.key(), [c.key() for c in configs]


def _distinct(w, configs) -> list:
    """Configurations that give different kernels (threads beyond the pixel count change nothing)."""
    from ..schedules.conv1x1 import gemm_threads

    seen, out = set(), []
    for c in configs:
        threads = gemm_threads(w, c.px, c.oc, c.threads) if c.gemm else min(c.threads, w.n * w.out_h * (w.out_w // c.px))
        key = (c.px, c.oc, c.threads if c.split else threads, c.split, c.gemm)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def _recorded(device: str, api: str, memory: str, tile: Optional[int] = None) -> Optional[Callable[[str, int], bool]]:
    """``recorded(workload key, candidate count)`` for a device's database: whether it holds a
    record of the workload measured over at least that many candidates (None: no database).
    ``tile``: for a Winograd F(tile,3) case, only a record of that tile size counts (a record
    does not say which algorithms its measurement compared, so a workload that direct won is
    measured again: the price of never skipping an algorithm that was not tried)."""
    from ..core.limits import device_slug
    from ..schedules.tuning import database

    db = database(device_slug(device))
    if db is None:
        return None

    def recorded(key: str, count: int) -> bool:
        record = db.best(api, memory, key)
        if tile is not None and (record is None or int(record.config.get("winograd", 0)) != tile):
            return False
        return record is not None and record.candidates >= count

    return recorded


def write_bundle(
    modules: Iterable[tvm.IRModule],
    outdir: str,
    apis: Sequence[str] = ("opencl", "vulkan"),
    memories: Sequence[str] = ("texture", "buffer"),
    threads: Sequence[int] = (32, 64, 128),
    log: Callable[[str], None] = print,
    missing_for: Optional[str] = None,
    winograd: bool = True,
) -> dict:
    """Build the candidates of every distinct conv of ``modules`` into ``outdir`` (module
    docstring); returns the bundle index. Written all or nothing (:mod:`.staging`).
    ``winograd``: 3x3 stride-1 convs also get a case per Winograd tile size
    (:func:`build_winograd_case`), whose candidates compete with the direct ones for the record.
    ``missing_for``: a device name; only the (API, memory kind, workload) cases its tuning
    database has no record of (new models on a tuned device), or a record measured over fewer
    candidates than the tuning space now holds (the space grew since: new schedule variants)."""
    from ..pipeline import layout_stage

    specs: Dict[ConvSpec, Optional[str]] = {}  # -> its workload key
    keys: set = set()
    for mod in modules:
        # the model's own convs, and those the layout stage makes (a Linear over token tensors is
        # a 1x1 NCHW4c conv whose pixels are the tokens)
        for spec in collect_convs(mod) + collect_convs(layout_stage(apis[0] if apis else None)(mod)):
            w = conv_workload(spec)  # (a packed call and its NCHW original are one workload)
            if w is None or w.key() not in keys:
                specs.setdefault(spec, w.key() if w is not None else None)
                keys.add(w.key() if w is not None else None)
    cases, skipped = [], []
    t0 = time.perf_counter()
    with staged_folder(outdir, prefix=".tune-") as tmp:
        for spec, workload in specs.items():
            for api in apis:
                for memory in memories:
                    recorded = _recorded(missing_for, api, memory) if missing_for else None
                    builds = [lambda: build_case(spec, api, memory, threads, recorded)]
                    if winograd:
                        builds += [lambda m=m: build_winograd_case(spec, api, memory, m, threads,
                                                                   _recorded(missing_for, api, memory, m) if missing_for else None)
                                   for m in TILES]  # fmt: skip
                    for i, build in enumerate(builds):
                        t1 = time.perf_counter()
                        built = build()
                        if built == RECORDED:
                            continue
                        if built is None:
                            if i == 0:
                                skipped.append({"conv": spec.to_json(), "api": api, "memory": memory})
                            continue
                        artifact, key, default, configs = built
                        case_id = f"c{len(cases):03d}"
                        with gzip.open(os.path.join(tmp, f"{case_id}.rvk.gz"), "wb", compresslevel=6) as f:
                            f.write(artifact.to_bytes())  # (kernel sources compress about 30x)
                        cases.append({"id": case_id, "api": api, "memory": memory, "workload": key, "conv": spec.to_json(),
                                      "artifact": f"{case_id}.rvk.gz", "default": default, "configs": configs})  # fmt: skip
                        log(f"{case_id} {api:<6} {memory:<8} {key:<40} {len(configs):>3} candidates  {time.perf_counter() - t1:5.1f} s")
        index = {"format": BUNDLE_FORMAT, "version": VERSION, "cases": cases, "skipped": skipped,
                 "seconds": time.perf_counter() - t0}  # fmt: skip
        with open(os.path.join(tmp, "tune.json"), "w") as f:
            json.dump(index, f, indent=1)
    return index


def import_results(results: dict, db_dir: Optional[str] = None) -> Dict[str, Tuple[int, int]]:
    """Merge measured results into the tuning databases (one per device); returns ``{device:
    (records kept, records offered)}``. A record replaces an existing one only when faster."""
    from ..core.limits import device_slug
    from ..schedules.tuning import HERE, Database, Record

    if results.get("format") != RESULTS_FORMAT or results.get("version") != VERSION:
        raise ValueError("not relax_vk tuning results (expected the output of `relax-vk tune --measure`)")
    db_dir = db_dir or HERE
    summary: Dict[str, Tuple[int, int]] = {}
    by_device: Dict[str, List[dict]] = {}
    for r in results["records"]:
        by_device.setdefault(device_slug(r["device"]), []).append(r)
    for slug, records in by_device.items():
        path = os.path.join(db_dir, f"{slug}.json")
        db = Database.load(path) if os.path.exists(path) else Database(slug)
        kept = 0
        for r in records:
            fields = {k: r[k] for k in ("api", "memory", "workload", "config", "ms", "gflops", "default_ms", "candidates")}
            kept += db.add(Record(**fields))
        db.save(path)
        summary[slug] = (kept, len(records))
    from ..schedules.tuning import clear_cache

    clear_cache()
    return summary


def import_plan_timings(rows: list, db_dir: Optional[str] = None, evidence: str = "") -> Dict[str, int]:
    """Merge whole-model plan timings into the tuning databases; returns ``{device: models kept}``.

    ``rows`` is what ``benchmarks/gpu_benchmark.py --run --json`` writes: per model, the wall
    times of its plans per API (``"opencl/texture"``, ``"opencl/buffer"``, ``"opencl/auto"``, ...)
    measured side by side in one process. Where an API has both uniform plans and the ``auto``
    plan's decision names the device and the model's fingerprint, a :class:`PlanRecord` is kept,
    which :func:`~relax_vk.passes.scope.choose_memory_kind.decide` then prefers to summed conv
    times for that model."""
    from ..schedules.tuning import HERE, Database, PlanRecord, clear_cache

    if not isinstance(rows, list) or not all(isinstance(r, dict) and "results" in r for r in rows):
        raise ValueError("not benchmark results (expected the --json output of benchmarks/gpu_benchmark.py --run)")
    db_dir = db_dir or HERE
    by_device: Dict[str, List[PlanRecord]] = {}
    for row in rows:
        results = row["results"]
        for api in ("opencl", "vulkan"):
            tex, buf, auto = (results.get(f"{api}/{plan}") for plan in ("texture", "buffer", "auto"))
            rule = (auto or {}).get("scope_rule") or {}
            if not (tex and buf and rule.get("device") and rule.get("model")):
                continue
            record = PlanRecord(api, rule["model"], float(tex["wall_ms"]), float(buf["wall_ms"]), row.get("model", ""), evidence)
            by_device.setdefault(rule["device"], []).append(record)
    summary: Dict[str, int] = {}
    for slug, records in by_device.items():
        path = os.path.join(db_dir, f"{slug}.json")
        db = Database.load(path) if os.path.exists(path) else Database(slug)
        for record in records:
            db.add_plan(record)
        db.save(path)
        summary[slug] = len(records)
    clear_cache()
    return summary
