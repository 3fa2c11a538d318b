"""Compile time per model, split into relax_vk's own stages and TVM's stages.

Usage: python benchmarks/compile.py [MODEL ...]   (default: every built-in example)

Each model is built once with ``relax_vk.build`` (scope assignment, lowering, codegen to OpenCL)
under a pass instrument that measures every pass's *exclusive* time (nested passes are not
counted twice). Passes are attributed to:

* relax_vk   : relax_vk's own passes (layout packing, scope analyses, DefineVDevice,
               copy folding, specialization, ...), minus the TVM passes they call;
* legalize   : TVM's LegalizeOps (run by relax_vk's partial and scoped legalization);
* fuse       : FuseOps, FuseTIR;
* schedule   : dlight ApplyDefaultSchedule;
* codegen    : the TIR pipeline and OpenCL/host code generation (build time not spent in Relax passes);
* tvm other  : the remaining TVM Relax passes (RealizeVDevice, Normalize, DCE, VM lowering, ...).
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict

import tvm
from tvm.ir.instrument import pass_instrument

import relax_vk
from relax_vk.models import EXAMPLES, build_example

CATEGORIES = ("relax_vk", "legalize", "fuse", "schedule", "codegen", "tvm other")
TIR_PREFIXES = ("tirx.", "s_tir.", "tir.")


def category(name: str) -> str:
    if name.startswith("relax_vk."):
        return "relax_vk"
    if name == "LegalizeOps":
        return "legalize"
    if name in ("FuseOps", "FuseTIR"):
        return "fuse"
    if "ApplyDefaultSchedule" in name:
        return "schedule"
    if name.startswith(TIR_PREFIXES) or name in ("_pipeline", "BindTarget"):
        return "codegen"
    return "tvm other"


@pass_instrument
class ExclusiveTimer:
    def __init__(self):
        self.stack = []
        self.seconds = defaultdict(float)

    def run_before_pass(self, mod, info):
        self.stack.append([info.name, time.perf_counter(), 0.0])

    def run_after_pass(self, mod, info):
        name, start, children = self.stack.pop()
        elapsed = time.perf_counter() - start
        self.seconds[category(name)] += elapsed - children
        if self.stack:
            self.stack[-1][2] += elapsed


def measure(name: str) -> dict:
    mod = build_example(name)
    timer = ExclusiveTimer()
    start = time.perf_counter()
    with tvm.transform.PassContext(instruments=[timer]):
        compiled = relax_vk.build(mod)
    total = time.perf_counter() - start
    seconds = dict(timer.seconds)
    seconds["codegen"] = seconds.get("codegen", 0.0) + max(0.0, total - sum(timer.seconds.values()))
    return {"model": name, "total": total, "kernels": len(compiled.kernels), **{c: seconds.get(c, 0.0) for c in CATEGORIES}}


def main() -> None:
    names = sys.argv[1:] or sorted(EXAMPLES)
    rows = [measure(n) for n in names]
    header = f"{'model':<16} {'kernels':>7} {'total s':>8} {'relax_vk s':>10} {'relax_vk %':>10} " + " ".join(
        f"{c + ' s':>12}" for c in CATEGORIES[1:]
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['model']:<16} {r['kernels']:>7} {r['total']:>8.2f} {r['relax_vk']:>10.3f} {100 * r['relax_vk'] / r['total']:>9.1f}% "
            + " ".join(f"{r[c]:>12.3f}" for c in CATEGORIES[1:])
        )


if __name__ == "__main__":
    main()
