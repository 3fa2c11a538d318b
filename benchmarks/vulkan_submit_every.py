"""Native Vulkan: how often a run submits what it has recorded (``$RVK_SUBMIT_EVERY``), against the
native OpenCL runtime on the same plan.

One fresh process per value (the library reads the variable when a session is made): the bundle's
``auto`` plan of the model on both APIs through ``load()``, outputs checked against the
bundle's reference, then ``--repeat`` unprofiled runs of each session interleaved; prints the median
wall ms of each and vulkan/opencl. The two sessions alternate two GPU contexts, so absolute times
run higher than gpu_benchmark's; compare the ratios.

Usage (GPU machine, a gpu_benchmark.py bundle):
``python3 benchmarks/vulkan_submit_every.py .gpu/bench --models mobilenet_v2 resnet18 --values 0 8 16 32``
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time

import numpy as np


def one(bundle: str, model: str, repeat: int, devices: dict) -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gpu_benchmark import load_artifact

    from relax_vk.runtime import load

    with gzip.open(os.path.join(bundle, "index.json.gz"), "rt") as f:
        index = json.load(f)
    io = np.load(os.path.join(bundle, f"{model}.io.npz"))
    x, ref = io["x"], io["y"]
    sessions = {e["api"]: load(load_artifact(bundle, e), device=devices[e["api"]]) for e in index if e["model"] == model and e["plan"] == "auto"}
    for api, session in sessions.items():
        out = session.run([x])[0]
        assert np.max(np.abs(out - ref)) <= 1e-3 * np.max(np.abs(ref)), f"{api}: wrong outputs"
        session.profiling = False
    laps = {api: [] for api in sessions}
    for _ in range(repeat):
        for api, session in sessions.items():
            t0 = time.perf_counter()
            session.run([x])
            laps[api].append((time.perf_counter() - t0) * 1e3)
    ocl, vk = float(np.median(laps["opencl"])), float(np.median(laps["vulkan"]))
    print(f"{model:14} submit every {os.environ.get('RVK_SUBMIT_EVERY', '(default)'):>9}: opencl {ocl:.3f} ms, vulkan {vk:.3f} ms, "
          f"vulkan/opencl {vk / ocl:.2f}", flush=True)  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bundle")
    p.add_argument("--models", nargs="*", default=["mobilenet_v2", "resnet18"])
    p.add_argument("--values", nargs="*", default=["0", "8", "16", "32"])
    p.add_argument("--repeat", type=int, default=150)
    p.add_argument("--opencl-device", default="gpu", help="the native OpenCL device (default gpu; pocl on a CPU machine)")
    p.add_argument("--vulkan-device", default="gpu", help="the native Vulkan adapter (default gpu; lavapipe on a CPU machine)")
    p.add_argument("--one", metavar="MODEL", help=argparse.SUPPRESS)  # (the child process)
    args = p.parse_args()
    if args.one:
        one(args.bundle, args.one, args.repeat, {"opencl": args.opencl_device, "vulkan": args.vulkan_device})
        return 0
    for model in args.models:
        for value in args.values:
            env = dict(os.environ, RVK_SUBMIT_EVERY=value)
            child = [sys.executable, __file__, args.bundle, "--one", model, "--repeat", str(args.repeat)]
            subprocess.run(child + ["--opencl-device", args.opencl_device, "--vulkan-device", args.vulkan_device], env=env, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
