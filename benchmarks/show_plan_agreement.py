"""``relax-vk show`` against ``relax-vk plan`` on every zoo model and built-in example, for every
device-limit preset (:data:`relax_vk.core.limits.PRESETS`) and both APIs: the module show prints
after its last stage must be, structurally, the scoped module plan describes (issue 34: show ran a
hand-copied stage list that had drifted). Both go through the command line's own code
(``_shown_stages``, ``_scoped_with_decision``); each model is imported once.
``tests/tools/test_cli_show.py`` checks a few small models in the suite; this is the whole sweep
(about 15 minutes on 2 shared cores).

Usage::

    python benchmarks/show_plan_agreement.py [--models resnet18 residual] [--presets adreno6xx] [--targets vulkan]

Prints one line per model and a total; exits 1 if any combination differs.
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv=None) -> int:
    import tvm

    from relax_vk.core.limits import PRESETS
    from relax_vk.models import EXAMPLES
    from relax_vk.tools import cli
    from relax_vk.zoo import ZOO

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="*", default=sorted(ZOO) + sorted(EXAMPLES))
    p.add_argument("--presets", nargs="*", default=sorted(PRESETS))
    p.add_argument("--targets", nargs="*", default=["opencl", "vulkan"])
    args = p.parse_args(argv)

    loaded = {}
    load = cli._load
    cli._load = lambda name, a=None: loaded[name] if name in loaded else loaded.setdefault(name, load(name, a))
    agree, differ = 0, []
    for model in args.models:
        start = time.perf_counter()
        for preset in args.presets:
            for target in args.targets:
                argv_ = [model, "--preset", preset, "--target", target]
                shown = list(cli._shown_stages(cli.build_parser().parse_args(["show", *argv_])))[-1][1]
                plan_args = cli.build_parser().parse_args(["plan", *argv_])
                try:
                    tvm.ir.assert_structural_equal(shown, cli._scoped_with_decision(plan_args, model)[0])
                    agree += 1
                except ValueError as err:
                    differ.append((model, preset, target))
                    print(f"DIFFER {model} {preset} {target}: {str(err).splitlines()[0][:160]}", flush=True)
        loaded.clear()
        print(f"{model:<16} {len(args.presets) * len(args.targets)} combinations, {time.perf_counter() - start:.0f} s", flush=True)
    print(f"show and plan agree on {agree} of {agree + len(differ)} (model, preset, API) combinations")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
