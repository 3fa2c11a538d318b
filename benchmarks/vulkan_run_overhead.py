"""What a Vulkan run costs outside its kernels, step by step, on both runtimes, beside OpenCL, in
one process: recording the next run ahead (``record_ahead``) and polling for the outputs before
blocking (``spin``).

* Recording. WebGPU command buffers are single-use, so every run records its dispatches again;
  wgpu-native spends several microseconds of host time per dispatch doing so. A run that records
  its own commands makes the GPU wait for (part of) that recording; with ``record_ahead`` a run
  submits the command buffer the last run recorded for it and records its successor's while the
  GPU runs (``VulkanSession.record_ahead``; ``$RVK_RECORD_AHEAD`` when a native session is made).
* Waiting. A blocking wait for the GPU (wgpu's ``DevicePoll(wait)``; wgpu-py's ``map_sync``, which
  also hands the wait to a polling thread) wakes the host well after the GPU is done; a run that
  polls without blocking for up to ``spin`` ms first sees it at once (``VulkanSession.spin_ms``;
  ``$RVK_SPIN_US``).

  Where the last wait was longer than that budget, a wait first sleeps until shortly before the
  GPU should be done (``readback.sleep_before_polling``); "spin at once" (wgpu-py) polls from the
  start of every wait instead, as the first version of polling did.

The script loads the bundle's plan of each model on OpenCL (pyopencl and the native library) and
on Vulkan in three variants per runtime: each run records its own and blocks (before), records
ahead and blocks, records ahead and spins (the default), and for wgpu-py a fourth, spinning at
once. wgpu-py's own ``map_sync`` is the first variant's wait. Besides the wall time it prints the
process's CPU time per inference (every thread: the host's cost of polling). It checks every session's outputs against the bundle's reference over
three runs (the later ones run what the run before recorded), then times them in ``--rounds``
rounds (each round: ``--repeat`` unprofiled runs of every session in turn, the order rotated by
one per round) and prints the median of the rounds' medians with the ratios.

Usage (GPU machine, a ``gpu_benchmark.py --build`` bundle; the native library built):
``RELAX_VK_NATIVE_LIB=native/build/librelax_vk_native.so python3 benchmarks/vulkan_run_overhead.py .gpu/bench --models mobilenet_v2 resnet18``
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_benchmark import load_artifact  # noqa: E402

#: (label, api, native runtime, record ahead, spin ms); None: the runtime's default
VARIANTS = [
    ("opencl pyopencl", "opencl", False, None, None),
    ("opencl native", "opencl", True, None, None),
    ("vulkan wgpu-py, each run, block", "vulkan", False, False, 0.0),
    ("vulkan wgpu-py, ahead, block", "vulkan", False, True, 0.0),
    ("vulkan wgpu-py, ahead, spin", "vulkan", False, True, 2.0),
    ("vulkan wgpu-py, ahead, spin at once", "vulkan", False, True, -2.0),
    ("vulkan native, each run, block", "vulkan", True, False, 0.0),
    ("vulkan native, ahead, block", "vulkan", True, True, 0.0),
    ("vulkan native, ahead, spin", "vulkan", True, True, 2.0),
]


def _map_at_once(map_, buffers, adaptive=True):
    return map_(buffers, adaptive=False)


def open_session(artifact, device, native: bool, ahead, spin_ms):
    from relax_vk.runtime import load
    from relax_vk.runtime.vulkan.readback import Mapping

    if native and ahead is not None:  # (read when the native session is made)
        os.environ["RVK_RECORD_AHEAD"] = "1" if ahead else "0"
        os.environ["RVK_SPIN_US"] = str(int(spin_ms * 1000))
    session = load(artifact, device=device, native=native)
    if not native and ahead is not None:
        session.record_ahead = ahead
        if ahead:
            session.mapping.spin_ms = abs(spin_ms)
            if spin_ms < 0:  # (polls from the start of every wait: no sleep first, no estimate)
                session.mapping.map = functools.partial(_map_at_once, session.mapping.map)
        else:  # (the session before this change: wgpu-py's own map_sync)
            session.mapping = Mapping()
    os.environ.pop("RVK_RECORD_AHEAD", None)
    os.environ.pop("RVK_SPIN_US", None)
    return session


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bundle")
    p.add_argument("--models", nargs="*", default=None)
    p.add_argument("--plan", default="auto", help="the bundle's plan to load (default auto)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--opencl-device", default=None, help="OpenCL device (default: a GPU where there is one; pocl on a CPU machine)")
    p.add_argument("--vulkan-device", default=None, help="Vulkan adapter (default: a GPU where there is one; lavapipe on a CPU machine)")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    from relax_vk.runtime import select_adapter, select_device

    devices = {"opencl": select_device(args.opencl_device), "vulkan": select_adapter(args.vulkan_device)}
    print(f"opencl: {devices['opencl'].name.strip()}; vulkan: {devices['vulkan'].info['device']}")
    with gzip.open(os.path.join(args.bundle, "index.json.gz"), "rt") as f:
        index = [e for e in json.load(f) if e["plan"] == args.plan and (not args.models or e["model"] in args.models)]
    rows = []
    for model in dict.fromkeys(e["model"] for e in index):
        io = np.load(os.path.join(args.bundle, f"{model}.io.npz"))
        x, ref = io["x"], io["y"]
        entries = {e["api"]: e for e in index if e["model"] == model}
        variants = [v for v in VARIANTS if v[1] in entries]
        sessions = [open_session(load_artifact(args.bundle, entries[v[1]]), devices[v[1]], *v[2:]) for v in variants]
        errors = []
        for (label, *_), session in zip(variants, sessions):
            session.profiling = False
            outs = [session.run([x])[0] for _ in range(3)]  # (the second and third run what the one before recorded)
            err = max(float(np.max(np.abs(o - ref))) / float(np.max(np.abs(ref))) for o in outs)
            if err > 1e-3:
                raise SystemExit(f"{model} {label}: wrong outputs (relative error {err:.1e})")
            errors.append(err)
        medians, cpu = [[] for _ in sessions], [[] for _ in sessions]
        for r in range(args.rounds):
            for i in range(len(sessions)):
                k = (i + r) % len(sessions)
                c0 = time.process_time()
                medians[k].append(sessions[k].time([x], args.repeat)["median"])
                cpu[k].append((time.process_time() - c0) * 1e3 / (args.repeat + 1))  # (time() runs once more first)
        wall = {label: float(np.median(m)) for (label, *_), m in zip(variants, medians)}
        cpu_ms = {label: float(np.median(c)) for (label, *_), c in zip(variants, cpu)}
        print(f"\n{model} ({args.plan} plan; {entries[variants[0][1]].get('scope_rule', {}).get('kind', '?')}), ms per inference, "
              f"median of {args.rounds} rounds' medians of {args.repeat}")  # fmt: skip
        for (label, *_), err in zip(variants, errors):
            print(f"  {label:<37} {wall[label]:>7.3f} ms   host CPU {cpu_ms[label]:>7.3f} ms   rel err {err:.1e}")
        for runtime, ocl in (("wgpu-py", "opencl pyopencl"), ("native", "opencl native")):
            steps = [wall.get(f"vulkan {runtime}, {v}") for v in ("each run, block", "ahead, block", "ahead, spin")]
            if all(steps) and ocl in wall:
                print(f"  {runtime}: vulkan/opencl {' -> '.join(f'{v / wall[ocl]:.2f}' for v in steps)} "
                      f"(recording ahead {steps[1] / steps[0]:.2f}x, spinning {steps[2] / steps[1]:.2f}x)")
        rows.append({"model": model, "plan": args.plan, "wall_ms": wall, "cpu_ms": cpu_ms, "rel_err": dict(zip([v[0] for v in variants], errors))})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
