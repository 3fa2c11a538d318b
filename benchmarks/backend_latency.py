"""Latency of the same models on OpenCL and Vulkan, texture plans vs all-buffer plan, side by side.

Usage:
    python benchmarks/backend_latency.py --build OUTDIR [MODEL ...]      # (needs TVM)
    python benchmarks/backend_latency.py --run OUTDIR [--opencl-device gpu] [--vulkan-device gpu]
        [--repeat 50] [--json FILE] [MODEL ...]                         # numpy + pyopencl + wgpu only

``--build`` compiles every model for both backends under three plans (relax_vk's default
``texture``; ``texture_wbuf``, the same with conv weights in buffers; ``buffer``, all buffers) and
writes a transport bundle: ``index.json.gz`` with each artifact's program and kernel source, its
constants once per distinct content under ``blobs/`` (the plans and backends share weights, so
ResNet-18's six artifacts carry its weights once), and the CPU reference outputs (TVM llvm).
``--run`` rebuilds each :class:`relax_vk.serialization.artifact.Artifact` from the bundle, loads all of them in one
process (OpenCL device and Vulkan adapter), runs each (warm-up first) and prints per model: median
and min wall-clock latency of a full run (inputs uploaded, outputs read back), summed device time
of the dispatches (OpenCL profiling events / Vulkan timestamp queries), error against the CPU
reference, and the ratios ``buffer/plan`` (> 1: the texture plan is faster) and
``opencl/vulkan`` (> 1: Vulkan is faster).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import sys

from typing import Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from opencl_latency import PLANS, _inputs_for  # noqa: E402  (same plans and inputs as the OpenCL benchmark)

BACKENDS = ("opencl", "vulkan")
DEFAULT_MODELS = ["rfc-conv2d", "conv20", "resnet18", "mobilenet_v2", "unet_small", "vit_small", "rgb_stem"]


def build(outdir: str, models) -> None:
    import relax_vk
    from relax_vk.analysis.reference import run_on_cpu
    from relax_vk.frontends import load_model

    os.makedirs(os.path.join(outdir, "blobs"), exist_ok=True)
    index = []
    for name in models:
        program = None
        for backend in BACKENDS:
            for plan, options in PLANS(relax_vk):
                mod, source = load_model(name)
                artifact = relax_vk.build(mod, target=backend, options=options, model=source).artifact()
                blobs = store_constants(outdir, artifact)
                index.append({"model": name, "backend": backend, "plan": plan, "program": artifact.program, "source": artifact.source, "constants": blobs})
                program = artifact.program
                print(f"built {name} {backend} {plan}: {len(artifact.program['kernels'])} kernels", flush=True)
        inputs = _inputs_for(program)
        np.savez(os.path.join(outdir, f"{name}.reference.npz"), *run_on_cpu(load_model(name)[0], inputs))
    with gzip.open(os.path.join(outdir, "index.json.gz"), "wt") as f:
        json.dump(index, f)
    total = sum(os.path.getsize(os.path.join(outdir, "blobs", b)) for b in os.listdir(os.path.join(outdir, "blobs")))
    print(f"wrote {len(index)} artifacts to {outdir} ({total / 2**20:.1f} MiB of distinct constants)")


def _digest(array: np.ndarray) -> str:
    return hashlib.sha256(array.tobytes() + str(array.dtype).encode() + str(array.shape).encode()).hexdigest()[:32]


def _winograd_sources(artifact, weights: dict) -> dict:
    """``{constant name: (source digest, m)}`` for each constant of ``artifact`` that is the
    Winograd F(m,3) transform of a packed 3x3 conv weight, bit for bit: of one in ``weights``
    (``{(OC/4, IC): {digest: array}}``, the conv weights stored so far, which this call extends
    with ``artifact``'s). Such a constant is stored as a recipe, and :func:`load_artifact` derives
    it (transformed weights are 16/9 or 4x their conv weights' bytes: a bundle that shipped both
    would not fit one transfer to the GPU machine)."""
    from relax_vk.runtime.winograd import TILES, transform_weight

    for array in artifact.constants.values():
        if array.ndim == 5 and array.shape[2:] == (3, 3, 4):
            array = np.ascontiguousarray(array).reshape(np.shape(array))  # (ascontiguousarray makes a 0-d array 1-d)
            weights.setdefault(array.shape[:2], {})[_digest(array)] = array
    found = {}
    for key, array in artifact.constants.items():
        m = array.shape[2] - 2 if array.ndim == 5 and array.shape[2] == array.shape[3] and array.shape[4] == 4 else 0
        if m not in TILES:
            continue
        for digest, source in weights.get(array.shape[:2], {}).items():
            if np.array_equal(transform_weight(source, m), array):
                found[key] = (digest, m)
                break
    return found


#: the dtypes a refilled constant may have (weights, scales, packed 4-bit bytes; never indices)
REFILLABLE = ("float32", "float16", "uint8", "uint32")


def store_constants(outdir: str, artifact, weights: Optional[dict] = None, refill_over: Optional[int] = None) -> dict:
    """Save each constant of ``artifact`` under ``outdir/blobs`` once (named by content), except
    Winograd-transformed weights of a conv weight stored before (``weights``: keep one dict across
    the calls of one bundle), which are stored as how to derive them; returns ``{constant name:
    digest or {"digest", "winograd", "of"}}`` for :func:`load_artifact`.

    ``refill_over`` (bytes): a weight constant larger than that (dtype in :data:`REFILLABLE`) is not
    stored but made again by :func:`load_artifact` from a seed, same dtype and shape, other
    values (``{"refill": {...}}``): a model too large to carry measures its speed, which no kernel's
    work depends on the values for, and is not compared for correctness."""
    blobs = {}
    known = {} if weights is None else weights
    derived = _winograd_sources(artifact, known)
    for index, (key, array) in enumerate(artifact.constants.items()):
        array = np.ascontiguousarray(array).reshape(np.shape(array))  # (ascontiguousarray makes a 0-d array 1-d)
        if refill_over is not None and array.nbytes > refill_over and str(array.dtype) in REFILLABLE:
            blobs[key] = {"refill": {"dtype": str(array.dtype), "shape": list(array.shape), "seed": index}}
            continue
        digest = _digest(array)
        if key in derived:
            source, m = derived[key]
            blobs[key] = {"digest": digest, "winograd": m, "of": source}
            if not os.path.exists(os.path.join(outdir, "blobs", f"{source}.npy")):
                np.save(os.path.join(outdir, "blobs", f"{source}.npy"), known[array.shape[:2]][source])
            continue
        path = os.path.join(outdir, "blobs", f"{digest}.npy")
        if not os.path.exists(path):
            np.save(path, array)
        blobs[key] = digest
    return blobs


def refill(dtype: str, shape, seed: int) -> np.ndarray:
    """A refilled constant (:func:`store_constants`): bytes (and packed words) uniform over their
    range, floats normal with std 0.02 (a weight's or a 4-bit block's scale's scale)."""
    rng = np.random.default_rng(seed)
    if dtype == "uint8":
        return rng.integers(0, 256, shape, dtype=np.uint8)
    if dtype == "uint32":
        return rng.integers(0, 1 << 32, shape, dtype=np.uint32)
    return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(dtype)


def is_refilled(entry: dict) -> bool:
    return any(isinstance(ref, dict) and "refill" in ref for ref in entry["constants"].values())


def load_artifact(outdir: str, entry: dict):
    from relax_vk.runtime.winograd import transform_weight
    from relax_vk.serialization.artifact import Artifact

    def constant(ref):
        if isinstance(ref, dict) and "refill" in ref:
            return refill(**ref["refill"])
        if isinstance(ref, dict):  # a Winograd-transformed weight, derived from its conv weight
            return transform_weight(np.load(os.path.join(outdir, "blobs", f"{ref['of']}.npy")), int(ref["winograd"]))
        return np.load(os.path.join(outdir, "blobs", f"{ref}.npy"))

    constants = {key: constant(ref) for key, ref in entry["constants"].items()}
    return Artifact(entry["program"], entry["source"], constants)


def _measure(session, inputs, repeat: int) -> dict:
    lat = session.time(inputs, repeat=repeat)
    outputs = session.run(inputs)
    device_ms = []
    for _ in range(min(repeat, 20)):
        session.run(inputs)
        device_ms.append(sum(k["ms"] for k in session.last_profile))
    steps = session.program["steps"]
    copies = sum(1 for s in steps if s["op"] == "copy")
    return {"wall_ms": lat, "device_ms": float(np.median(device_ms)), "launches": len(steps) - copies, "copies": copies}, outputs


def run(outdir: str, opencl_device, vulkan_device, repeat: int, json_path: str = "", models=None) -> None:
    from relax_vk.runtime import load, select_device

    devices = {"opencl": select_device("opencl", opencl_device), "vulkan": select_device("vulkan", vulkan_device)}
    print(f"opencl device: {devices['opencl'].name.strip()} ({devices['opencl'].platform.version.strip()})")
    print(f"vulkan adapter: {devices['vulkan'].info['device']} ({devices['vulkan'].info['description']})")
    with gzip.open(os.path.join(outdir, "index.json.gz"), "rt") as f:
        index = [e for e in json.load(f) if not models or e["model"] in models]
    rows = []
    for name in dict.fromkeys(e["model"] for e in index):
        refs = list(np.load(os.path.join(outdir, f"{name}.reference.npz")).values())
        row = {"model": name, "results": {}}
        for entry in [e for e in index if e["model"] == name]:
            session = load(load_artifact(outdir, entry), device=devices[entry["backend"]])
            result, outputs = _measure(session, _inputs_for(entry["program"]), repeat)
            result["max_abs_err_vs_llvm"] = max(float(np.max(np.abs(o - r))) for o, r in zip(outputs, refs))
            result["matches_llvm"] = all(np.allclose(o, r, rtol=1e-3, atol=1e-3) for o, r in zip(outputs, refs))
            row["results"][f"{entry['backend']}/{entry['plan']}"] = result
            del session
        rows.append(row)
        _print_model(row)
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"opencl_device": devices["opencl"].name.strip(), "vulkan_adapter": devices["vulkan"].info["device"], "rows": rows}, f, indent=2)


def _ratio(a: float, b: float) -> str:
    """``a / b`` for the table ('-' where a device gave no times, e.g. no timestamp queries)."""
    return f"{a / b:>10.2f}" if a > 0 and b > 0 else f"{'-':>10}"


def _print_model(row: dict) -> None:
    header = f"{'model':<13} {'backend':<7} {'plan':<13} {'wall med ms':>11} {'wall min ms':>11} {'device ms':>10} {'launch':>6} {'copy':>4} {'err vs llvm':>11}"
    print(header)
    print("-" * len(header))
    res = row["results"]
    for key, r in res.items():
        backend, plan = key.split("/")
        print(
            f"{row['model']:<13} {backend:<7} {plan:<13} {r['wall_ms']['median']:>11.3f} {r['wall_ms']['min']:>11.3f} {r['device_ms']:>10.3f} "
            f"{r['launches']:>6} {r['copies']:>4} {r['max_abs_err_vs_llvm']:>11.1e}" + ("" if r["matches_llvm"] else "  MISMATCH")
        )
    for backend in BACKENDS:
        buf = res.get(f"{backend}/buffer")
        for plan in ("texture", "texture_wbuf"):
            tex = res.get(f"{backend}/{plan}")
            if buf and tex:
                print(
                    f"{row['model']:<13} {backend:<7} buffer/{plan:<6} {buf['wall_ms']['median'] / tex['wall_ms']['median']:>11.2f} {'':>11} "
                    f"{_ratio(buf['device_ms'], tex['device_ms'])}   (> 1: the texture plan is faster)"
                )
    for plan in ("texture", "texture_wbuf", "buffer"):
        ocl, vk = res.get(f"opencl/{plan}"), res.get(f"vulkan/{plan}")
        if ocl and vk:
            print(
                f"{row['model']:<13} {'ocl/vk':<7} {plan:<13} {ocl['wall_ms']['median'] / vk['wall_ms']['median']:>11.2f} {'':>11} "
                f"{_ratio(ocl['device_ms'], vk['device_ms'])}   (> 1: Vulkan is faster)"
            )
    print(flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", metavar="OUTDIR")
    parser.add_argument("--run", metavar="OUTDIR")
    parser.add_argument("--opencl-device", default=None)
    parser.add_argument("--vulkan-device", default=None)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--json", default="")
    parser.add_argument("models", nargs="*", default=DEFAULT_MODELS, help="models to build / run (default: all)")
    args = parser.parse_args()
    if args.build:
        build(args.build, args.models)
    elif args.run:
        run(args.run, args.opencl_device, args.vulkan_device, args.repeat, args.json, args.models)
    else:
        parser.error("give --build OUTDIR or --run OUTDIR")


if __name__ == "__main__":
    sys.exit(main())
