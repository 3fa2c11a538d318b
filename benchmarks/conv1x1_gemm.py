"""1x1 convs as packed GEMMs against the direct conv schedule: whole models, both APIs, both memory
kinds, side by side in one process (relax_vk.schedules.conv1x1).

    python benchmarks/conv1x1_gemm.py --build .gpu/gemm [--models resnet18 mobilenet_v2] [--device-name 'NVIDIA H100 80GB HBM3']  # here (TVM)
    python3 benchmarks/conv1x1_gemm.py --run .gpu/gemm [--repeat 50] [--json out.json]                                          # GPU machine
    python benchmarks/conv1x1_gemm.py --local --models mobilenet_v2@96 --repeat 5       # build and run here (pocl, lavapipe)

Every model (at 224x224, or ``name@size``) is built for each API and memory plan (``texture``,
``buffer``) three times: every 1x1 conv the GEMM takes as a GEMM (``gemm``, its default block or
a tuned GEMM block), every one on the direct schedule (``direct``, today's kernel: tuned or its
default) and the untuned/tuned default rule (``auto``). ``--device-name`` builds for that device's
tuning database (records measured before the GEMM existed are direct configurations: ``gemm``
then forces the GEMM's default block). ``--run`` (numpy, pyopencl, wgpu; no TVM) times every
build of a model in rounds (``benchmarks/gpu_benchmark.py``'s interleaving: clock changes fall
on all alike), checks each output against PyTorch's CPU output, and sums the device time of the
1x1 conv kernels from profiled runs; the table shows wall ms, 1x1 device ms and gemm/direct.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from backend_latency import load_artifact, store_constants  # noqa: E402  (the transport bundle format)
from gpu_benchmark import APIS, MODELS, PROFILED_RUNS, _interleaved, _model_size  # noqa: E402

KERNELS = ("direct", "gemm", "auto")
PLANS = ("texture", "buffer")


def _is_1x1(kernel: dict) -> bool:
    return "_k1x1_" in str(kernel.get("workload", ""))


def build(outdir: str, models, device_name=None, apis=APIS, plans=PLANS, kernels=KERNELS) -> None:
    import torch

    import relax_vk
    from relax_vk.frontends import from_torch
    from relax_vk.schedules.conv2d import conv1x1_kernel
    from relax_vk.zoo import build_zoo_model

    os.makedirs(os.path.join(outdir, "blobs"), exist_ok=True)
    index = []
    for spec in models:
        name, size = _model_size(spec)
        model, x = build_zoo_model(name, input_shape=size)
        mod = from_torch(model, (x,))
        with torch.no_grad():
            np.savez(os.path.join(outdir, f"{name}.io.npz"), x=x.numpy(), y=model(x).numpy())
        for api in apis:
            make = relax_vk.target.vulkan if api == "vulkan" else relax_vk.target.opencl
            for plan in plans:
                for kind in kernels:
                    t0 = time.perf_counter()
                    with conv1x1_kernel(kind):
                        compiled = relax_vk.build(mod, target=make(device_name=device_name), options=relax_vk.ScopeOptions(prefer=plan),
                                                  model={"zoo": name})  # fmt: skip
                    artifact = compiled.artifact()
                    ones = [k for k in artifact.program["kernels"] if _is_1x1(k)]
                    gemms = sum(k["config"].endswith("_gemm") for k in ones)
                    index.append({"model": name, "api": api, "plan": plan, "kernel": kind, "program": artifact.program, "source": artifact.source,
                                  "constants": store_constants(outdir, artifact)})  # fmt: skip
                    print(f"built {name} {api} {plan} {kind}: {len(ones)} 1x1 kernels, {gemms} GEMMs, in {time.perf_counter() - t0:.1f} s", flush=True)
    with gzip.open(os.path.join(outdir, "index.json.gz"), "wt") as f:
        json.dump(index, f)


def run(outdir: str, repeat: int, json_path: str = "", devices=None) -> list:
    from relax_vk.runtime import load, select_device

    devices = devices or {"opencl": select_device("opencl", None), "vulkan": select_device("vulkan", None)}
    with gzip.open(os.path.join(outdir, "index.json.gz"), "rt") as f:
        index = json.load(f)
    rows = []
    for name in dict.fromkeys(e["model"] for e in index):
        io = np.load(os.path.join(outdir, f"{name}.io.npz"))
        x, ref = io["x"], io["y"]
        entries = [e for e in index if e["model"] == name and e["api"] in devices]
        sessions = [load(load_artifact(outdir, e), device=devices[e["api"]]) for e in entries]
        outs = [s.run([x])[0] for s in sessions]
        laps = _interleaved(sessions, x, repeat)
        results = {}
        for entry, session, out, lap in zip(entries, sessions, outs, laps):
            info = {k["name"]: k for k in session.program["kernels"]}
            spans, ones = [], []
            for _ in range(PROFILED_RUNS):
                session.run([x])
                spans.append(session.last_device_ms)
                ones.append(sum(k["ms"] for k in session.last_profile if _is_1x1(info.get(k["name"], {}))))
            results[(entry["api"], entry["plan"], entry["kernel"])] = {
                "wall_ms": float(np.median(lap)), "device_ms": float(np.median(spans)), "conv1x1_ms": float(np.median(ones)),
                "max_err": float(np.max(np.abs(out - ref))), "rel_err": float(np.max(np.abs(out - ref)) / np.max(np.abs(ref))),
                "gemms": sum(1 for k in session.program["kernels"] if _is_1x1(k) and k["config"].endswith("_gemm")),
            }  # fmt: skip
        del sessions
        print(f"\n{name} at {'x'.join(map(str, x.shape))}: ms per inference (wall: median of {repeat}; 1x1: device time of the 1x1 "
              f"conv kernels, median of {PROFILED_RUNS} profiled runs)")  # fmt: skip
        header = (f"{'api':<7} {'plan':<8} {'direct wall':>11} {'gemm wall':>10} {'auto wall':>10} {'direct 1x1':>10} {'gemm 1x1':>9} "
                  f"{'gemm/direct 1x1':>15} {'max rel err':>11}")  # fmt: skip
        print(header)
        print("-" * len(header))
        for api in dict.fromkeys(e["api"] for e in entries):
            for plan in dict.fromkeys(e["plan"] for e in entries):
                d, g, a = (results.get((api, plan, k)) for k in KERNELS)
                if not (d and g):
                    continue
                ratio = g["conv1x1_ms"] / d["conv1x1_ms"] if d["conv1x1_ms"] > 0 else float("nan")
                err = max(r["rel_err"] for r in (d, g, a) if r)
                print(f"{api:<7} {plan:<8} {d['wall_ms']:>11.3f} {g['wall_ms']:>10.3f} {a['wall_ms'] if a else float('nan'):>10.3f} "
                      f"{d['conv1x1_ms']:>10.3f} {g['conv1x1_ms']:>9.3f} {ratio:>15.2f} {err:>11.1e}", flush=True)  # fmt: skip
        rows.append({"model": name, "results": [{"api": k[0], "plan": k[1], "kernel": k[2], **v} for k, v in results.items()]})
    if json_path:
        with open(json_path, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", metavar="DIR")
    p.add_argument("--run", metavar="DIR")
    p.add_argument("--local", action="store_true", help="build into a temporary folder and run on pocl and lavapipe")
    p.add_argument("--models", nargs="*", default=list(MODELS))
    p.add_argument("--apis", nargs="*", default=list(APIS))
    p.add_argument("--plans", nargs="*", default=list(PLANS))
    p.add_argument("--kernels", nargs="*", default=list(KERNELS), choices=KERNELS, help="--build/--local: the 1x1 policies to build")
    p.add_argument("--device-name", default=None, help="--build: for this device's tuning database (e.g. 'NVIDIA H100 80GB HBM3')")
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--json", default="")
    args = p.parse_args()
    if args.local:
        import tempfile

        from relax_vk.runtime import select_device

        with tempfile.TemporaryDirectory() as tmp:
            build(tmp, args.models, args.device_name, args.apis, args.plans, args.kernels)
            devices = {"opencl": select_device("opencl", "pocl"), "vulkan": select_device("vulkan", "lavapipe")}
            run(tmp, args.repeat, args.json, {api: devices[api] for api in args.apis})
    elif args.build:
        build(args.build, args.models, args.device_name, args.apis, args.plans, args.kernels)
    elif args.run:
        run(args.run, args.repeat, args.json)
    else:
        p.error("give --build DIR, --run DIR or --local")
    return 0


if __name__ == "__main__":
    sys.exit(main())
