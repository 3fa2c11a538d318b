"""fp16 textures on the zoo: accuracy against PyTorch float32 and memory, on the test devices.

Usage: python benchmarks/fp16_accuracy.py [MODEL ...] [--apis opencl vulkan]

Per zoo model and API (OpenCL on pocl, Vulkan on lavapipe): the texture plan built with
``ScopeOptions(precision="fp16")`` (half texels, float32 arithmetic) run on the seeded example
input, its error against the PyTorch float32 output (max absolute error over the output's
largest magnitude; the bound is 1e-2), whether the arg-max agrees (classifiers: top-1; segmentation: the share of pixels whose class
agrees), and the
device memory of the fp16 and fp32 sessions (every allocation, weights included).
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
    args = p.parse_args(argv)
    head = f"{'model':<15} {'api':<7} {'fp16 rel err':>12} {'fp32 rel err':>12} {'arg-max':>8} {'fp32 MiB':>9} {'fp16 MiB':>9} {'ratio':>6}"
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
            for precision in ("fp32", "fp16"):
                session = load(relax_vk.build(mod, api, options=ScopeOptions(prefer="texture", precision=precision)).artifact(),
                               device=DEVICES[api])  # fmt: skip
                out = session.run([x.numpy()])[0]
                row[precision] = (float(np.max(np.abs(out - ref))) / float(np.max(np.abs(ref))), out, session.device_bytes / (1 << 20))
            err, out, mib = row["fp16"]
            worst = max(worst, err)
            if ref.ndim > 2:  # dense prediction: the class of each pixel (axis 1), share that agrees
                same = f"{100 * float(np.mean(out.argmax(1) == ref.argmax(1))):.1f}%"
            else:
                same = "same" if out.reshape(-1).argmax() == ref.reshape(-1).argmax() else "DIFFERS"
            print(f"{name:<15} {api:<7} {err:>12.2e} {row['fp32'][0]:>12.2e} {same:>8} {row['fp32'][2]:>9.2f} {mib:>9.2f} {mib / row['fp32'][2]:>6.2f}"
                  + ("  OVER THE BOUND" if err > BOUND else ""), flush=True)  # fmt: skip
    print(f"worst fp16 error: {worst:.2e} of the output's magnitude (bound {BOUND:g})")
    return 0 if worst <= BOUND else 1


if __name__ == "__main__":
    sys.exit(main())
