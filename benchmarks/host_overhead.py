"""Host cost of a run: how much of the wall clock is the host recording and submitting dispatches.

On a desktop GPU a small model's run is bound by host time per dispatch (pyopencl's enqueue,
wgpu's recording and validation), not by the kernels. This script loads every plan of a benchmark
bundle (``gpu_benchmark.py --build``) in one process, in two runtime variants per API, and prints
the median wall-clock of interleaved runs next to the host time of recording one run's steps:

* OpenCL ``rebind``: every launch sets its kernel's arguments again and timed runs go through the
  profiling queue (the runtime before commit b9132f9, 2026-11-23); ``current``: arguments bound once per session,
  timed runs on a queue without profiling (:class:`relax_vk.runtime.OpenCLSession`);
* Vulkan ``submit0``: one submission at the end of the run; ``current``: a submission every
  ``VulkanSession.submit_every`` steps, so the GPU runs while the host records the rest.

Usage (on the GPU machine, with the bundle carried there; ``--devices pocl lavapipe`` here)::

    python3 benchmarks/host_overhead.py .gpu/tbench --models vit_small convnext --repeat 30
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
from backend_latency import load_artifact  # noqa: E402  (the same transport bundle format)


def _opencl_rebind(base):
    class Rebind(base):
        """Arguments set per launch per run; timed on the profiling queue."""

        def _enqueue_rebinding(self):
            cl, q = self.cl, self.queue
            for step in self.program["steps"]:
                if step["op"] == "launch":
                    kernel, gsize, lsize = self.kernels[step["kernel"]]
                    kernel.set_args(*[self.memory[i] for i in step["args"]])
                    cl.enqueue_nd_range_kernel(q, kernel, gsize, lsize)
                else:
                    self._copy(step["src"], step["dst"])

        def run(self, inputs):  # (timed runs too: always on the profiling queue)
            for tid, array in zip(self.program["inputs"], self.check_inputs(inputs)):
                self._write(tid, array)
            self._enqueue_rebinding()
            outputs = [self.to_host(tid, self._read(tid)) for tid in self.program["outputs"]]
            self.queue.finish()
            return outputs

        def record(self):
            start = time.perf_counter()
            self._enqueue_rebinding()
            spent = time.perf_counter() - start
            self.queue.finish()
            return spent

    return Rebind


def _opencl_current(base):
    class Current(base):
        def record(self):
            """Host seconds to enqueue one unprofiled run (:meth:`OpenCLSession.enqueue_steps`)."""
            start = time.perf_counter()
            self.enqueue_steps(self.timing_queue)
            spent = time.perf_counter() - start
            self.timing_queue.finish()
            return spent

    return Current


def _vulkan(base, every: int):
    class Chunked(base):
        submit_every = every

        def record(self):
            """Host seconds to record and submit one unprofiled run (:meth:`VulkanSession.submit_steps`)."""
            profiling, self.profiling = self.profiling, False
            try:
                start = time.perf_counter()
                self.submit_steps()
                spent = time.perf_counter() - start
            finally:
                self.profiling = profiling
            self._read(self.program["outputs"][0])
            return spent

    return Chunked


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle")
    parser.add_argument("--models", nargs="*")
    parser.add_argument("--plans", nargs="*", default=["texture", "buffer"])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--devices", nargs=2, default=[None, None], metavar=("OPENCL", "VULKAN"))
    args = parser.parse_args(argv)

    from relax_vk.runtime import select_adapter, select_device
    from relax_vk.runtime.opencl.session import OpenCLSession
    from relax_vk.runtime.vulkan.session import VulkanSession

    devices = {"opencl": select_device(args.devices[0]), "vulkan": select_adapter(args.devices[1])}
    variants = {
        "opencl": [("rebind", _opencl_rebind(OpenCLSession)), ("current", _opencl_current(OpenCLSession))],
        "vulkan": [("submit0", _vulkan(VulkanSession, 0)), ("current", _vulkan(VulkanSession, VulkanSession.submit_every))],
    }
    with gzip.open(os.path.join(args.bundle, "index.json.gz"), "rt") as f:
        index = [e for e in json.load(f) if (not args.models or e["model"] in args.models) and e["plan"] in args.plans]
    print(f"{'model':<11} {'api':<7} {'plan':<16} {'runtime':<8} {'wall ms':>8} {'record ms':>9} {'steps':>5} {'us/step':>7}")
    for name in dict.fromkeys(e["model"] for e in index):
        io = np.load(os.path.join(args.bundle, f"{name}.io.npz"))
        x, ref = io["x"], io["y"]
        sessions = []
        for entry in [e for e in index if e["model"] == name]:
            artifact = load_artifact(args.bundle, entry)
            for variant, make in variants[entry["api"]]:
                session = make(artifact, devices[entry["api"]])
                err = float(np.max(np.abs(session.run([x])[0] - ref)))
                if err > 1e-3 * max(1.0, float(np.max(np.abs(ref)))):
                    raise SystemExit(f"{name} {entry['api']} {entry['plan']} {variant}: wrong output (max error {err:.2e})")
                sessions.append((entry, variant, session))
        walls = [[] for _ in sessions]
        records = [[] for _ in sessions]
        for r in range(args.repeat):  # interleaved rounds, as gpu_benchmark times plans
            for i in range(len(sessions)):
                k = (i + r) % len(sessions)
                entry, _, session = sessions[k]
                walls[k].append(session.time([x], 1)["median"])
                for tid, array in zip(session.program["inputs"], session.check_inputs([x])):
                    session._write(tid, array)
                records[k].append(session.record() * 1e3)
        for (entry, variant, session), wall, rec in zip(sessions, walls, records):
            steps = len(session.program["steps"])
            print(f"{name:<11} {entry['api']:<7} {entry['plan']:<16} {variant:<8} {np.median(wall):>8.3f} {np.median(rec):>9.3f} {steps:>5} "
                  f"{1e3 * np.median(rec) / steps:>7.1f}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
