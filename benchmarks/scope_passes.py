"""Time relax_vk's scope stages on generated conv/elementwise graphs and on the RFC example.

Usage: python benchmarks/scope_passes.py [--sizes 100 1000 10000] [--repeat 3]

For each graph: the number of Relax ops, then the median wall time of the stages
``relax_vk.pipeline.STAGES`` names (the passes plan and build run, for the target):
  * layout   : stage 1 (identifiers, edge dtypes, weight splits, decompositions, packed layouts)
  * legalize : stage 2 (ChooseMemoryKind, PartialLegalize: TVM's LegalizeOps with skip_ops)
  * scope    : stages 3-4 (CollectConsumerScopeInfo, CollectProducerScopeInfo, DefineVDevice,
               RealizeVDevice, RemoveRedundantAssignments: relax_vk's scope assignment)
and scope time per 1,000 ops, to show growth is linear. Graphs are ``conv_chain`` networks
(3x3 conv, bias add, relu, a residual add every two convs) with constant weights, as imported
models have them; stage 1 packs them.
"""

from __future__ import annotations

import argparse
import statistics
import time

import tvm

import relax_vk
from relax_vk.models import build_example, conv_chain
from relax_vk.pipeline import stages


def chain(num_ops: int) -> tvm.IRModule:
    """A conv/elementwise chain with about ``num_ops`` Relax ops: 3x3 convs with constant weights,
    bias adds, relus and a residual add every two convs (3.5 ops per conv)."""
    return conv_chain(max(1, round(num_ops / 3.5)), channels=8, size=8)


def count_ops(mod: tvm.IRModule) -> int:
    return sum(len(b.bindings) for b in mod["main"].body.blocks)


def timed(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def measure(name: str, mod: tvm.IRModule, repeat: int, target) -> dict:
    ops = count_ops(mod)
    named = stages(target)

    def run(module, numbers):
        for stage, run_stage in named:
            if stage.number in numbers:
                module = run_stage(module)
        return module

    t_layout, packed = timed(lambda: run(mod, {1}), repeat)
    t_legal, legal = timed(lambda: run(packed, {2}), 1)
    t_scope, scoped = timed(lambda: run(legal, {3, 4}), repeat)
    plan = relax_vk.plan(scoped)
    return {
        "graph": name,
        "ops": ops,
        "layout_s": t_layout,
        "legalize_s": t_legal,
        "scope_s": t_scope,
        "scope_ms_per_1k_ops": 1000 * t_scope / ops * 1000 if ops >= 100 else float("nan"),
        "texture_pct": 100 * plan.texture_share,
        "copies": plan.copies,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[100, 1000, 10000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    target = relax_vk.target.opencl()
    rows = [measure("rfc-conv2d", build_example("rfc-conv2d"), args.repeat, target)]
    for n in args.sizes:
        rows.append(measure(f"chain-{n}", chain(n), args.repeat if n <= 1000 else 1, target))
    header = f"{'graph':<12} {'ops':>6} {'layout s':>9} {'legalize s':>11} {'scope s':>8} {'scope ms/1k ops':>16} {'texture %':>10} {'copies':>7}"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['graph']:<12} {r['ops']:>6} {r['layout_s']:>9.3f} {r['legalize_s']:>11.3f} {r['scope_s']:>8.3f} "
            f"{r['scope_ms_per_1k_ops']:>16.1f} {r['texture_pct']:>10.1f} {r['copies']:>7}"
        )


if __name__ == "__main__":
    main()
