"""One artifact with run-time dims against builds fixed to each shape, side by side in one process.

PP-OCRv4's recognizer (shipped with rapidocr_onnxruntime) built once with its width a run-time dim
(``--input-shape x=1,3,48,W --dim W=MIN:MAX``) and once per width with every dim fixed; each
artifact loaded on one device. Per width: the fixed build's steady latency and device bytes; the
run-time-dims artifact's first run at that width (after runs at other widths: no compile, no
allocation), its steady latency, the ratio to the fixed build, and the largest difference from
onnxruntime of either (a share of the output's largest magnitude). Then the run-time-dims
artifact's device bytes (held once, at the bound).

    python benchmarks/run_time_dims.py [--widths 160 640] [--range 32:1280] [--api opencl|vulkan] [--device pocl] [--repeat 5] [--json]

On a machine without TVM (the GPU machine), in two steps: ``--build DIR`` here (the artifacts, with
``--device-name`` the fixed builds use that device's tuning database; the inputs and onnxruntime's
outputs), then ``--run DIR --device gpu`` there (the runtime and numpy only)::

    python benchmarks/run_time_dims.py --build .gpu/dims --apis opencl vulkan --device-name "NVIDIA H100 80GB HBM3"
    python3 benchmarks/run_time_dims.py --run .gpu/dims --device gpu --repeat 20 --json   # GPU machine
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from backend_latency import load_artifact, store_constants  # noqa: E402

DEVICES = {"opencl": "pocl", "vulkan": "lavapipe"}


def _inputs(widths, lo: int) -> dict:
    rng = np.random.default_rng(0)
    return {w: rng.standard_normal((1, 3, 48, w)).astype("float32") for w in [lo, *widths]}


def _builds(api: str, widths, lo: int, hi: int, device_name=None):
    """``(run-time-dims artifact, {width: fixed artifact}, build seconds of the first)``."""
    import relax_vk
    from relax_vk.frontends.onnx import from_onnx
    from relax_vk.zoo.packaged import packaged_model_path

    path = str(packaged_model_path("ppocr_rec"))
    make = relax_vk.target.vulkan if api == "vulkan" else relax_vk.target.opencl
    start = time.perf_counter()
    dynamic = relax_vk.build(from_onnx(path, {"x": (1, 3, 48, "W")}, dims={"W": (lo, hi)}), make(device_name=device_name)).artifact()
    seconds = time.perf_counter() - start
    fixed = {w: relax_vk.build(from_onnx(path, {"x": (1, 3, 48, w)}), make(device_name=device_name)).artifact() for w in widths}
    return dynamic, fixed, seconds


def _references(inputs: dict) -> dict:
    import onnxruntime as ort

    from relax_vk.zoo.packaged import packaged_model_path

    session = ort.InferenceSession(str(packaged_model_path("ppocr_rec")))
    return {w: session.run(None, {"x": x})[0] for w, x in inputs.items()}


def measure(dynamic, fixed: dict, inputs: dict, references: dict, lo: int, device: str, repeat: int) -> dict:
    """The table's rows for one API: ``dynamic`` and ``fixed`` (width -> artifact) loaded on ``device``."""
    from relax_vk.runtime import load

    session = load(dynamic, device=device)
    session.run([inputs[lo]])  # the first run of the session, at another width
    rows = []
    for w, artifact in fixed.items():
        start = time.perf_counter()
        (out,) = session.run([inputs[w]])
        first_ms = (time.perf_counter() - start) * 1e3
        dyn_ms = session.time([inputs[w]], repeat=repeat)["median"]
        fixed_session = load(artifact, device=device)
        (fixed_out,) = fixed_session.run([inputs[w]])
        fixed_ms = fixed_session.time([inputs[w]], repeat=repeat)["median"]
        scale = float(np.abs(references[w]).max())
        rows.append({"width": w, "fixed_ms": fixed_ms, "fixed_device_bytes": fixed_session.device_bytes, "first_ms": first_ms, "steady_ms": dyn_ms,
                     "ratio": dyn_ms / fixed_ms, "first_over_steady": first_ms / dyn_ms,
                     "max_err_dynamic": float(np.abs(out - references[w]).max()) / scale,
                     "max_err_fixed": float(np.abs(fixed_out - references[w]).max()) / scale})  # fmt: skip
        del fixed_session
    return {"device": session.device_name, "dynamic_device_bytes": session.device_bytes, "rows": rows}


def print_table(result: dict) -> None:
    lo, hi = result["range"]
    print(f"PP-OCRv4 rec, {result['api']} on {result['device']}: one artifact W={lo}..{hi}"
          + (f" (built in {result['build_s']:.1f} s)" if "build_s" in result else "")
          + f", {result['dynamic_device_bytes'] / 2**20:.2f} MiB on the device, against a build per width")  # fmt: skip
    print(f"{'width':>6} {'fixed ms':>9} {'fixed MiB':>9} {'first ms':>9} {'steady ms':>9} {'ratio':>6} {'first/steady':>12} {'err dyn':>9} {'err fixed':>9}")
    for r in result["rows"]:
        print(f"{r['width']:>6} {r['fixed_ms']:>9.2f} {r['fixed_device_bytes'] / 2**20:>9.2f} {r['first_ms']:>9.2f} {r['steady_ms']:>9.2f} "
              f"{r['ratio']:>6.2f} {r['first_over_steady']:>12.2f} {r['max_err_dynamic']:>9.1e} {r['max_err_fixed']:>9.1e}")  # fmt: skip


def build_bundle(outdir: str, apis, widths, lo: int, hi: int, device_name) -> None:
    os.makedirs(os.path.join(outdir, "blobs"), exist_ok=True)
    inputs = _inputs(widths, lo)
    references = _references(inputs)
    np.savez(os.path.join(outdir, "io.npz"), **{f"x{w}": x for w, x in inputs.items()}, **{f"y{w}": y for w, y in references.items()})
    entries = []
    for api in apis:
        dynamic, fixed, seconds = _builds(api, widths, lo, hi, device_name)
        for width, artifact in [(None, dynamic), *fixed.items()]:
            entries.append({"api": api, "width": width, "program": artifact.program, "source": artifact.source,
                            "constants": store_constants(outdir, artifact)})  # fmt: skip
        print(f"built {api}: the run-time-dims artifact in {seconds:.1f} s and {len(fixed)} fixed ones", flush=True)
    with gzip.open(os.path.join(outdir, "index.json.gz"), "wt") as f:
        json.dump({"range": [lo, hi], "widths": list(widths), "entries": entries}, f)


def run_bundle(outdir: str, device, repeat: int) -> list:
    with gzip.open(os.path.join(outdir, "index.json.gz"), "rt") as f:
        index = json.load(f)
    io = np.load(os.path.join(outdir, "io.npz"))
    lo, hi = index["range"]
    inputs = {w: io[f"x{w}"] for w in [lo, *index["widths"]]}
    references = {w: io[f"y{w}"] for w in index["widths"]}
    results = []
    for api in dict.fromkeys(e["api"] for e in index["entries"]):
        entries = [e for e in index["entries"] if e["api"] == api]
        dynamic = load_artifact(outdir, next(e for e in entries if e["width"] is None))
        fixed = {e["width"]: load_artifact(outdir, e) for e in entries if e["width"] is not None}
        result = {"model": "ppocr_rec", "api": api, "range": [lo, hi],
                  **measure(dynamic, fixed, inputs, references, lo, device or DEVICES[api], repeat)}  # fmt: skip
        results.append(result)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", nargs="+", type=int, default=[160, 640])
    parser.add_argument("--range", default="32:1280", help="the run-time dim's range, MIN:MAX")
    parser.add_argument("--api", choices=("opencl", "vulkan"), default="opencl")
    parser.add_argument("--apis", nargs="+", choices=("opencl", "vulkan"), default=None, help="--build: the APIs to build for (default: --api)")
    parser.add_argument("--device", default=None, help="default: pocl (OpenCL), lavapipe (Vulkan)")
    parser.add_argument("--device-name", default=None, help="--build: the fixed builds use this device's tuning database")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--build", metavar="DIR", help="build the artifacts, inputs and references into DIR (no run)")
    parser.add_argument("--run", metavar="DIR", help="run a bundle --build made (no TVM, no onnxruntime needed)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    lo, hi = (int(v) for v in args.range.split(":"))
    if args.build:
        build_bundle(args.build, args.apis or [args.api], args.widths, lo, hi, args.device_name)
        return 0
    if args.run:
        results = run_bundle(args.run, args.device, args.repeat)
    else:
        inputs = _inputs(args.widths, lo)
        dynamic, fixed, seconds = _builds(args.api, args.widths, lo, hi)
        measured = measure(dynamic, fixed, inputs, _references(inputs), lo, args.device or DEVICES[args.api], args.repeat)
        results = [{"model": "ppocr_rec", "api": args.api, "range": [lo, hi], "build_s": seconds, **measured}]
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for result in results:
            print_table(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
