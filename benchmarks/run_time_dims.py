"""One artifact with run-time dims against builds fixed to each shape, side by side in one process.

PP-OCRv4's recognizer (shipped with rapidocr_onnxruntime) built once with its width a run-time dim
(``--input-shape x=1,3,48,W --dim W=MIN:MAX``) and once per width with every dim fixed; each
artifact loaded on one device. Per width: the fixed build's steady latency and device bytes; the
run-time-dims artifact's first run at that width (after runs at other widths: no compile, no
allocation), its steady latency, the ratio to the fixed build, and the largest difference from
onnxruntime of either. Then the run-time-dims artifact's device bytes (held once, at the bound).

    python benchmarks/run_time_dims.py [--widths 160 640] [--range 32:1280] [--api opencl|vulkan] [--device pocl] [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main() -> int:
    import onnxruntime as ort

    import relax_vk
    from relax_vk.frontends.onnx import from_onnx
    from relax_vk.runtime import load
    from relax_vk.zoo.packaged import packaged_model_path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", nargs="+", type=int, default=[160, 640])
    parser.add_argument("--range", default="32:1280", help="the run-time dim's range, MIN:MAX")
    parser.add_argument("--api", choices=("opencl", "vulkan"), default="opencl")
    parser.add_argument("--device", default=None, help="default: pocl (OpenCL), lavapipe (Vulkan)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    device = args.device or ("pocl" if args.api == "opencl" else "lavapipe")
    lo, hi = (int(v) for v in args.range.split(":"))
    path = str(packaged_model_path("ppocr_rec"))
    reference = ort.InferenceSession(path)
    rng = np.random.default_rng(0)
    inputs = {w: rng.standard_normal((1, 3, 48, w)).astype("float32") for w in args.widths}

    start = time.perf_counter()
    dynamic = relax_vk.build(from_onnx(path, {"x": (1, 3, 48, "W")}, dims={"W": (lo, hi)}), args.api).artifact()
    build_s = time.perf_counter() - start
    session = load(dynamic, device=device)
    session.run([rng.standard_normal((1, 3, 48, lo)).astype("float32")])  # the first run of the session, at another width
    rows = []
    for w in args.widths:
        expected = reference.run(None, {"x": inputs[w]})[0]
        start = time.perf_counter()
        (out,) = session.run([inputs[w]])
        first_ms = (time.perf_counter() - start) * 1e3
        dyn_ms = session.time([inputs[w]], repeat=args.repeat)["median"]
        fixed = load(relax_vk.build(from_onnx(path, {"x": (1, 3, 48, w)}), args.api).artifact(), device=device)
        (fixed_out,) = fixed.run([inputs[w]])
        fixed_ms = fixed.time([inputs[w]], repeat=args.repeat)["median"]
        scale = float(np.abs(expected).max())
        rows.append({"width": w, "fixed_ms": fixed_ms, "fixed_device_bytes": fixed.device_bytes, "first_ms": first_ms, "steady_ms": dyn_ms,
                     "ratio": dyn_ms / fixed_ms, "first_over_steady": first_ms / dyn_ms,
                     "max_err_dynamic": float(np.abs(out - expected).max()) / scale,
                     "max_err_fixed": float(np.abs(fixed_out - expected).max()) / scale})  # fmt: skip
        del fixed
    result = {"model": "ppocr_rec", "api": args.api, "device": session.device_name, "range": [lo, hi], "build_s": build_s,
              "dynamic_device_bytes": session.device_bytes, "rows": rows}  # fmt: skip
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"PP-OCRv4 rec, {args.api} on {session.device_name}: one artifact W={lo}..{hi} (built in {build_s:.1f} s, "
          f"{session.device_bytes / 2**20:.2f} MiB on the device) against a build per width")  # fmt: skip
    print(f"{'width':>6} {'fixed ms':>9} {'fixed MiB':>9} {'first ms':>9} {'steady ms':>9} {'ratio':>6} {'first/steady':>12} {'err dyn':>9} {'err fixed':>9}")
    for r in rows:
        print(f"{r['width']:>6} {r['fixed_ms']:>9.2f} {r['fixed_device_bytes'] / 2**20:>9.2f} {r['first_ms']:>9.2f} {r['steady_ms']:>9.2f} "
              f"{r['ratio']:>6.2f} {r['first_over_steady']:>12.2f} {r['max_err_dynamic']:>9.1e} {r['max_err_fixed']:>9.1e}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
