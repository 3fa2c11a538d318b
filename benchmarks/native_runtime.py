"""The native runtime (native/, C) next to the Python runtime on one device: pyopencl on OpenCL,
wgpu-py on Vulkan (``--target vulkan``; the native one runs the same wgpu-native library).

For each model: load time (artifact read + validation + device setup + kernel builds + constants),
load-to-first-output, and per inference of unprofiled runs (inputs set, run, outputs read) the
median wall-clock ms and the median host ms (CPU time of the calling thread: what the runtime itself
costs the host, recording and submitting included, waiting excluded), interleaved between the two
runtimes so drift hits both; the outputs are checked to agree (<= 1e-6 relative) and the device
memory to be equal.

``launches-N`` (a MODEL name) is a synthetic program of N launches of a one-work-item kernel on a
64-byte buffer: its run time is almost all host time per step (enqueue or record, events), which is
what the native runtime saves; on a CPU device the models' own times are mostly kernel time.

Usage: python benchmarks/native_runtime.py [--target opencl|vulkan] [--device D] [--repeat 20] [MODEL ...]
(MODEL: a built-in example, a zoo model, launches-N, or a ``.rvk`` file of the target, which needs no
TVM: built here, run on a GPU machine; default: every example. ``--device`` defaults to pocl for
OpenCL and lavapipe for Vulkan; ``gpu`` on the GPU machine.) For the H100:
``python benchmarks/native_runtime.py --target vulkan --device gpu mobilenet_v2 launches-200``
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from relax_vk.runtime import load


#: the one-float kernel of launches-N per target
BUMP = {
    "opencl": "__kernel void bump(__global float* y) { y[0] += 1.0f; }",
    "vulkan": "@group(0) @binding(0) var<storage, read_write> y: array<f32>;\n"
              "@compute @workgroup_size(1, 1, 1)\nfn main() { y[0] = y[0] + 1.0; }\n",
}  # fmt: skip


def launches(n: int, target: str = "opencl"):
    """A program of ``n`` launches of a kernel that adds 1 to one float (host time per step)."""
    from relax_vk.serialization.artifact import Artifact

    t = {"shape": [16], "dtype": "float32", "scope": "global", "image": None, "bytes": 64}
    tensors = [dict(t, id=0, name="x", kind="input"), dict(t, id=1, name="y", kind="intermediate")]
    steps = [{"op": "copy", "src": 0, "dst": 1}] + [{"op": "launch", "kernel": "bump", "args": [1]} for _ in range(n)]
    kernel = {"name": "bump", "global": [1, 1, 1], "local": [1, 1, 1]}
    if target == "vulkan":
        kernel.update(shader={"offset": 0, "length": len(BUMP[target])}, bindings=["buffer"])
    program = {"format": "relax_vk.program", "target": target, "model": {}, "tensors": tensors,
               "kernels": [kernel], "steps": steps, "inputs": [0], "outputs": [1]}  # fmt: skip
    return Artifact(program, BUMP[target]), [np.zeros(16, "float32")]


def artifact_and_inputs(name: str, target: str = "opencl"):
    if name.startswith("launches-"):
        return launches(int(name.split("-", 1)[1]), target)
    if name.endswith(".rvk"):  # (no TVM: seeded inputs of the program's input shapes and dtypes)
        from relax_vk.serialization.artifact import Artifact

        artifact = Artifact.read(name)
        rng = np.random.default_rng(0)
        tensors = {t["id"]: t for t in artifact.program["tensors"]}
        shapes = [(tensors[i]["shape"], tensors[i].get("host_dtype", tensors[i]["dtype"])) for i in artifact.program["inputs"]]
        return artifact, [rng.standard_normal(shape).astype(dtype) for shape, dtype in shapes]
    import relax_vk
    from relax_vk.models import EXAMPLES, build_example

    if name in EXAMPLES:
        from relax_vk.analysis.reference import random_inputs

        mod = build_example(name)
        return relax_vk.build(mod, target=target).artifact(), random_inputs(mod)
    from relax_vk.frontends import from_torch
    from relax_vk.zoo import build_zoo_model

    model, example = build_zoo_model(name)
    return relax_vk.build(from_torch(model, (example,)), target=target).artifact(), [example.numpy()]


def per_inference(session, inputs, repeat: int) -> "tuple[float, float]":
    """Median (wall ms, host ms) of ``repeat`` unprofiled runs after one warm-up run; host = CPU
    time of this thread (time.thread_time: what the runtime costs the host, not the waits)."""
    profiling, session.profiling = session.profiling, False
    try:
        session.run(inputs)
        wall, host = [], []
        for _ in range(repeat):
            w, h = time.perf_counter(), time.thread_time()
            session.run(inputs)
            host.append((time.thread_time() - h) * 1e3)
            wall.append((time.perf_counter() - w) * 1e3)
    finally:
        session.profiling = profiling
    return float(np.median(wall)), float(np.median(host))


def timed_load(path: str, device: str, native: bool, inputs):
    start = time.perf_counter()
    session = load(path, device=device, native=native)
    loaded = time.perf_counter()
    out = session.run(inputs)
    return session, (loaded - start) * 1e3, (time.perf_counter() - start) * 1e3, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=None)
    parser.add_argument("--target", choices=("opencl", "vulkan"), default="opencl")
    parser.add_argument("--device", default=None)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    args.device = args.device or {"opencl": "pocl", "vulkan": "lavapipe"}[args.target]
    if not args.models:
        from relax_vk.models import EXAMPLES

        args.models = sorted(EXAMPLES)
    print(f"{args.target} on {args.device}; per inference: wall ms and host ms (CPU time of the calling thread)")
    print(f"{'model':16} {'steps':>5} | {'load ms py':>10} {'native':>8} | {'first out py':>12} {'native':>8} | "
          f"{'wall ms py':>10} {'native':>8} {'ratio':>6} | {'host ms py':>10} {'native':>8} {'ratio':>6}")  # fmt: skip
    for name in args.models:
        artifact, inputs = artifact_and_inputs(name, args.target)
        if artifact.program["target"] != args.target:
            raise SystemExit(f"{name} targets {artifact.program['target']}; pass --target {artifact.program['target']}")
        with tempfile.NamedTemporaryFile(suffix=".rvk") as f:
            artifact.write(f.name)
            py, py_load, py_first, py_out = timed_load(f.name, args.device, False, inputs)
            nat, nat_load, nat_first, nat_out = timed_load(f.name, args.device, True, inputs)
        for a, b in zip(nat_out, py_out):
            scale = max(float(np.max(np.abs(b))), 1e-30)
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6 * scale)
        assert nat.device_bytes == py.device_bytes
        rounds = {"py": [], "native": []}
        for _ in range(3):  # interleaved rounds
            rounds["py"].append(per_inference(py, inputs, args.repeat))
            rounds["native"].append(per_inference(nat, inputs, args.repeat))
        (pw, ph), (nw, nh) = [tuple(float(np.median(v)) for v in zip(*rounds[k])) for k in ("py", "native")]
        print(f"{os.path.basename(name):16} {len(artifact.program['steps']):5d} | {py_load:10.1f} {nat_load:8.1f} | {py_first:12.1f} {nat_first:8.1f} | "
              f"{pw:10.3f} {nw:8.3f} {nw / pw:6.2f} | {ph:10.3f} {nh:8.3f} {nh / ph:6.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
