"""``relax-vk profile`` and ``relax-vk bisect`` on the zoo, on the test devices.

Usage: python benchmarks/profile_bisect_zoo.py [MODEL ...] [--apis opencl vulkan] [--repeat N] [-o OUT.json]

Per zoo model and API (OpenCL on pocl, Vulkan on lavapipe), one build:

* the profile of its artifact (storage reuse on, as ``run`` uses it) over ``--repeat`` warm runs:
  the device time of the median run, the sum of the rows (which must be within 5% of it), the
  share of that time in model-op rows (``op``), in kernels the compiler added (``layout``) and in
  copies (each with its launch gaps), the share of the launch gaps themselves, and how many of the model's named ops reach a kernel (ops folded into
  constants at compile time reach none);
* a bisection of the same build without storage reuse: how many op outputs were compared and
  skipped, and the first bad op (None on a healthy build).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

DEVICES = {"opencl": "pocl", "vulkan": "lavapipe"}


def main(argv=None) -> int:
    from relax_vk.core.provenance import MODEL_OPS_ATTR
    from relax_vk.frontends import load_model
    from relax_vk.runtime import load
    from relax_vk.tools.bisect import bisect_session
    from relax_vk.tools.profile import _device, build_for, profile_session, seeded_inputs
    from relax_vk.zoo import ZOO

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(ZOO))
    parser.add_argument("--apis", nargs="+", default=["opencl", "vulkan"], choices=list(DEVICES))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("-o", "--output", default=None)
    args = parser.parse_args(argv)
    rows = []
    print(f"{'model':<14} {'api':<6} {'device ms':>9} {'rows/dev':>8} {'op %':>6} {'layout %':>8} {'copy %':>6} {'gaps %':>6} "
          f"{'named ops':>10} {'compared':>8} {'skipped':>7}  first bad", flush=True)  # fmt: skip
    for name in args.models:
        mod, source = load_model(name)
        named = set(str(v) for v in dict(mod["main"].attrs[MODEL_OPS_ATTR]).values())
        for api in args.apis:
            t0 = time.perf_counter()
            device = _device(api, DEVICES[api])
            try:
                compiled = build_for(mod, api, device, model=source)
                session = load(compiled.artifact(), device=device)
                inputs = seeded_inputs(session)
                p = profile_session(session, inputs, args.repeat, name)
                del session
                b = bisect_session(load(compiled.artifact(reuse=False), device=device), mod, inputs, name)
            except Exception as err:  # a model that does not build or run here: recorded, not fatal
                rows.append({"model": name, "api": api, "error": f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"})
                print(f"{name:<14} {api:<6} ERROR {rows[-1]['error']}", flush=True)
                continue
            share = {k: sum(r["ms"] for r in p.ops if r["kind"] == k) / p.device_ms for k in ("op", "layout", "copy")}
            share["gaps"] = p.idle_ms / p.device_ms  # (launch gaps: inside the rows above)
            reached = {o for k in p.kernels for o in k["ops"]}
            row = {"model": name, "api": api, "device": p.device, "device_ms": p.device_ms, "rows_over_device": sum(r["ms"] for r in p.ops) / p.device_ms,
                   "share": share, "named_ops": len(named), "named_ops_in_kernels": len(reached & named), "compared": len(b.compared),
                   "skipped": len(b.skipped), "first_bad": b.first_bad, "seconds": time.perf_counter() - t0}  # fmt: skip
            rows.append(row)
            bad = "-" if b.first_bad is None else f"{b.first_bad['op']} ({b.first_bad['max_abs_err']:.3g} > {b.first_bad['bound']:.3g})"
            print(f"{name:<14} {api:<6} {p.device_ms:>9.3f} {row['rows_over_device']:>8.4f} {100 * share['op']:>6.1f} {100 * share['layout']:>8.1f} "
                  f"{100 * share['copy']:>6.1f} {100 * share['gaps']:>6.1f} {row['named_ops_in_kernels']:>4}/{len(named):<5} "
                  f"{len(b.compared):>8} {len(b.skipped):>7}  {bad}", flush=True)  # fmt: skip
            if args.output:
                with open(args.output, "w") as f:
                    json.dump(rows, f, indent=1)
    return 0 if all("error" not in r and r["first_bad"] is None and abs(r["rows_over_device"] - 1) <= 0.05 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
