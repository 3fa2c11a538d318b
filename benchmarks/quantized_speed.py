"""int8 models against relax_vk's own float16 and float32, side by side in one process: the zoo's
ResNet-18 and MobileNetV2 at ``--size`` (224 by default) exported to ONNX, quantized by
onnxruntime's ``quantize_static`` (QDQ, int8 symmetric weights: its default), each built as

* ``fp32`` and ``fp16`` (``ScopeOptions(precision="fp16")``: half texels) from the float model;
* ``int8``: the quantized model, its conv weights in textures of signed normalized bytes
  (``snorm8``: the texture unit returns ``byte / 127``, :mod:`relax_vk.passes.scope.quantized_weight_texels`);
* ``int8 wbuf``: the same with its int8 weights in buffers, read as integers by the conv kernels
  (``ScopeOptions(weights_in_texture=False)``: the path of a weight holding -128);
* ``int8 textures``: the quantized model in textures whatever the tuning database measured for its
  convs (``ScopeOptions(prefer="texture")``; ``int8`` takes the kind the database says is faster);
* ``int8 fp16``: the same with half texels (activations between kernels in float16);
* ``int8 dequantize``: the same, its conv weights dequantized by a kernel at every run (the build
  before the conv read integers; :func:`quantized_weights.dequantize_kernels`).

Per model and API: kernels per run, the session's device bytes, the median latency and its ratio
to ``fp16``, and the largest difference of each int8 build from ``int8`` (a share of the
output's range). Run here (``--device pocl`` / ``lavapipe``), or in two steps for a machine without TVM:

    python benchmarks/quantized_speed.py --build .gpu/q8 --apis opencl vulkan --device-name "NVIDIA H200"
    python3 benchmarks/quantized_speed.py --run .gpu/q8 --device gpu --repeat 50     # GPU machine

The bundle carries the int8 weights; the float ones are refilled with seeded values there
(``backend_latency.store_constants``: their speed does not depend on the values), so only the int8
builds are compared for numbers.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from backend_latency import load_artifact, store_constants  # noqa: E402

MODELS = ("resnet18", "mobilenet_v2")
VARIANTS = ("fp32", "fp16", "int8", "int8 wbuf", "int8 textures", "int8 fp16", "int8 dequantize")
DEVICES = {"opencl": "pocl", "vulkan": "lavapipe"}


def onnx_models(name: str, size: int, folder: str):
    """``(float ONNX path, int8 QDQ ONNX path, input)``."""
    import torch

    from quantized_conformance import preprocess, quantize
    from relax_vk.zoo import build_zoo_model

    model, x = build_zoo_model(name, input_shape=(1, 3, size, size))
    path = os.path.join(folder, f"{name}.onnx")
    torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"], dynamo=False)
    rng = np.random.RandomState(0)
    calibration = [rng.randn(1, 3, size, size).astype("float32") for _ in range(4)]
    pre = preprocess(path, os.path.join(folder, f"{name}.pre.onnx"))
    q = quantize(pre, "qdq", calibration, os.path.join(folder, f"{name}.qdq.onnx"))
    return path, q, rng.randn(1, 3, size, size).astype("float32")


def builds(path: str, qpath: str, api: str, device_name=None) -> dict:
    """``{variant: artifact}``."""
    import relax_vk
    from quantized_weights import dequantize_kernels
    from relax_vk.core.options import ScopeOptions
    from relax_vk.frontends import from_onnx

    target = (relax_vk.target.vulkan if api == "vulkan" else relax_vk.target.opencl)(device_name=device_name)
    out = {
        "fp32": relax_vk.build(from_onnx(path), target).artifact(),
        "fp16": relax_vk.build(from_onnx(path), target, options=ScopeOptions(precision="fp16")).artifact(),
        "int8": relax_vk.build(from_onnx(qpath), target).artifact(),
        "int8 wbuf": relax_vk.build(from_onnx(qpath), target, options=ScopeOptions(weights_in_texture=False)).artifact(),
        "int8 textures": relax_vk.build(from_onnx(qpath), target, options=ScopeOptions(prefer="texture")).artifact(),
        "int8 fp16": relax_vk.build(from_onnx(qpath), target, options=ScopeOptions(precision="fp16")).artifact(),
    }
    with dequantize_kernels():
        out["int8 dequantize"] = relax_vk.build(from_onnx(qpath), target).artifact()
    return out


def measure(artifacts: dict, x: np.ndarray, device: str, repeat: int, rounds: int = 3) -> dict:
    from relax_vk.runtime import load

    sessions = {v: load(a, device=device) for v, a in artifacts.items()}
    outputs = {v: s.run([x])[0] for v, s in sessions.items()}
    times = {v: [] for v in sessions}
    for _ in range(rounds):  # (alternating: a slow spell of the machine hits every build)
        for v, s in sessions.items():
            times[v].append(s.time([x], repeat=repeat)["median"])
    ref = outputs["int8"]
    rows = []
    for v, s in sessions.items():
        ms = float(np.median(times[v]))
        rows.append({"variant": v, "kernels": sum(1 for st in artifacts[v].program["steps"] if st["op"] == "launch"),
                     "device_bytes": s.device_bytes, "ms": ms,
                     "from_int8": float(np.abs(outputs[v] - ref).max() / np.ptp(ref)) if v.startswith("int8") else None})  # fmt: skip
    fp16 = next(r["ms"] for r in rows if r["variant"] == "fp16")
    for r in rows:
        r["over_fp16"] = r["ms"] / fp16
    return {"device": next(iter(sessions.values())).device_name, "rows": rows}


def print_table(result: dict) -> None:
    print(f"\n**{result['model']} at {result['size']}, {result['api']} on {result['device']}**\n")
    print("| build | kernels/run | device MiB | median ms | / fp16 | from int8 / range |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in result["rows"]:
        diff = "" if r.get("from_int8") is None else f"{r['from_int8']:.1e}"
        print(f"| {r['variant']} | {r['kernels']} | {r['device_bytes'] / (1 << 20):.2f} | {r['ms']:.3f} | {r['over_fp16']:.2f} | {diff} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(MODELS))
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--apis", nargs="+", default=["opencl"], choices=("opencl", "vulkan"))
    parser.add_argument("--device", default=None, help="default: pocl (OpenCL), lavapipe (Vulkan)")
    parser.add_argument("--device-name", default=None, help="plan with this device's tuning records (the GPU's name)")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--build", metavar="DIR", help="write the bundle for --run on another machine, and exit")
    parser.add_argument("--run", metavar="DIR", help="run a bundle (needs the runtime and numpy only)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = []
    if args.run:
        with gzip.open(os.path.join(args.run, "index.json.gz"), "rt") as f:
            index = json.load(f)
        inputs = np.load(os.path.join(args.run, "inputs.npz"))
        for group in index["groups"]:
            print(f"[{time.strftime('%H:%M:%S')}] {group['model']} on {group['api']} ...", file=sys.stderr, flush=True)
            artifacts = {e["variant"]: load_artifact(args.run, e) for e in group["entries"]}
            try:
                measured = measure(artifacts, inputs[group["model"]], args.device or DEVICES[group["api"]], args.repeat)
            except Exception as err:  # a row, not the end of the campaign
                measured = {"device": args.device, "rows": [], "error": f"{type(err).__name__}: {err}"}
            results.append({"model": group["model"], "api": group["api"], "size": group["size"], **measured})
    else:
        weights: dict = {}
        groups, inputs = [], {}
        if args.build:
            os.makedirs(os.path.join(args.build, "blobs"), exist_ok=True)
        with tempfile.TemporaryDirectory() as folder:
            for name in args.models:
                path, qpath, x = onnx_models(name, args.size, folder)
                inputs[name] = x
                for api in args.apis:
                    artifacts = builds(path, qpath, api, args.device_name)
                    if args.build:
                        groups.append({"model": name, "api": api, "size": args.size, "entries": [
                            {"variant": v, "program": a.program, "source": a.source,
                             "constants": store_constants(args.build, a, weights, refill_over=None if v.startswith("int8") else 1 << 16)}
                            for v, a in artifacts.items()]})  # fmt: skip
                        print(f"built {name} for {api}", file=sys.stderr, flush=True)
                        continue
                    results.append({"model": name, "api": api, "size": args.size, **measure(artifacts, x, args.device or DEVICES[api], args.repeat)})
        if args.build:
            np.savez(os.path.join(args.build, "inputs.npz"), **inputs)
            with gzip.open(os.path.join(args.build, "index.json.gz"), "wt") as f:
                json.dump({"groups": groups}, f)
            return 0
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for r in results:
            print(f"{r['model']} {r['api']}: {r['error']}") if "error" in r else print_table(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
