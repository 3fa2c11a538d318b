"""The ``relax-vk`` command line.

* ``relax-vk plan MODEL [--target opencl|vulkan] [--json]``: the memory plan of a model;
* ``relax-vk show MODEL``: the module after every scope stage;
* ``relax-vk build MODEL --target opencl -o DIR``: compile; writes ``kernels.cl``, ``plan.json``
  (the ``plan --json`` contract) and ``module.py`` (the final Relax module as TVMScript);
* ``relax-vk demo``: the README's main job on the built-in default model;
* ``relax-vk models``: the built-in example models.

MODEL is a built-in example name (``relax-vk models``). ``--json`` output follows the contract in
:mod:`relax_vk.plan` and does not change shape between versions.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

DEFAULT_MODEL = "rfc-conv2d"


def _load(name: str):
    from .models import build_example

    return build_example(name)


def _target(args):
    from . import target

    make = target.opencl if args.target == "opencl" else target.vulkan
    return make(spatial_limit=args.spatial_limit, depth_limit=args.depth_limit)


def _options(args):
    from .options import ScopeOptions

    return ScopeOptions(textures=not args.no_textures, weights_in_texture=not args.weights_in_buffers)


def _add_model_args(p: argparse.ArgumentParser, model_default: Optional[str] = None) -> None:
    if model_default is None:
        p.add_argument("model", help="built-in example name (see `relax-vk models`)")
    p.add_argument("--target", choices=("opencl", "vulkan"), default="opencl")
    p.add_argument("--spatial-limit", type=int, default=16384, help="max texture width/height (default 16384)")
    p.add_argument("--depth-limit", type=int, default=2048, help="max texture array layers (default 2048)")
    p.add_argument("--weights-in-buffers", action="store_true", help="keep conv2d weights in buffers")
    p.add_argument("--no-textures", action="store_true", help="all-buffer plan (for comparisons)")


def _scoped(args, model: str):
    from .pipeline import scope_pipeline

    return scope_pipeline(_target(args), options=_options(args))(_load(model))


def cmd_plan(args) -> int:
    from .memory_plan import plan

    result = plan(_scoped(args, args.model))
    print(json.dumps(result.to_json(), indent=2) if args.json else result.table())
    return 0


def cmd_show(args) -> int:
    from .pipeline import layout_stage
    from .passes import (
        CollectConsumerScopeInfo,
        CollectProducerScopeInfo,
        DefineVDevice,
        PartialLegalize,
        RemoveRedundantAssignments,
    )
    import tvm

    tgt, opts = _target(args), _options(args)
    stages = [
        ("convert layout", layout_stage()),
        ("partial legalization", PartialLegalize()),
        ("consumer + producer scope info", tvm.transform.Sequential([CollectConsumerScopeInfo(tgt, options=opts), CollectProducerScopeInfo(tgt, options=opts)])),
        ("DefineVDevice", DefineVDevice(tgt, options=opts)),
        ("RealizeVDevice", tvm.relax.transform.RealizeVDevice()),
        ("RemoveRedundantAssignments", RemoveRedundantAssignments()),
    ]
    mod = _load(args.model)
    for title, stage in stages:
        mod = stage(mod)
        print(f"# ===== after {title} =====")
        print(mod["main"].script(show_meta=False))
    return 0


def cmd_demo(args) -> int:
    from .memory_plan import plan

    print(f"relax_vk demo: model {args.model!r}, target {args.target}")
    print("[1/2] running the scope stages ...", flush=True)
    mod = _scoped(args, args.model)
    print(mod["main"].script(show_meta=False))
    print("[2/2] memory plan")
    print(plan(mod).table())
    return 0


def cmd_build(args) -> int:
    import os
    import shutil
    import tempfile

    from .compiler import build

    print(f"[1/2] building {args.model} for {args.target} ...", flush=True)
    compiled = build(_load(args.model), _target(args), options=_options(args))
    out = os.path.abspath(args.output)
    parent = os.path.dirname(out) or "."
    os.makedirs(parent, exist_ok=True)
    # write everything into a sibling temporary folder, then move it into place: an interrupted
    # or failed build never leaves a half-written output folder
    staging = tempfile.mkdtemp(prefix=".relax-vk-build-", dir=parent)
    os.chmod(staging, 0o755)
    try:
        with open(os.path.join(staging, "kernels.cl"), "w") as f:
            f.write(compiled.opencl_source)
        with open(os.path.join(staging, "plan.json"), "w") as f:
            json.dump(compiled.plan().to_json(), f, indent=2)
        with open(os.path.join(staging, "module.py"), "w") as f:
            f.write(compiled.lowered.script(show_meta=False))
        if os.path.isdir(out):
            shutil.rmtree(out)
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    timings = ", ".join(f"{k} {v:.2f}s" for k, v in compiled.stage_seconds.items())
    print(f"[2/2] wrote {out}: {len(compiled.kernels)} kernels ({timings})")
    return 0


def cmd_models(_args) -> int:
    from .models import EXAMPLES

    for name, (_, description) in sorted(EXAMPLES.items()):
        print(f"{name:18s} {description}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="relax-vk", description="Texture memory scoping for TVM Relax")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="print the memory plan of a model")
    _add_model_args(p)
    p.add_argument("--json", action="store_true", help="machine-readable output (stable contract)")
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser("show", help="print the module after each scope stage")
    _add_model_args(p)
    p.set_defaults(func=cmd_show)
    p = sub.add_parser("build", help="compile a model to OpenCL texture kernels")
    _add_model_args(p)
    p.add_argument("-o", "--output", required=True, help="output folder (replaced if it exists)")
    p.set_defaults(func=cmd_build)
    p = sub.add_parser("demo", help="scope the built-in default model and print its plan")
    _add_model_args(p, model_default=DEFAULT_MODEL)
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("models", help="list the built-in example models")
    p.set_defaults(func=cmd_models)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, ImportError) as err:
        print(f"relax-vk: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
