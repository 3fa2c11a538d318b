"""``load(path, device).run(inputs)`` from Python against ``rvk-run`` (the same native library, no
Python) on the same ``.rvk`` files, in interleaved rounds in one call: what the Python binding costs
per inference.

For each artifact and round: the median wall-clock ms of ``repeat`` unprofiled runs through
``relax_vk.runtime.load`` in a fresh Python process (a session loaded as the README shows it:
``load(path, device=D)``, numpy in and out, after one warm-up run), then ``rvk-run PATH --device D
--input x.npy --repeat N`` (its own median, after its warm-up run). One process at a time: on the GPU
machine a second process sees no OpenCL GPU while another holds one. Prints a table per artifact with the range over the rounds and the ratio of the medians.

Usage: ``python benchmarks/runtime_overhead.py --device gpu [--rounds 3] [--repeat 200] A.rvk [B.rvk ...]``,
or ``--bundle DIR [--plans auto]``: the artifacts of a ``gpu_benchmark.py --build`` transport bundle,
written out as ``.rvk`` files first (``--keep DIR`` keeps them there)
(``--device`` defaults to the artifact's CPU device: pocl for OpenCL, lavapipe for Vulkan). Inputs are
seeded random arrays of each artifact's input shapes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import numpy as np

from relax_vk.runtime.rvk_run import executable
from relax_vk.serialization.artifact import Artifact


_CHILD = """
import json, sys, time
import numpy as np
from relax_vk.runtime import load
session = load(sys.argv[1], device=sys.argv[2])  # as the README shows it: no profile
inputs = [np.load(p) for p in sys.argv[4:]]
session.run(inputs)
times = []
for _ in range(int(sys.argv[3])):
    t0 = time.perf_counter()
    session.run(inputs)
    times.append((time.perf_counter() - t0) * 1e3)
print(json.dumps({"median": float(np.median(times)), "device": session.device_name}))
"""


def python_median_in_child(path: str, device: str, inputs, repeat: int, folder: str):
    """``(median ms, device name)`` of ``load(path, device).run`` timed in a fresh Python process."""
    files = []
    for i, x in enumerate(inputs):
        files.append(os.path.join(folder, f"in{i}.npy"))
        np.save(files[-1], x)
    done = subprocess.run([sys.executable, "-c", _CHILD, path, device, str(repeat), *files], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"timing {path} through load() failed:\n{done.stderr[-3000:]}")
    row = json.loads(done.stdout.strip().splitlines()[-1])
    return row["median"], row["device"]


def rvk_run_median(path: str, device: str, inputs, repeat: int, folder: str) -> float:
    args = [executable(), path, "--device", device, "--repeat", str(repeat)]
    for i, x in enumerate(inputs):
        name = os.path.join(folder, f"in{i}.npy")
        np.save(name, x)
        args += ["--input", name]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    match = re.search(r"median ([0-9.]+) ms per inference", done.stdout)
    if not match:
        raise RuntimeError(f"rvk-run printed no median:\n{done.stdout}\n{done.stderr}")
    return float(match.group(1))


def write_bundle_artifacts(bundle: str, plans, folder: str):
    """The ``.rvk`` files of a transport bundle's entries of ``plans`` (gpu_benchmark's format)."""
    import gzip

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from backend_latency import load_artifact

    with gzip.open(os.path.join(bundle, "index.json.gz"), "rt") as f:
        index = json.load(f)
    os.makedirs(folder, exist_ok=True)
    paths = []
    for entry in index:
        if entry["plan"] not in plans:
            continue
        path = os.path.join(folder, f"{entry['model']}_{entry['api']}_{entry['plan']}.rvk")
        load_artifact(bundle, entry).write(path)
        paths.append(path)
    return paths


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("artifacts", nargs="*")
    p.add_argument("--bundle", default=None, help="a gpu_benchmark.py --build bundle: time its artifacts")
    p.add_argument("--plans", nargs="*", default=["auto"], help="--bundle: these plans (default auto)")
    p.add_argument("--keep", default=None, help="--bundle: write the .rvk files here (default: a temporary folder)")
    p.add_argument("--device", default=None)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=200)
    p.add_argument("--json", default=None, help="write the rows to this file")
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        paths = list(args.artifacts)
        if args.bundle:
            paths += write_bundle_artifacts(args.bundle, args.plans, args.keep or folder)
        for path in paths:
            program = Artifact.read_program(path)
            target = program.get("target", "opencl")
            device = args.device or ("lavapipe" if target == "vulkan" else "pocl")
            tensors = {t["id"]: t for t in program["tensors"]}
            rng = np.random.default_rng(0)
            inputs = [rng.standard_normal(tensors[i]["shape"]).astype(tensors[i].get("host_dtype", tensors[i]["dtype"])) for i in program["inputs"]]
            py, native = [], []
            for _ in range(args.rounds):
                # each side in a process of its own, one after the other: on the GPU machine a second
                # process sees no OpenCL GPU while another process holds one
                median, name = python_median_in_child(path, device, inputs, args.repeat, folder)
                py.append(median)
                native.append(rvk_run_median(path, device, inputs, args.repeat, folder))
            row = {"artifact": os.path.basename(path), "api": target, "device": name, "load_run_ms": py, "rvk_run_ms": native,
                   "ratio": float(np.median(py) / np.median(native))}  # fmt: skip
            rows.append(row)
            print(f"{row['artifact']:<28} {target:<6} load().run {min(py):.3f}-{max(py):.3f} ms   rvk-run {min(native):.3f}-{max(native):.3f} ms   "
                  f"ratio of medians {row['ratio']:.3f}  ({name})", flush=True)  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
