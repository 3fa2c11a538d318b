"""The native runtime (native/, C) next to the Python runtime (pyopencl) on one OpenCL device.

For each model: load time (artifact read + validation + device setup + kernel builds + constants),
load-to-first-output, and the median wall-clock ms per inference of unprofiled runs (inputs set,
run, outputs read), interleaved between the two runtimes so drift hits both; the outputs are checked
to agree (<= 1e-6 relative) and the device memory to be equal.

``launches-N`` (a MODEL name) is a synthetic program of N launches of a one-work-item kernel on a
64-byte buffer: its run time is almost all host time per step (enqueue, events), which is what the
native runtime saves; on a CPU device the models' own times are mostly kernel time.

Usage: python benchmarks/native_runtime.py [--device pocl] [--repeat 20] [MODEL ...]
(MODEL: a built-in example, a zoo model, launches-N, or an OpenCL ``.rvk`` file, which needs no TVM:
built here, run on a GPU machine; default: every example)
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from relax_vk.runtime import load


def launches(n: int):
    """A program of ``n`` launches of a kernel that adds 1 to one float (host time per step)."""
    from relax_vk.serialization.artifact import Artifact

    t = {"shape": [16], "dtype": "float32", "scope": "global", "image": None, "bytes": 64}
    tensors = [dict(t, id=0, name="x", kind="input"), dict(t, id=1, name="y", kind="intermediate")]
    steps = [{"op": "copy", "src": 0, "dst": 1}] + [{"op": "launch", "kernel": "bump", "args": [1]} for _ in range(n)]
    program = {"format": "relax_vk.program", "target": "opencl", "model": {}, "tensors": tensors,
               "kernels": [{"name": "bump", "global": [1, 1, 1], "local": [1, 1, 1]}], "steps": steps, "inputs": [0], "outputs": [1]}  # fmt: skip
    return Artifact(program, "__kernel void bump(__global float* y) { y[0] += 1.0f; }"), [np.zeros(16, "float32")]


def artifact_and_inputs(name: str):
    if name.startswith("launches-"):
        return launches(int(name.split("-", 1)[1]))
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
        from relax_vk.tools.reference import random_inputs

        mod = build_example(name)
        return relax_vk.build(mod).artifact(), random_inputs(mod)
    from relax_vk.frontends import from_torch
    from relax_vk.zoo import build_zoo_model

    model, example = build_zoo_model(name)
    return relax_vk.build(from_torch(model, (example,))).artifact(), [example.numpy()]


def timed_load(path: str, device: str, native: bool, inputs):
    start = time.perf_counter()
    session = load(path, device=device, native=native)
    loaded = time.perf_counter()
    out = session.run(inputs)
    return session, (loaded - start) * 1e3, (time.perf_counter() - start) * 1e3, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=None)
    parser.add_argument("--device", default="pocl")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    if not args.models:
        from relax_vk.models import EXAMPLES

        args.models = sorted(EXAMPLES)
    print(f"{'model':16} {'steps':>5} | {'load ms py':>10} {'native':>8} | {'first out py':>12} {'native':>8} | "
          f"{'run ms py':>9} {'native':>8} {'ratio':>6}")  # fmt: skip
    for name in args.models:
        artifact, inputs = artifact_and_inputs(name)
        with tempfile.NamedTemporaryFile(suffix=".rvk") as f:
            artifact.write(f.name)
            py, py_load, py_first, py_out = timed_load(f.name, args.device, False, inputs)
            nat, nat_load, nat_first, nat_out = timed_load(f.name, args.device, True, inputs)
        for a, b in zip(nat_out, py_out):
            scale = max(float(np.max(np.abs(b))), 1e-30)
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6 * scale)
        assert nat.device_bytes == py.device_bytes
        py_ms, nat_ms = [], []
        for _ in range(3):  # interleaved rounds
            py_ms.append(py.time(inputs, repeat=args.repeat)["median"])
            nat_ms.append(nat.time(inputs, repeat=args.repeat)["median"])
        p, n = float(np.median(py_ms)), float(np.median(nat_ms))
        print(f"{os.path.basename(name):16} {len(artifact.program['steps']):5d} | {py_load:10.1f} {nat_load:8.1f} | {py_first:12.1f} {nat_first:8.1f} | "
              f"{p:9.3f} {n:8.3f} {n / p:6.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
