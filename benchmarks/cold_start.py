"""Cold start: loading an artifact with an empty program-binary cache, then again from it.

For each model the artifact is built once here; then two fresh processes each create an
:class:`relax_vk.runtime.Session` on the device with one (new, empty) cache
folder: the first builds the program from source (``clBuildProgram``) and stores the binary, the
second loads the binary (the native library's program-binary cache). pocl's own kernel cache is
switched off (``POCL_KERNEL_CACHE=0``) so the first load is really cold. Prints, per model, the
kernels, the seconds spent building the program and loading the whole session (allocations and
constant uploads included), and second / first.

Usage: ``python benchmarks/cold_start.py [DEVICE] [MODEL ...]`` (default ``pocl`` and
``rfc-conv2d resnet18 mobilenet_v2``). A MODEL ending in ``.rvk`` is an OpenCL artifact built
elsewhere (no TVM needed: the GPU machine). NVIDIA's driver keeps its own compute cache (the
SASS it JIT-compiles from the PTX that is its "binary"): each model gets a fresh, empty one
(``CUDA_CACHE_PATH``) shared by its two loads, as an app's first and second start would; with
``--no-driver-cache`` it is off (``CUDA_CACHE_DISABLE=1``) and the second load still JIT-compiles.
The build seconds are not reported apart, only the load. Every line also gives load-to-first-output (load, then one run on
seeded inputs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

_CHILD = r"""
import json, os, sys, time
import numpy as np
t0 = time.perf_counter()
from relax_vk.runtime import load
from relax_vk.serialization.artifact import Artifact
artifact = Artifact.read(sys.argv[1])
tensors = {t["id"]: t for t in artifact.program["tensors"]}
rng = np.random.default_rng(0)
inputs = [rng.standard_normal(tensors[i]["shape"]).astype(tensors[i].get("host_dtype", tensors[i]["dtype"])) for i in artifact.program["inputs"]]
t1 = time.perf_counter()  # (device selection included: the library probes the devices)
os.environ["RELAX_VK_CACHE_DIR"] = sys.argv[3]
session = load(sys.argv[1], device=sys.argv[2])
t2 = time.perf_counter()
session.run(inputs)
t3 = time.perf_counter()
print(json.dumps({"origin": session.build_info.origin, "build_s": getattr(session, "build_seconds", float("nan")), "load_s": t2 - t1,
                  "first_s": t3 - t1, "kernels": len(artifact.program["kernels"])}))
"""


def _load(path: str, device: str, cache: str, driver_cache: bool = True, native: bool = False) -> dict:
    env = dict(os.environ, POCL_KERNEL_CACHE="0")
    if driver_cache:
        env["CUDA_CACHE_PATH"] = cache + "-driver"
    else:
        env["CUDA_CACHE_DISABLE"] = "1"
    out = subprocess.run([sys.executable, "-c", _CHILD, path, device, cache, "native" if native else "python"], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _build(name: str, tmp: str) -> str:
    import relax_vk
    from relax_vk.frontends import load_model

    path = os.path.join(tmp, f"{name}.rvk")
    relax_vk.build(load_model(name)[0], "opencl").artifact().write(path)
    return path


def main(argv) -> int:
    driver_cache = "--no-driver-cache" not in argv
    native = "--native" in argv
    argv = [a for a in argv if a not in ("--no-driver-cache", "--native")]
    device = argv[0] if argv else "pocl"
    models = argv[1:] or ["rfc-conv2d", "resnet18", "mobilenet_v2"]
    print(f"{'native' if native else 'Python'} runtime on {device}; seconds (load: device selected, session made; first out: load and one run)")
    print(f"{'model':<14} {'kernels':>7} {'build cold':>10} {'warm':>7} {'ratio':>6} {'load cold':>9} {'warm':>7} {'ratio':>6} "
          f"{'first out cold':>14} {'warm':>7} {'ratio':>6}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for name in models:
            path = name if name.endswith(".rvk") else _build(name, tmp)
            name = os.path.basename(name)
            cache = os.path.join(tmp, f"cache-{name}")
            cold, warm = _load(path, device, cache, driver_cache, native), _load(path, device, cache, driver_cache, native)
            assert (cold["origin"], warm["origin"]) == ("source", "binary"), (cold, warm)
            print(f"{name:<14} {cold['kernels']:>7} {cold['build_s']:>10.3f} {warm['build_s']:>7.3f} {warm['build_s'] / cold['build_s']:>6.3f} "
                  f"{cold['load_s']:>9.3f} {warm['load_s']:>7.3f} {warm['load_s'] / cold['load_s']:>6.3f} "
                  f"{cold['first_s']:>14.3f} {warm['first_s']:>7.3f} {warm['first_s'] / cold['first_s']:>6.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
