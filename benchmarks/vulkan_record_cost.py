"""Host time of recording a run on Vulkan: wgpu-py's pass methods against the direct wgpu-native
calls the session makes (``VulkanSession._recorder``), side by side in one process.

Every Vulkan run re-records its dispatches (WebGPU has no reusable compute command buffers); each
dispatch is three calls (set pipeline, set bind group, dispatch). This script loads every Vulkan
entry of a ``gpu_benchmark.py --build`` bundle twice, unprofiled, one session recording through
wgpu-py's Python wrappers and one through the direct C calls, checks that both give the same
outputs, and times them in interleaved rounds: the host microseconds of recording and submitting
one run (``submit_steps``, the GPU not waited for) and the wall milliseconds of a whole inference.

Usage: ``python benchmarks/vulkan_record_cost.py BUNDLE [--repeat N] [--models M ...] [--device D]``
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
from backend_latency import load_artifact  # noqa: E402


def _python_recorder(compute, pipeline, group, groups) -> None:
    compute.set_pipeline(pipeline)
    compute.set_bind_group(0, group)
    compute.dispatch_workgroups(*groups)


def _host_us(session, repeat: int) -> float:
    laps = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        session.submit_steps()
        laps.append((time.perf_counter() - t0) * 1e6)
        session.device.queue.read_buffer(session.memory[session.program["outputs"][0]], 0, 4)  # wait for the GPU
    return float(np.median(laps))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bundle")
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--models", nargs="*", default=None)
    p.add_argument("--device", default=None, help="Vulkan adapter (default: a GPU where there is one)")
    args = p.parse_args()
    from relax_vk.runtime import load, select_adapter

    adapter = select_adapter(args.device)
    print(f"vulkan: {adapter.info['device']}")
    with gzip.open(os.path.join(args.bundle, "index.json.gz"), "rt") as f:
        entries = [e for e in json.load(f) if e["api"] == "vulkan" and (not args.models or e["model"] in args.models)]
    header = f"{'model':<14} {'plan':<8} {'steps':>5} {'host us wgpu-py':>15} {'host us direct':>14} {'per step saved':>14} {'wall ms wgpu-py':>15} {'wall ms direct':>14} {'max |diff|':>10}"
    print(header)
    print("-" * len(header))
    for entry in entries:
        x = np.load(os.path.join(args.bundle, f"{entry['model']}.io.npz"))["x"]
        artifact = load_artifact(args.bundle, entry)
        py, direct = load(artifact, device=adapter, profile=False), load(artifact, device=adapter, profile=False)
        py._record = _python_recorder
        outs = [s.run([x])[0] for s in (py, direct)]
        host = {id(s): [] for s in (py, direct)}
        wall = {id(s): [] for s in (py, direct)}
        for r in range(args.repeat):  # interleaved rounds, each starting with the other session
            for s in ((py, direct) if r % 2 else (direct, py)):
                host[id(s)].append(_host_us(s, 1))
                wall[id(s)].append(s.time([x], 1)["median"])
        steps = len(py.steps)
        hp, hd = (float(np.median(host[id(s)])) for s in (py, direct))
        wp, wd = (float(np.median(wall[id(s)])) for s in (py, direct))
        diff = float(np.max(np.abs(outs[0] - outs[1])))
        print(f"{entry['model']:<14} {entry['plan']:<8} {steps:>5} {hp:>15.0f} {hd:>14.0f} {(hp - hd) / steps:>14.2f} {wp:>15.3f} {wd:>14.3f} {diff:>10.1e}", flush=True)
        del py, direct
    return 0


if __name__ == "__main__":
    sys.exit(main())
