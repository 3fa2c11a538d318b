"""Storage planning on the zoo: intermediate memory without reuse, with reuse, and the lower bound.

Usage: python benchmarks/memory_planning.py [MODEL ...] [--api opencl|vulkan] [--check DEVICE] [--json FILE]

Per model (the zoo at its catalogue size, plus ResNet-18 and MobileNetV2 at 224x224) and plan
(``texture``: the RFC's rule, every packed tensor in an image; ``buffer``: ``prefer="buffer"``),
from the artifact that ``relax_vk.build`` exports (the fused program the runtimes execute): the
bytes its intermediates take when every tensor has its own allocation (what relax_vk did before
storage planning), with storage planning (:mod:`relax_vk.storage`), the lower bound (the most
bytes live at one step), the ratio of the two, the reduction, the allocations, and which
strategy won each pool. ``--check DEVICE`` also runs both artifacts (shared and unshared) on that
device and requires identical outputs. For a machine without TVM, in two steps::

    python benchmarks/memory_planning.py squeezenet --api opencl vulkan --plans texture --bundle .gpu/share
    python3 benchmarks/memory_planning.py --run .gpu/share --device gpu      # the GPU machine

(the shared and unshared artifacts of each row and one seeded input; ``--run`` needs the runtime and
numpy only, runs both on the device and requires identical outputs).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

MIB = 1 << 20
EXTRA = ["resnet18@224", "mobilenet_v2@224"]


def _module(name: str):
    from relax_vk.frontends import from_torch
    from relax_vk.zoo import build_zoo_model

    base, _, size = name.partition("@")
    model, x = build_zoo_model(base, input_shape=(1, 3, int(size), int(size)) if size else None)
    return from_torch(model, (x,))


def _input(artifact) -> list:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(artifact.program["tensors"][i]["shape"]).astype(artifact.program["tensors"][i]["dtype"]) for i in artifact.program["inputs"]]


def measure(name: str, api: str, prefer: str, check=None, bundle=None) -> dict:
    import relax_vk
    from relax_vk.core.options import ScopeOptions

    compiled = relax_vk.build(_module(name), api, options=ScopeOptions(prefer=prefer))
    shared = compiled.artifact()
    if bundle:
        import os

        os.makedirs(bundle, exist_ok=True)
        stem = os.path.join(bundle, f"{name}-{prefer}-{api}")
        shared.write(stem + "-shared.rvk")
        compiled.artifact(reuse=False).write(stem + "-alone.rvk")
        np.savez(stem + "-input.npz", *_input(shared))
    memory = shared.program["memory"]
    row = {
        "model": name,
        "plan": prefer,
        "without_reuse": memory["without_reuse_bytes"],
        "with_reuse": memory["with_reuse_bytes"],
        "lower_bound": memory["lower_bound_bytes"],
        "ratio": memory["ratio_to_lower_bound"],
        "reduction": memory["without_reuse_bytes"] / max(memory["with_reuse_bytes"], 1),
        "allocations": memory["shared_objects"],
        "tensors": sum(1 for t in shared.program["tensors"] if t["kind"] in ("intermediate", "workspace") and t["id"] not in shared.program["outputs"]),
        "strategies": memory["strategies"],
        "pools": memory["pools"],
    }
    if check:
        from relax_vk.runtime import load

        alone = compiled.artifact(reuse=False)
        a, b = load(shared, device=check), load(alone, device=check)
        inputs = _input(shared)
        same = all(np.array_equal(x, y) for x, y in zip(a.run(inputs), b.run(inputs)))
        row.update(identical=same, device_mib_shared=a.device_bytes / MIB, device_mib_alone=b.device_bytes / MIB)
    return row


def run_bundle(folder: str, device: str) -> int:
    """``--run``: each row's shared and unshared artifacts on ``device``, their outputs compared."""
    import glob
    import os

    from relax_vk.runtime import load

    ok = True
    for path in sorted(glob.glob(os.path.join(folder, "*-shared.rvk"))):
        stem = path[: -len("-shared.rvk")]
        with np.load(stem + "-input.npz") as z:
            inputs = [z[k] for k in sorted(z.files, key=lambda k: int(k.split("_")[1]))]
        a, b = load(path, device=device), load(stem + "-alone.rvk", device=device)
        got, want = a.run(inputs), b.run(inputs)
        same = all(np.array_equal(x, y) for x, y in zip(got, want))
        ok &= same
        print(f"{os.path.basename(stem):<36} {a.device_bytes / MIB:8.2f} MiB shared, {b.device_bytes / MIB:8.2f} MiB unshared, "
              f"outputs {'identical' if same else 'DIFFER'} on {a.device_name}", flush=True)
    return 0 if ok else 1


def table(rows) -> str:
    head = f"{'model':<18} {'plan':<8} {'no reuse MiB':>12} {'reuse MiB':>10} {'bound MiB':>10} {'reuse/bound':>11} {'saved':>6} {'allocs':>7}  strategies"
    lines = [head, "-" * len(head)]
    for r in rows:
        strategies = ", ".join(f"{k.replace('texture:float32', 'tex')}: {v}" for k, v in sorted(r["strategies"].items()))
        lines.append(
            f"{r['model']:<18} {r['plan']:<8} {r['without_reuse'] / MIB:>12.3f} {r['with_reuse'] / MIB:>10.3f} {r['lower_bound'] / MIB:>10.3f} "
            f"{r['ratio']:>10.2f}x {r['reduction']:>5.1f}x {r['allocations']:>3}/{r['tensors']:<3}  {strategies}"
            + (f"  outputs {'identical' if r['identical'] else 'DIFFER'}" if "identical" in r else "")
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", help="zoo names, NAME@SIZE for a square input (default: the zoo + " + ", ".join(EXTRA) + ")")
    p.add_argument("--api", nargs="+", default=["opencl"], choices=("opencl", "vulkan"))
    p.add_argument("--plans", nargs="+", default=["texture", "buffer"], choices=("texture", "buffer"))
    p.add_argument("--check", metavar="DEVICE", help="run shared and unshared artifacts on DEVICE; outputs must be identical")
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--bundle", metavar="DIR", help="write each row's shared and unshared artifacts and an input here, for --run")
    p.add_argument("--run", metavar="DIR", help="run a bundle on --device (no TVM needed)")
    p.add_argument("--device", default="gpu", help="with --run: the device")
    args = p.parse_args(argv)
    if args.run:
        return run_bundle(args.run, args.device)
    from relax_vk.zoo import ZOO

    names = args.models or sorted(ZOO) + EXTRA
    rows = []
    for name in names:
        for prefer in args.plans:
            for api in args.api:
                rows.append(measure(name, api, prefer, args.check, args.bundle))
                print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    print(table(rows))
    for prefer in args.plans:
        mine = [r for r in rows if r["plan"] == prefer]
        worst = max(mine, key=lambda r: r["ratio"])
        print(f"{prefer} plans: reuse/bound worst {worst['ratio']:.2f}x ({worst['model']}), "
              f"median {float(np.median([r['ratio'] for r in mine])):.2f}x; saved median {float(np.median([r['reduction'] for r in mine])):.1f}x")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r.get("identical", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
