"""``python -m relax_vk.testing.fuzz``: a differential fuzzing campaign (see :mod:`relax_vk.testing.fuzz`)."""

from __future__ import annotations

import argparse
import sys

from .campaign import FAILURES, campaign, ok_share, summary
from .runner import CUT_LIMITS


def _seeds(text: str) -> range:
    lo, _, hi = text.partition(":")
    return range(int(lo), int(hi)) if hi else range(int(lo), int(lo) + 1)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m relax_vk.testing.fuzz", description="relax_vk's differential fuzzer")
    p.add_argument("--seeds", default="0:100", help="START:END (a range, END excluded) or one seed")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (0: run the seeds in this process, no isolation, no timeout)")
    p.add_argument("--front-door", choices=("torch", "onnx", "both"), default="both")
    p.add_argument("--backend", choices=("opencl", "vulkan", "both"), default="both")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per seed before it counts as a crash")
    p.add_argument("--no-shrink", action="store_true", help="do not shrink failures")
    p.add_argument("--out", default=None, help="write every seed's record (JSON lines) here")
    p.add_argument("--limits", choices=("default", "cut"), default="default",
                   help="device limits: the defaults, or cut down (256-texel images, 64 layers, 1 MiB bindings, 256 workgroups)")
    p.add_argument("--run-time-dims", action="store_true",
                   help="each graph's height and width as run-time dims: one artifact run at the example's size and larger ones")
    p.add_argument("--min-ok-share", type=float, default=0.0,
                   help="fail (exit 1) when fewer seeds than this share run right (the CI slice's bounds: "
                   "campaign.MIN_OK_SHARE, MIN_OK_SHARE_CUT under --limits cut)")  # fmt: skip
    args = p.parse_args(argv)
    front = ("torch", "onnx") if args.front_door == "both" else (args.front_door,)
    back = ("opencl", "vulkan") if args.backend == "both" else (args.backend,)
    out = open(args.out, "w") if args.out else None
    try:
        limits = CUT_LIMITS if args.limits == "cut" else None
        counts = campaign(_seeds(args.seeds), front, back, args.jobs, args.timeout, not args.no_shrink, out, limits=limits,
                          run_time_dims=args.run_time_dims)  # fmt: skip
    finally:
        if out is not None:
            out.close()
    print(summary(counts))
    return 1 if any(counts.get(s, 0) for s in FAILURES) or ok_share(counts) < args.min_ok_share else 0


if __name__ == "__main__":
    sys.exit(main())
