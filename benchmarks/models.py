"""Zoo models: relax_vk's memory plans and compile/run times next to upstream TVM 0.27's adreno pipeline.

Usage: python benchmarks/models.py [MODEL ...] [--repeat N] [--no-run]

Per model: share of activation bytes in textures (in the compiled, fused module), copies (count,
bytes), compile time split into relax_vk's own stages and TVM's (pass-instrument exclusive time,
as benchmarks/compile.py), pocl latency (median of N runs, images emulated on the CPU: correctness,
not speed), and the same scope statistics for upstream TVM 0.27's adreno texture pipeline
(``relax.backend.adreno.pipeline.legalize_passes`` with ConvertLayout to NCHW4c, tvm-ffi pinned),
or ``fails: <first line>`` where upstream fails.
"""

from __future__ import annotations

import argparse
import sys
import time

import tvm
from tvm import relax

import relax_vk
from relax_vk.analysis.memory_plan import plan
from relax_vk.analysis.reference import random_inputs
from relax_vk.frontends import load_model

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from compile import ExclusiveTimer  # noqa: E402

ZOO_NAMES = ["resnet18", "mobilenet_v2", "unet_small", "vit_small", "rgb_stem"]


def upstream_stats(mod: tvm.IRModule) -> str:
    target = tvm.target.Target({"kind": "opencl", "device": "adreno", "keys": ["adreno", "opencl", "gpu", "texture"]}, host={"kind": "llvm"})
    try:
        with target:
            out = tvm.transform.Sequential(relax.backend.adreno.pipeline.legalize_passes(target))(mod)
        p = plan(out)
        return f"{100 * p.activation_texture_share:5.1f}%  {p.copies} copies ({p.copy_bytes} B)"
    except Exception as err:  # upstream's own failures are the data here
        first = str(err).strip().splitlines()
        line = next((l for l in first if "Error" in l or "error" in l), first[0] if first else type(err).__name__)
        return f"fails: {line.strip()[:90]}"


def measure(name: str, repeat: int, run: bool) -> dict:
    mod, source = load_model(name)
    timer = ExclusiveTimer()
    start = time.perf_counter()
    with tvm.transform.PassContext(instruments=[timer]):
        compiled = relax_vk.build(mod, model=source)
    total = time.perf_counter() - start
    ours = timer.seconds.get("relax_vk", 0.0)
    p = compiled.plan()
    row = {
        "model": name,
        "texture_pct": 100 * p.activation_texture_share,
        "copies": p.copies,
        "copy_bytes": p.copy_bytes,
        "compile_s": total,
        "relax_vk_s": ours,
        "tvm_s": total - ours,
        "pocl_ms": float("nan"),
        "upstream": upstream_stats(mod),
    }
    if run:
        from relax_vk.runtime import load

        session = load(compiled.artifact(), device="pocl")
        row["pocl_ms"] = session.time(random_inputs(mod), repeat=repeat)["median"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=ZOO_NAMES)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-run", action="store_true")
    args = parser.parse_args()
    rows = [measure(n, args.repeat, not args.no_run) for n in args.models]
    header = f"{'model':<13} {'texture %':>9} {'copies':>6} {'copy B':>7} {'compile s':>9} {'relax_vk s':>10} {'TVM s':>7} {'pocl ms':>9}  upstream TVM 0.27 (texture %, copies)"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['model']:<13} {r['texture_pct']:>8.1f}% {r['copies']:>6} {r['copy_bytes']:>7} {r['compile_s']:>9.2f} {r['relax_vk_s']:>10.3f} "
            f"{r['tvm_s']:>7.2f} {r['pocl_ms']:>9.1f}  {r['upstream']}"
        )


if __name__ == "__main__":
    main()
