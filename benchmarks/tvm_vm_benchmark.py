"""TVM's C++ Relax VM beside relax_vk's own runtime, same plans, same GPU (issue 31).

    python benchmarks/tvm_vm_benchmark.py --build OUT [--models resnet18:texture mobilenet_v2:buffer ...]   # here (TVM)
    # GPU machine: the C++ program benchmarks/tvm_vm_timing.cc times OUT/vm/*.so, and
    python3 benchmarks/gpu_benchmark.py --run OUT/own --repeat 100                                          # the own runtime
    python3 benchmarks/tvm_vm_benchmark.py --check OUT                                                     # VM outputs vs PyTorch

``--build`` compiles each ``model:plan`` once with :func:`relax_vk.build` for the OpenCL target
with the tuning database of ``--device-name`` (default: the H100's) and writes, from that one
build:

* ``OUT/vm/MODEL_PLAN.so``: the executable, exported for this machine's host (x86_64) with
  :func:`relax_vk.tvm_runtime.export_library`, for TVM's runtime;
* ``OUT/vm/MODEL.x.bin`` / ``MODEL.y.bin``: the input and PyTorch's CPU output, raw float32;
* ``OUT/own/``: the same builds as :mod:`gpu_benchmark`'s transport bundle (``index.json.gz``,
  ``blobs/``, ``MODEL.io.npz``), for ``gpu_benchmark.py --run``.

``--check OUT`` (GPU machine, numpy only) compares the outputs the timing program wrote
(``OUT/vm/MODEL_PLAN.out.bin``) with PyTorch's. Plans: ``texture`` (``prefer="texture"``) and
``buffer`` (``prefer="buffer"``), as in :mod:`gpu_benchmark`.
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

SIZE = (1, 3, 224, 224)
DEFAULT = ("resnet18:texture", "mobilenet_v2:buffer", "mobilenet_v2:texture")
H100 = "NVIDIA H100 80GB HBM3"


def build(outdir: str, specs, device_name: str) -> None:
    import torch

    import relax_vk
    from backend_latency import store_constants
    from relax_vk import tvm_runtime
    from relax_vk.frontends import from_torch
    from relax_vk.zoo import build_zoo_model

    os.makedirs(os.path.join(outdir, "vm"), exist_ok=True)
    os.makedirs(os.path.join(outdir, "own", "blobs"), exist_ok=True)
    index = []
    modules = {}
    for spec in specs:
        name, _, plan = spec.partition(":")
        if name not in modules:
            model, x = build_zoo_model(name, input_shape=SIZE)
            with torch.no_grad():
                y = model(x).numpy()
            modules[name] = from_torch(model, (x,))
            np.savez(os.path.join(outdir, "own", f"{name}.io.npz"), x=x.numpy(), y=y)
            x.numpy().astype(np.float32).tofile(os.path.join(outdir, "vm", f"{name}.x.bin"))
            y.astype(np.float32).tofile(os.path.join(outdir, "vm", f"{name}.y.bin"))
        t0 = time.perf_counter()
        options = relax_vk.ScopeOptions(prefer=plan)
        compiled = relax_vk.build(modules[name], target=relax_vk.target.opencl(device_name=device_name), options=options, model={"zoo": name})
        tvm_runtime.export_library(compiled.executable, os.path.join(outdir, "vm", f"{name}_{plan}.so"))
        artifact = compiled.artifact()
        index.append({"model": name, "api": "opencl", "plan": plan, "program": artifact.program, "source": artifact.source,
                      "constants": store_constants(os.path.join(outdir, "own"), artifact), "scope_rule": {}})  # fmt: skip
        print(f"built {name} {plan}: {len(artifact.program['kernels'])} kernels in {time.perf_counter() - t0:.1f} s", flush=True)
    with gzip.open(os.path.join(outdir, "own", "index.json.gz"), "wt") as f:
        json.dump(index, f)


def check(outdir: str) -> int:
    """Largest error of each VM output against PyTorch's, relative to PyTorch's largest magnitude."""
    folder = os.path.join(outdir, "vm")
    bad = 0
    for out in sorted(f for f in os.listdir(folder) if f.endswith(".out.bin")):
        stem = out[: -len(".out.bin")]
        name = stem.rsplit("_", 1)[0]
        got = np.fromfile(os.path.join(folder, out), dtype=np.float32)
        ref = np.fromfile(os.path.join(folder, f"{name}.y.bin"), dtype=np.float32)
        if got.shape != ref.shape:
            print(f"{stem}: {got.size} outputs, PyTorch has {ref.size}")
            bad += 1
            continue
        err = float(np.abs(got - ref).max() / max(float(np.abs(ref).max()), 1e-30))
        print(f"{stem}: max error vs PyTorch {err:.1e} (relative to its largest output)")
        bad += err > 1e-3
    return int(bad > 0)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", metavar="OUT")
    p.add_argument("--check", metavar="OUT")
    p.add_argument("--models", nargs="*", default=list(DEFAULT), help="MODEL:PLAN (plan: texture or buffer)")
    p.add_argument("--device-name", default=H100)
    args = p.parse_args()
    if args.build:
        build(args.build, args.models, args.device_name)
    if args.check:
        return check(args.check)
    return 0


if __name__ == "__main__":
    sys.exit(main())
