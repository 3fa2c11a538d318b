"""Why buffer reuse costs time on NVIDIA's OpenCL: three measurements in one run (GPU machine).

Usage (on the GPU machine, with a bundle from ``gpu_benchmark.py --build DIR``):
    python benchmarks/opencl_reuse_overhead.py DIR

1. sub-buffers alone: a trivial kernel launched 500 times on whole buffers, on sub-buffers of
   one parent, of two parents, and rotating over 64 sub-buffers of one parent (us per launch);
2. MobileNetV2's and ResNet-18's buffer plans with every tensor in its own allocation, in
   shared whole buffers, and in one arena (wall, device span, summed kernel time, MiB);
3. the host time of each ``set_args`` and ``clEnqueueNDRangeKernel`` call of one MobileNetV2 run
   for the same three storage plans.
Results and their reading: benchmarks/RESULTS.md ("Storage planning"). Needs numpy and pyopencl.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from backend_latency import load_artifact  # noqa: E402

PLANS = {"own allocations": dict(reuse=False), "shared buffers": dict(arenas=False), "arena": dict()}


def sub_buffers(cl, device) -> None:
    ctx = cl.Context([device])
    q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    kernel = cl.Kernel(cl.Program(ctx, "__kernel void k(__global const float* a, __global float* b) { int i = get_global_id(0); b[i] = a[i] * 2.0f; }").build(), "k")
    n = 1 << 16
    size = 4 * n

    def parent(count):
        return cl.Buffer(ctx, cl.mem_flags.READ_WRITE, count * size)

    one = parent(2)
    many = parent(64)
    cases = {
        "whole buffers": [(parent(1), parent(1))],
        "sub-buffers, one parent": [(one.get_sub_region(0, size), one.get_sub_region(size, size))],
        "sub-buffers, two parents": [(parent(1).get_sub_region(0, size), parent(1).get_sub_region(0, size))],
    }
    subs = [many.get_sub_region(i * size, size) for i in range(64)]
    cases["rotating 64 sub-buffers"] = [(subs[i], subs[(i + 1) % 64]) for i in range(64)]
    for name, pairs in cases.items():
        for _ in range(2):  # the second round is reported (warm)
            q.finish()
            start, events = time.perf_counter(), []
            for i in range(500):
                a, b = pairs[i % len(pairs)]
                kernel.set_args(a, b) if i % 2 == 0 else kernel.set_args(b, a)
                events.append(cl.enqueue_nd_range_kernel(q, kernel, (n,), (64,)))
            q.finish()
            wall = (time.perf_counter() - start) / 500 * 1e6
            span = (events[-1].profile.end - events[0].profile.start) / 500 / 1e3
        print(f"  {name:<26} wall {wall:6.1f} us/launch, device span {span:6.1f} us/launch")


def plans(bundle: str, device, models=("mobilenet_v2", "resnet18")) -> None:
    from relax_vk.runtime import load
    from relax_vk.serialization.artifact import Artifact
    from relax_vk.storage import assign_storage

    index = json.load(gzip.open(os.path.join(bundle, "index.json.gz"), "rt"))
    for model in models:
        entry = [e for e in index if e["model"] == model and e["api"] == "opencl" and e["plan"] in ("buffer_noreuse", "buffer")][0]
        base = load_artifact(bundle, entry)
        x = np.load(os.path.join(bundle, f"{model}.io.npz"))["x"]
        sessions = {name: load(Artifact(assign_storage(base.program, **kw)[0], base.source, base.constants), device=device) for name, kw in PLANS.items()}
        for name, s in sessions.items():
            lat = s.time([x], 50)
            s.run([x])
            busy = sum(k["ms"] for k in s.last_profile)
            print(f"  {model:<13} {name:<16} wall {lat['median']:.3f} ms, device span {s.last_device_ms:.3f} ms, kernels {busy:.3f} ms, "
                  f"{s.device_bytes / 2**20:.1f} MiB")  # fmt: skip


def host_calls(bundle: str, device, cl) -> None:
    from relax_vk.runtime import load
    from relax_vk.serialization.artifact import Artifact
    from relax_vk.storage import assign_storage

    index = json.load(gzip.open(os.path.join(bundle, "index.json.gz"), "rt"))
    entry = [e for e in index if e["model"] == "mobilenet_v2" and e["api"] == "opencl" and e["plan"] in ("buffer_noreuse", "buffer")][0]
    base = load_artifact(bundle, entry)
    x = np.load(os.path.join(bundle, "mobilenet_v2.io.npz"))["x"]
    for name, kw in PLANS.items():
        s = load(Artifact(assign_storage(base.program, **kw)[0], base.source, base.constants), device=device)
        s.time([x], 20)
        for tid, array in zip(s.program["inputs"], s.check_inputs([x])):
            s._write(tid, array)
        s.queue.finish()
        calls = []
        for step in s.program["steps"]:
            if step["op"] == "launch":
                kernel, grid, group = s.kernels[step["kernel"]]
                t0 = time.perf_counter()
                kernel.set_args(*[s.memory[i] for i in step["args"]])
                t1 = time.perf_counter()
                cl.enqueue_nd_range_kernel(s.queue, kernel, grid, group)
                calls.append(((t1 - t0) * 1e6, (time.perf_counter() - t1) * 1e6))
        s.queue.finish()
        h = np.array(calls)
        print(f"  {name:<16} set_args median {np.median(h[:, 0]):.1f} us; enqueue median {np.median(h[:, 1]):.1f} us, max {h[:, 1].max():.0f} us; "
              f"{int((h[:, 1] > 50).sum())} of {len(h)} enqueues over 50 us")  # fmt: skip


def main(argv=None) -> int:
    import pyopencl as cl

    from relax_vk.runtime import select_device

    bundle = (argv or sys.argv[1:] or [".gpu/bench"])[0]
    device = select_device("gpu")
    print(f"{device.name.strip()}\n1. sub-buffers alone")
    sub_buffers(cl, device)
    print("2. buffer plans by storage")
    plans(bundle, device)
    print("3. host time per call, MobileNetV2 buffer plan")
    host_calls(bundle, device, cl)
    return 0


if __name__ == "__main__":
    sys.exit(main())
