"""The device half of ``relax-vk tune``: time a bundle of candidate kernels, check each one first.

Needs numpy and the native library only (no TVM), so it runs on the machine that has the GPU. A
bundle (written by :func:`relax_vk.tools.tune.write_bundle`) is a folder::

    tune.json     {"format": "relax_vk.tune-bundle", "version": 1, "cases": [
                     {"id": "c000", "api": "opencl", "memory": "texture", "workload": "conv_n1_...",
                      "conv": {"data": [1, 64, 56, 56], "weight": [64, 64, 3, 3], "strides": [1, 1],
                               "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1},
                      "artifact": "c000.rvk.gz", "default": "px4_oc2_t64", "configs": ["px4_oc2_t64", ...]}]}
    c000.rvk.gz   one gzipped artifact per case: ``relu(conv2d(x, w) + b_i)`` once per candidate configuration

Every case's inputs come from a fixed formula (:func:`pattern`), the same on every machine, so no
tensor travels with the bundle; the reference is a float64 numpy conv computed here
(:func:`conv2d_reference`). A candidate counts only when its whole output is within
``tolerance`` (relative to the output's magnitude, 1e-4 by default) of the reference; then it is
timed as the median of its kernel's profiled time over ``repeat`` runs. The results
(:func:`measure_bundle`) are what ``relax-vk tune --import`` merges into the tuning database.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from ..core.limits import device_name

BUNDLE_FORMAT, RESULTS_FORMAT, VERSION = "relax_vk.tune-bundle", "relax_vk.tune-results", 1


def pattern(shape: Sequence[int], seed: int, scale: float = 1.0) -> np.ndarray:
    """A deterministic float32 tensor in [-scale/2, scale/2): a multiplicative hash of the flat
    index (exact integer arithmetic, so every machine makes the same values)."""
    count = int(np.prod(shape)) if len(shape) else 1
    index = np.arange(count, dtype=np.uint64)
    bits = (index * np.uint64(2654435761) + np.uint64(seed) * np.uint64(40503) + np.uint64(12345)) % np.uint64(1 << 32)
    return ((bits.astype(np.float64) / float(1 << 32) - 0.5) * scale).astype(np.float32).reshape(shape)


def conv2d_reference(x: np.ndarray, w: np.ndarray, strides, padding, dilation, groups: int) -> np.ndarray:
    """NCHW x OIHW conv2d in float64 (``padding`` = top, left, bottom, right), any group count."""
    n, c, _, _ = x.shape
    o, cg, kh, kw = w.shape
    pt, pl, pb, pr = padding
    sh, sw = strides
    dh, dw = dilation
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    og = o // groups
    xg = xp.reshape(n, groups, cg, xp.shape[2], xp.shape[3])
    wg = w.astype(np.float64).reshape(groups, og, cg, kh, kw)
    out = np.zeros((n, groups, og, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xg[:, :, :, i * dh : i * dh + sh * (oh - 1) + 1 : sh, j * dw : j * dw + sw * (ow - 1) + 1 : sw]
            out += np.einsum("ngchw,goc->ngohw", patch, wg[:, :, :, i, j], optimize=True)
    return out.reshape(n, o, oh, ow)


def case_inputs(case: dict, count: int) -> List[np.ndarray]:
    """``x, w, b_0 .. b_{count-1}`` of a case (weights scaled by 1/sqrt(fan-in): outputs of order 1)."""
    conv = case["conv"]
    weight = conv["weight"]
    fan_in = int(np.prod(weight[1:]))
    x = pattern(conv["data"], 1, 2.0)
    w = pattern(weight, 2, 4.0 / np.sqrt(fan_in))
    biases = [pattern([1, weight[0], 1, 1], 3 + i) for i in range(count)]
    return [x, w, *biases]


def parse_config(key: str) -> Dict[str, int]:
    """``px4_oc2_t64`` -> ``{"px": 4, "oc": 2, "threads": 64}``, ``px1_oc1_t64_split`` -> the same
    with ``"split": True``, ``px4_oc4_t64_gemm`` with ``"gemm": True`` (Conv2dConfig's key, parsed
    without TVM); ``wino2_oc1_t64`` -> ``{"winograd": 2, "oc": 1, "threads": 64}`` (WinogradConfig's; ``wino2_oc1_t64_x2`` adds
    ``"tiles": 2``)."""
    w = re.fullmatch(r"wino(\d+)_oc(\d+)_t(\d+)(?:_x(\d+))?", str(key))
    if w is not None:  # a Winograd F(m,3) configuration (relax_vk.schedules.winograd.WinogradConfig)
        config = dict(zip(("winograd", "oc", "threads"), (int(g) for g in w.groups()[:3])))
        if w.group(4) is not None:
            config["tiles"] = int(w.group(4))
        return config
    m = re.fullmatch(r"px(\d+)_oc(\d+)_t(\d+)(_split|_gemm)?", str(key))
    if m is None:
        raise ValueError(f"not a conv2d configuration: {key!r} (expected e.g. px4_oc2_t64)")
    config = dict(zip(("px", "oc", "threads"), (int(g) for g in m.groups()[:3])))
    if m.group(4):
        config[m.group(4)[1:]] = True
    return config


def _conv_steps(program: dict) -> List[dict]:
    """The conv launches of a candidate program in order: candidate i is the i-th."""
    kernels = {k["name"]: k for k in program["kernels"]}
    return [kernels[s["kernel"]] for s in program["steps"] if s["op"] == "launch" and kernels[s["kernel"]].get("workload")]


def measure_case(case: dict, artifact, device, repeat: int = 20, tolerance: float = 1e-4, load: Optional[Callable] = None) -> dict:
    """Check and time one case's candidates on ``device``; returns its result record."""
    if load is None:
        from . import load
    session = load(artifact, device=device, profile=True)
    convs = _conv_steps(session.program)
    outputs_count = len(session.program["outputs"])
    if len(convs) != outputs_count:
        raise ValueError(f"case {case['id']}: {len(convs)} conv kernels for {outputs_count} candidate outputs")
    inputs = case_inputs(case, outputs_count)
    conv = case["conv"]
    y = conv2d_reference(inputs[0], inputs[1], conv["strides"], conv["padding"], conv["dilation"], conv["groups"])
    outputs = session.run(inputs)
    candidates = []
    for i, (kernel, out) in enumerate(zip(convs, outputs)):
        ref = np.maximum(y + inputs[2 + i], 0.0)
        err = float(np.max(np.abs(out.astype(np.float64) - ref))) if out.shape == ref.shape else float("inf")
        bound = tolerance * max(1.0, float(np.max(np.abs(ref))))
        candidates.append({"kernel": kernel["name"], "config": kernel.get("config"), "memory": kernel.get("memory"),
                           "flops": int(kernel.get("flops", 0)), "max_err": err, "ok": bool(err <= bound), "times": []})  # fmt: skip
    for _ in range(max(1, repeat)):
        session.run(inputs)
        times = {p["name"]: p["ms"] for p in session.last_profile}
        for c in candidates:
            c["times"].append(times.get(c["kernel"], float("nan")))
    for c in candidates:
        c["ms"] = float(np.median(c.pop("times")))
    del session
    return {"id": case["id"], "api": case["api"], "memory": case["memory"], "workload": case["workload"],
            "default": case.get("default"), "candidates": candidates}  # fmt: skip


def best_record(result: dict, device: str) -> Optional[dict]:
    """The database record of a case's result: its fastest correct candidate (None if none was)."""
    ok = [c for c in result["candidates"] if c["ok"] and np.isfinite(c["ms"]) and c["ms"] > 0]
    if not ok:
        return None
    best = min(ok, key=lambda c: c["ms"])
    default = [c["ms"] for c in result["candidates"] if c["config"] == result.get("default")]
    config = parse_config(best["config"])
    return {"device": device, "api": result["api"], "memory": best.get("memory") or result["memory"], "workload": result["workload"],
            "config": config, "ms": best["ms"], "gflops": best["flops"] / best["ms"] / 1e6 if best["flops"] else 0.0,
            "default_ms": default[0] if default else 0.0, "candidates": len(result["candidates"]),
            "max_err": best["max_err"]}  # fmt: skip


def bundle_digest(bundle: str) -> str:
    """SHA-256 of a bundle's ``tune.json``: results name the bundle they measured, so a resumed
    measurement never mixes two bundles."""
    import hashlib

    with open(os.path.join(bundle, "tune.json"), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _done(results: Optional[dict], digest: str) -> Dict[tuple, str]:
    """``{(case id, api): "result" | "failure"}`` of an earlier, partial results document of the
    same bundle (raises ``ValueError`` for results of another bundle)."""
    if not results:
        return {}
    if results.get("format") != RESULTS_FORMAT or results.get("version") != VERSION:
        raise ValueError("cannot resume: not relax_vk tuning results (expected the output of `relax-vk tune --measure`)")
    if results.get("bundle") != digest:
        raise ValueError("cannot resume: the results were measured from another bundle (its tune.json differs)")
    done = {(r["id"], r["api"]): "result" for r in results.get("results", [])}
    done.update({(r["id"], r["api"]): "failure" for r in results.get("failures", [])})
    return done


def measure_bundle(bundle: str, devices: Dict[str, object], repeat: int = 20, tolerance: float = 1e-4,
                   log: Callable[[str], None] = print, resume: Optional[dict] = None, budget_s: Optional[float] = None,
                   checkpoint: Optional[Callable[[dict], None]] = None) -> dict:  # fmt: skip
    """Measure every case of ``bundle`` whose API has a device in ``devices`` (``{"opencl": a
    Device, "vulkan": a Device}`` of :func:`relax_vk.runtime.select_device`); returns the results document.

    A measurement can be split over several calls (a GPU lent for minutes at a time): ``resume``
    is the document an earlier call returned for the same bundle (its cases are kept, not measured
    again), ``budget_s`` ends the call before starting a case once that many seconds have passed (after at least
    one case, so repeated calls always finish), and
    ``checkpoint`` is called with the document after every case (write it to a file, so a call that
    is killed keeps what it measured). The document's ``complete`` says whether every case of the
    bundle's devices is in it; ``remaining`` counts the rest.
    """
    with open(os.path.join(bundle, "tune.json")) as f:
        index = json.load(f)
    if index.get("format") != BUNDLE_FORMAT or index.get("version") != VERSION:
        raise ValueError(f"{bundle}: not a relax_vk tuning bundle")
    digest = bundle_digest(bundle)
    done = _done(resume, digest)
    results = [r for r in (resume or {}).get("results", [])]
    records = [r for r in (resume or {}).get("records", [])]
    failures = [r for r in (resume or {}).get("failures", [])]
    seconds = float((resume or {}).get("seconds", 0.0))
    todo = [c for c in index["cases"] if devices.get(c["api"]) is not None and (c["id"], c["api"]) not in done]
    if done:
        log(f"resuming: {len(done)} cases measured earlier, {len(todo)} to go")

    def document(remaining: int) -> dict:
        return {"format": RESULTS_FORMAT, "version": VERSION, "bundle": digest, "seconds": seconds + time.perf_counter() - t0,
                "complete": remaining == 0, "remaining": remaining, "records": records, "results": results,
                "failures": failures}  # fmt: skip

    t0 = time.perf_counter()
    for position, case in enumerate(todo):
        if budget_s is not None and position > 0 and time.perf_counter() - t0 >= budget_s:  # every call makes progress
            log(f"time budget of {budget_s:.0f} s spent: {len(todo) - position} cases remain (run again with the results to resume)")
            return document(len(todo) - position)
        device = devices[case["api"]]
        name = device_name(device)
        try:
            result = measure_case(case, _read_artifact(os.path.join(bundle, case["artifact"])), device, repeat, tolerance)
        except Exception as err:  # a candidate set that does not load or run: recorded, not fatal
            failures.append({"id": case["id"], "api": case["api"], "workload": case["workload"], "error": f"{type(err).__name__}: {err}"})
            log(f"{case['id']} {case['api']:<6} {case['memory']:<8} {case['workload']}: FAILED {type(err).__name__}: {err}")
        else:
            results.append(result)
            record = best_record(result, name)
            bad = sum(not c["ok"] for c in result["candidates"])
            if record is None:
                log(f"{case['id']} {case['api']:<6} {case['memory']:<8} {case['workload']}: no candidate matched the reference")
            else:
                records.append(record)
                log(f"{case['id']} {case['api']:<6} {case['memory']:<8} {case['workload']:<40} best {record['config']} "
                    f"{record['ms']:.4f} ms ({record['gflops']:.0f} GFLOP/s), default {record['default_ms']:.4f} ms, "
                    f"{len(result['candidates'])} candidates" + (f", {bad} rejected" if bad else ""))  # fmt: skip
        if checkpoint is not None:
            checkpoint(document(len(todo) - position - 1))
    return document(0)


def write_results(results: dict, path: str) -> None:
    """Write a results document atomically (a temporary file renamed into place): a measurement
    killed while writing leaves the previous checkpoint, never half a file."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1)
    os.replace(tmp, path)


def _read_artifact(path: str):
    from ..serialization.artifact import Artifact

    if not path.endswith(".gz"):
        return Artifact.read(path)
    with gzip.open(path, "rb") as f:
        return Artifact.from_bytes(f.read(), what=path)


