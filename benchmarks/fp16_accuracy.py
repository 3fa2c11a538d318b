"""fp16 on the zoo: accuracy against PyTorch float32 and memory, on the test devices.

Usage: python benchmarks/fp16_accuracy.py [MODEL ...] [--apis opencl vulkan] [--arith]

Per zoo model and API (OpenCL on pocl, Vulkan on lavapipe): the texture plan built with
``ScopeOptions(precision="fp16")`` (half texels, float32 arithmetic) run on the seeded example
input, its error against the PyTorch float32 output (max absolute error over the output's
largest magnitude; the bound is 1e-2), whether the arg-max agrees (classifiers: top-1; segmentation: the share of pixels whose class
agrees), and the
device memory of the fp16 and fp32 sessions (every allocation, weights included).

``--arith``: the same for half arithmetic too (``ScopeOptions(precision="fp16", arithmetic="fp16")``,
float32 accumulators, calibrated on the example input: the ops that would overflow stay float32),
on the APIs whose test device has it (lavapipe's ``shader-f16``; pocl has no ``cl_khr_fp16``):
its error (``arith rel err``, the max relative error the bound applies to), its arg-max
agreement and how many kernels calibration kept in float32. The worst of both is held to the bound.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

DEVICES = {"opencl": "pocl", "vulkan": "lavapipe"}
BOUND = 1e-2


def main(argv=None) -> int:
    import torch

    import relax_vk
    from relax_vk.core.options import ScopeOptions
    from relax_vk.frontends import from_torch
    from relax_vk.runtime import load
    from relax_vk.zoo import ZOO, build_zoo_model

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*")
    p.add_argument("--apis", nargs="+", default=list(DEVICES), choices=list(DEVICES))
    p.add_argument("--arith", action="store_true", help="half arithmetic too, where the test device has it")
    args = p.parse_args(argv)
    head = f"{'model':<15} {'api':<7} {'fp16 rel err':>12} {'fp32 rel err':>12} {'arg-max':>8} {'fp32 MiB':>9} {'fp16 MiB':>9} {'ratio':>6}"
    if args.arith:
        head += f" {'arith rel err':>13} {'arg-max':>8} {'fp32 kernels':>12}"
    print(head)
    print("-" * len(head))
    worst = 0.0
    for name in args.models or sorted(ZOO):
        model, x = build_zoo_model(name)
        with torch.no_grad():
            ref = model(x).numpy()
        mod = from_torch(model, (x,))
        for api in args.apis:
            row = {}
            plans = {"fp32": ScopeOptions(prefer="texture"), "fp16": ScopeOptions(prefer="texture", precision="fp16")}
            if args.arith and half_arithmetic(api):
                plans["arith"] = ScopeOptions(prefer="texture", precision="fp16", arithmetic="fp16")
            for plan, options in plans.items():
                artifact = relax_vk.build(mod, api, options=options, calibration=[x.numpy()]).artifact()
                session = load(artifact, device=DEVICES[api])
                out = session.run([x.numpy()])[0]
                kept = len(artifact.program.get("arithmetic", {}).get("float32", {}))
                row[plan] = (float(np.max(np.abs(out - ref))) / float(np.max(np.abs(ref))), out, session.device_bytes / (1 << 20), kept)
            err, out, mib, _ = row["fp16"]
            worst = max(worst, err, row["arith"][0] if "arith" in row else 0.0)
            line = (f"{name:<15} {api:<7} {err:>12.2e} {row['fp32'][0]:>12.2e} {_agreement(out, ref):>8} {row['fp32'][2]:>9.2f} {mib:>9.2f} "
                    f"{mib / row['fp32'][2]:>6.2f}")  # fmt: skip
            if "arith" in row:
                line += f" {row['arith'][0]:>13.2e} {_agreement(row['arith'][1], ref):>8} {row['arith'][3]:>12}"
            elif args.arith:
                line += f" {'(no half arithmetic on ' + DEVICES[api] + ')':>35}"
            print(line + ("  OVER THE BOUND" if max(err, row.get("arith", (0.0,))[0]) > BOUND else ""), flush=True)
    print(f"worst fp16 error: {worst:.2e} of the output's magnitude (bound {BOUND:g})")
    return 0 if worst <= BOUND else 1


def _agreement(out: np.ndarray, ref: np.ndarray) -> str:
    """Top-1 agreement (classifiers), or the share of pixels whose class agrees (dense prediction)."""
    if ref.ndim > 2:  # dense prediction: the class of each pixel (axis 1), share that agrees
        return f"{100 * float(np.mean(out.argmax(1) == ref.argmax(1))):.1f}%"
    return "same" if out.reshape(-1).argmax() == ref.reshape(-1).argmax() else "DIFFERS"


def half_arithmetic(api: str) -> bool:
    """Whether the API's test device computes in half (``relax-vk devices``: half arithmetic)."""
    from relax_vk.runtime import select_device

    return bool(select_device(api, DEVICES[api]).fp16["half_arithmetic"])


if __name__ == "__main__":
    sys.exit(main())
