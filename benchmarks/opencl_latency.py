"""Latency of .rvk artifacts on an OpenCL device: texture plan vs all-buffer plan, side by side.

Usage:
    python benchmarks/opencl_latency.py --build OUTDIR [MODEL ...]        # (needs TVM) write
        OUTDIR/MODEL.{texture,texture_wbuf,buffer}.rvk (relax_vk's plan, the same with conv weights
        in buffers, all buffers) and the CPU reference outputs
    python benchmarks/opencl_latency.py --run OUTDIR [--device gpu] [--repeat 50]   # numpy + pyopencl only

``--run`` loads every pair in OUTDIR in one process on one device, runs each (warm-up first), and
prints a table: median/min wall-clock latency of a full run (inputs uploaded, outputs read back),
the summed device time of the kernels and copies from OpenCL profiling events, the error against
the CPU reference, and the ratios buffer/plan (> 1 means that texture plan is faster). ``--json FILE`` also writes the rows.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys

import numpy as np


def build(outdir: str, models) -> None:
    import relax_vk
    from relax_vk.frontends import load_model

    os.makedirs(outdir, exist_ok=True)
    for name in models:
        for plan, options in PLANS(relax_vk):
            mod, source = load_model(name)
            compiled = relax_vk.build(mod, options=options, model=source)
            path = os.path.join(outdir, f"{name}.{plan}.rvk")
            compiled.artifact().write(path)
            plan_info = compiled.plan()
            print(f"wrote {path}: {len(compiled.kernels)} kernels, texture share {100 * plan_info.texture_share:.1f}%")
        # the CPU reference (TVM llvm) for the inputs --run will use, so devices without TVM can check
        from relax_vk.analysis.reference import run_on_cpu
        from relax_vk.serialization.artifact import Artifact

        inputs = _inputs_for(Artifact.read(os.path.join(outdir, f"{name}.texture.rvk")).program)
        np.savez(os.path.join(outdir, f"{name}.reference.npz"), *run_on_cpu(load_model(name)[0], inputs))


def PLANS(relax_vk):
    """The plans compared: relax_vk's default, the same with conv weights in buffers (upstream TVM's
    choice), and all buffers."""
    return (
        ("texture", relax_vk.ScopeOptions()),
        ("texture_wbuf", relax_vk.ScopeOptions(weights_in_texture=False)),
        ("buffer", relax_vk.ScopeOptions(textures=False)),
    )


PLAN_NAMES = ("texture", "texture_wbuf", "buffer")


def _inputs(session, seed=0):
    return _inputs_for(session.program, seed)


def _inputs_for(program, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i, tid in enumerate(program["inputs"]):
        t = program["tensors"][tid]
        fan_in = int(np.prod(t["shape"][1:])) if i > 0 and len(t["shape"]) > 1 else 1
        out.append((rng.standard_normal(t["shape"]) / np.sqrt(fan_in)).astype(t["dtype"]))
    return out


def run(outdir: str, device: str, repeat: int, json_path: str = "") -> None:
    from relax_vk.runtime import load, select_device

    dev = select_device(device)
    print(f"device: {dev.name.strip()} ({dev.platform.version.strip()})")
    rows = []
    names = sorted({os.path.basename(p).rsplit(".", 2)[0] for p in glob.glob(os.path.join(outdir, "*.rvk"))})
    for name in names:
        results = {}
        outputs = {}
        plans = [p for p in PLAN_NAMES if os.path.exists(os.path.join(outdir, f"{name}.{p}.rvk"))]
        for plan in plans:
            session = load(os.path.join(outdir, f"{name}.{plan}.rvk"), device=dev)
            inputs = _inputs(session)
            lat = session.time(inputs, repeat=repeat)
            outputs[plan] = session.run(inputs)
            device_ms = [sum(k["ms"] for k in session.last_profile)]
            for _ in range(min(repeat, 20) - 1):
                session.run(inputs)
                device_ms.append(sum(k["ms"] for k in session.last_profile))
            copies = sum(1 for s in session.program["steps"] if s["op"] == "copy")
            results[plan] = {"wall_ms": lat, "device_ms": float(np.median(device_ms)), "launches": len(session.program["steps"]) - copies, "copies": copies}
        same = all(np.allclose(a, b, rtol=1e-3, atol=1e-3) for p in plans for a, b in zip(outputs[p], outputs["buffer"]))
        ref_path = os.path.join(outdir, f"{name}.reference.npz")
        if os.path.exists(ref_path):
            refs = list(np.load(ref_path).values())
            for plan in plans:
                results[plan]["max_abs_err_vs_llvm"] = max(float(np.max(np.abs(o - r))) for o, r in zip(outputs[plan], refs))
        rows.append({"model": name, "device": dev.name.strip(), "plans_agree": bool(same), "plans": plans, **results})
    header = f"{'model':<14} {'plan':<13} {'wall median ms':>15} {'wall min ms':>12} {'device ms':>10} {'kernels':>8} {'copies':>7}"
    print(header)
    print("-" * len(header))
    for r in rows:
        for plan in r["plans"]:
            p = r[plan]
            err = p.get("max_abs_err_vs_llvm")
            print(
                f"{r['model']:<14} {plan:<13} {p['wall_ms']['median']:>15.3f} {p['wall_ms']['min']:>12.3f} {p['device_ms']:>10.3f} {p['launches']:>8} {p['copies']:>7}"
                + (f"   max abs err vs llvm {err:.2e}" if err is not None else "")
            )
        b = r.get("buffer")
        for plan in r["plans"] if b else []:
            if plan != "buffer":
                t = r[plan]
                print(
                    f"{r['model']:<14} {'buffer/' + plan:<13} {b['wall_ms']['median'] / t['wall_ms']['median']:>15.2f} {'':>12} {b['device_ms'] / t['device_ms']:>10.2f}"
                    "   (ratio > 1: the texture plan is faster)"
                )
        print(f"{r['model']:<14} outputs of all plans agree: {r['plans_agree']}")
    if json_path:
        with open(json_path, "w") as f:
            json.dump(rows, f, indent=2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", metavar="OUTDIR")
    parser.add_argument("--run", metavar="OUTDIR")
    parser.add_argument("--device", default=None)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--json", default="")
    parser.add_argument("models", nargs="*", default=["rfc-conv2d", "conv20"])
    args = parser.parse_args()
    if args.build:
        build(args.build, args.models)
    elif args.run:
        run(args.run, args.device, args.repeat, args.json)
    else:
        parser.error("give --build OUTDIR or --run OUTDIR")


if __name__ == "__main__":
    sys.exit(main())
