"""One artifact with run-time dims against builds fixed to each shape, side by side in one process.

Each model is built once with run-time dims and once per measured size with every dim fixed; each
artifact is loaded on one device. Per size: the fixed build's steady latency and device bytes; the
run-time-dims artifact's first run at that size (after a run at another size: no compile, no
allocation), its steady latency, the ratio to the fixed build, and the largest difference from
onnxruntime of either (a share of the output's largest magnitude). Then the run-time-dims
artifact's device bytes (held once, at the bound). The models (:data:`MODELS`):

* ``ppocr_rec``: PP-OCRv4's recognizer (rapidocr_onnxruntime), ``x=1,3,48,W``, ``W`` in ``--range``;
* ``ppocr_det``: PP-OCRv4's detector, ``x=1,3,H,W`` with ``H, W`` multiples of 32 up to 960;
* ``crnn`` / ``crnn_gru``: the zoo's CRNN recognizers (2-layer BiLSTM / BiGRU along the width),
  exported by ``torch.onnx.export``, ``x=1,3,32,W``, ``W`` in ``--range``;
* ``resnet18``: the zoo's ResNet-18, exported the same way, ``x=1,3,H,W`` with ``H, W`` in 64..320,
  measured at 224 and 320.

    python benchmarks/run_time_dims.py [--models ppocr_rec crnn] [--widths 160 640] [--range 32:1280] [--api opencl|vulkan] [--device pocl] [--repeat 5] [--specialize] [--json]

``--specialize``: the run-time-dims model is also built carrying a shape variant at each measured
size (:mod:`relax_vk.codegen.shape_variants`), and measured beside the others: its first and steady
run at each size (the variant's program), its run at the first size (no variant there: the generic
program) and its device bytes.

On a machine without TVM (the GPU machine), in two steps: ``--build DIR`` here (the artifacts, with
``--device-name`` the fixed builds use that device's tuning database; the inputs and onnxruntime's
outputs), then ``--run DIR --device gpu`` there (the runtime and numpy only)::

    python benchmarks/run_time_dims.py --build .gpu/dims --models ppocr_rec ppocr_det crnn crnn_gru --apis opencl vulkan --device-name "NVIDIA H200"
    python3 benchmarks/run_time_dims.py --run .gpu/dims --device gpu --repeat 20 --json   # GPU machine
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from backend_latency import is_refilled, load_artifact, store_constants  # noqa: E402

DEVICES = {"opencl": "pocl", "vulkan": "lavapipe"}


@dataclass(frozen=True)
class Case:
    """A model measured at run-time dims: its input's shape (dim names for the run-time axes), the
    dims' ranges (``(min, max)`` or ``(min, max, step)``), the sizes measured and the size of the
    session's first run."""

    name: str
    shape: Tuple
    dims: Dict[str, Tuple[int, ...]]
    sizes: List[Dict[str, int]]
    first: Dict[str, int]

    def input_shape(self, size: Dict[str, int]) -> Tuple[int, ...]:
        return tuple(size[d] if isinstance(d, str) else d for d in self.shape)

    @staticmethod
    def label(size: Dict[str, int]) -> str:
        return " ".join(f"{k}={v}" for k, v in size.items())


def cases(models, widths, lo: int, hi: int) -> List[Case]:
    """The :class:`Case` of each model name (``widths`` and ``lo:hi``: the width-only models')."""
    by_width = [{"W": w} for w in widths]
    table = {
        "ppocr_rec": Case("ppocr_rec", (1, 3, 48, "W"), {"W": (lo, hi)}, by_width, {"W": lo}),
        "ppocr_det": Case("ppocr_det", (1, 3, "H", "W"), {"H": (32, 960, 32), "W": (32, 960, 32)},
                          [{"H": 320, "W": 320}, {"H": 640, "W": 640}], {"H": 32, "W": 32}),  # fmt: skip
        "crnn": Case("crnn", (1, 3, 32, "W"), {"W": (lo, hi)}, by_width, {"W": lo}),
        "crnn_gru": Case("crnn_gru", (1, 3, 32, "W"), {"W": (lo, hi)}, by_width, {"W": lo}),
        "resnet18": Case("resnet18", (1, 3, "H", "W"), {"H": (64, 320), "W": (64, 320)},
                         [{"H": 224, "W": 224}, {"H": 320, "W": 320}], {"H": 64, "W": 64}),  # fmt: skip
    }
    unknown = [m for m in models if m not in table]
    if unknown:
        raise SystemExit(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(table)}")
    return [table[m] for m in models]


def onnx_path(case: Case, folder: str) -> str:
    """The model's ONNX file: the packaged PP-OCR model, or the zoo model exported into ``folder``."""
    if case.name.startswith("ppocr_"):
        from relax_vk.zoo.packaged import packaged_model_path

        return str(packaged_model_path(case.name))
    import torch

    from relax_vk.zoo import build_zoo_model

    model, example = build_zoo_model(case.name)
    path = os.path.join(folder, f"{case.name}.onnx")
    axes = {"x": {i: d for i, d in enumerate(case.shape) if isinstance(d, str)}}
    torch.onnx.export(model, (example,), path, dynamo=False, input_names=["x"], output_names=["y"], dynamic_axes=axes)
    return path


def _inputs(case: Case) -> dict:
    rng = np.random.default_rng(0)
    return {Case.label(s): rng.standard_normal(case.input_shape(s)).astype("float32") for s in [case.first, *case.sizes]}


def _builds(case: Case, path: str, api: str, device_name=None, specialize: bool = False):
    """``(run-time-dims artifact, {label: fixed artifact}, build seconds of the first, {label: shape
    variant})``: with ``specialize``, the run-time-dims build also fixed to each measured size
    (``relax_vk.build(..., specialize=...)``), each variant's artifact on its own (the bundle carries
    it so; :func:`with_variants_of` puts them back together)."""
    import relax_vk
    from relax_vk.frontends.onnx import from_onnx

    make = relax_vk.target.vulkan if api == "vulkan" else relax_vk.target.opencl
    start = time.perf_counter()
    mod = from_onnx(path, {"x": case.shape}, dims=case.dims)
    dynamic = relax_vk.build(mod, make(device_name=device_name)).artifact()
    seconds = time.perf_counter() - start
    fixed = {Case.label(s): relax_vk.build(from_onnx(path, {"x": case.input_shape(s)}), make(device_name=device_name)).artifact() for s in case.sizes}
    variants = {}
    if specialize:
        from relax_vk.codegen.shape_variants import specialize as fixed_to

        variants = {Case.label(s): relax_vk.build(fixed_to(mod, s), make(device_name=device_name)).artifact() for s in case.sizes}
    return dynamic, fixed, seconds, variants


def with_variants_of(dynamic, variants: dict, sizes: Dict[str, Dict[str, int]]):
    """The artifact ``relax_vk.build(..., specialize=...)`` writes, from its parts: ``dynamic`` carrying
    ``variants`` (label -> artifact), ``sizes`` (label -> dims) naming each one's dims."""
    from relax_vk.serialization.artifact import with_variants

    return with_variants(dynamic, [(sizes[label], artifact) for label, artifact in variants.items()])


def _references(path: str, inputs: dict) -> dict:
    import onnxruntime as ort

    session = ort.InferenceSession(path)
    return {k: session.run(None, {"x": x})[0] for k, x in inputs.items()}


def _error(got: np.ndarray, reference) -> float:
    """The largest difference from ``reference`` as a share of its largest magnitude (NaN without
    one: weights refilled where they run)."""
    if reference is None:
        return float("nan")
    return float(np.abs(got - reference).max()) / float(np.abs(reference).max())


def measure(dynamic, fixed: dict, inputs: dict, references: Optional[dict], first: str, device: str, repeat: int, specialized=None) -> dict:
    """The table's rows for one model and API: ``dynamic`` and ``fixed`` (label -> artifact) on
    ``device``; with ``specialized`` (``dynamic`` carrying a shape variant at each measured size),
    that artifact too, in the same rows (``variant_*``)."""
    from relax_vk.runtime import load

    rows = _measure_sessions(dynamic, fixed, inputs, references, first, device, repeat)
    if specialized is None:
        return rows
    carrying = load(specialized, device=device)
    carrying.run([inputs[first]])  # (a run of the generic program first, as for `dynamic`)
    for row in rows["rows"]:
        x = inputs[row["size"]]
        start = time.perf_counter()
        (out,) = carrying.run([x])
        first_ms = (time.perf_counter() - start) * 1e3
        if carrying.variant is None:
            raise RuntimeError(f"the run at {row['size']} did not run its shape variant")
        steady = carrying.time([x], repeat=repeat)["median"]
        reference = None if references is None else references[row["size"]]
        row.update({"variant_first_ms": first_ms, "variant_steady_ms": steady, "variant_ratio": steady / row["fixed_ms"],
                    "max_err_variant": _error(out, reference)})  # fmt: skip
    other = carrying.time([inputs[first]], repeat=repeat)["median"]  # (a size no variant has: the generic program)
    rows.update({"variant_device_bytes": carrying.device_bytes, "variant_generic_ms": other, "generic_ms_at_first": _steady(dynamic, inputs[first], device, repeat)})
    return rows


def _steady(artifact, x, device: str, repeat: int) -> float:
    from relax_vk.runtime import load

    return load(artifact, device=device).time([x], repeat=repeat)["median"]


def _measure_sessions(dynamic, fixed: dict, inputs: dict, references: Optional[dict], first: str, device: str, repeat: int) -> dict:
    from relax_vk.runtime import load

    session = load(dynamic, device=device)
    start = time.perf_counter()
    session.run([inputs[first]])  # the first run of the session, at another size
    print(f"  loaded; the session's first run {time.perf_counter() - start:.2f} s", file=sys.stderr, flush=True)
    rows = []
    for label, artifact in fixed.items():
        start = time.perf_counter()
        (out,) = session.run([inputs[label]])
        first_ms = (time.perf_counter() - start) * 1e3
        dyn_ms = session.time([inputs[label]], repeat=repeat)["median"]
        fixed_session = load(artifact, device=device)
        (fixed_out,) = fixed_session.run([inputs[label]])
        fixed_ms = fixed_session.time([inputs[label]], repeat=repeat)["median"]
        reference = None if references is None else references[label]
        rows.append({"size": label, "fixed_ms": fixed_ms, "fixed_device_bytes": fixed_session.device_bytes, "first_ms": first_ms, "steady_ms": dyn_ms,
                     "ratio": dyn_ms / fixed_ms, "first_over_steady": first_ms / dyn_ms,
                     "max_err_dynamic": _error(out, reference), "max_err_fixed": _error(fixed_out, reference)})  # fmt: skip
        del fixed_session
    return {"device": session.device_name, "dynamic_device_bytes": session.device_bytes, "rows": rows}


def print_table(result: dict) -> None:
    dims = ", ".join(f"{k}={':'.join(str(v) for v in r)}" for k, r in result["dims"].items())
    print(f"{result['model']}, {result['api']} on {result['device']}: one artifact {dims}"
          + (f" (built in {result['build_s']:.1f} s)" if "build_s" in result else "")
          + f", {result['dynamic_device_bytes'] / 2**20:.2f} MiB on the device, against a build per size")  # fmt: skip
    print(f"{'size':>14} {'fixed ms':>9} {'fixed MiB':>9} {'first ms':>9} {'steady ms':>9} {'ratio':>6} {'first/steady':>12} {'err dyn':>9} {'err fixed':>9}")
    for r in result["rows"]:
        print(f"{r['size']:>14} {r['fixed_ms']:>9.2f} {r['fixed_device_bytes'] / 2**20:>9.2f} {r['first_ms']:>9.2f} {r['steady_ms']:>9.2f} "
              f"{r['ratio']:>6.2f} {r['first_over_steady']:>12.2f} {r['max_err_dynamic']:>9.1e} {r['max_err_fixed']:>9.1e}")  # fmt: skip
    if "variant_device_bytes" in result:
        print(f"  with a shape variant at each size: {result['variant_device_bytes'] / 2**20:.2f} MiB on the device; at {result['first']} "
              f"(no variant) {result['variant_generic_ms']:.2f} ms against {result['generic_ms_at_first']:.2f} without variants")  # fmt: skip
        print(f"{'size':>14} {'first ms':>9} {'steady ms':>9} {'/fixed':>6} {'err':>9}")
        for r in result["rows"]:
            print(f"{r['size']:>14} {r['variant_first_ms']:>9.2f} {r['variant_steady_ms']:>9.2f} {r['variant_ratio']:>6.2f} {r['max_err_variant']:>9.1e}")


def build_bundle(outdir: str, case_list: List[Case], apis, device_name, refill_over=None, specialize: bool = False) -> None:
    os.makedirs(os.path.join(outdir, "blobs"), exist_ok=True)
    arrays, entries = {}, []
    with tempfile.TemporaryDirectory() as folder:
        for case in case_list:
            path = onnx_path(case, folder)
            inputs = _inputs(case)
            references = _references(path, inputs)
            arrays.update({f"{case.name}|x|{k}": x for k, x in inputs.items()})
            arrays.update({f"{case.name}|y|{k}": y for k, y in references.items()})
            for api in apis:
                dynamic, fixed, seconds, variants = _builds(case, path, api, device_name, specialize)
                for label, artifact, variant in [(None, dynamic, False), *((k, a, False) for k, a in fixed.items()), *((k, a, True) for k, a in variants.items())]:
                    entries.append({"model": case.name, "api": api, "size": label, "variant": variant, "program": artifact.program, "source": artifact.source,
                                    "constants": store_constants(outdir, artifact, refill_over=refill_over)})  # fmt: skip
                print(f"built {case.name} for {api}: the run-time-dims artifact in {seconds:.1f} s and {len(fixed)} fixed ones", flush=True)
    np.savez(os.path.join(outdir, "io.npz"), **arrays)
    with gzip.open(os.path.join(outdir, "index.json.gz"), "wt") as f:
        json.dump({"cases": [{"name": c.name, "dims": c.dims, "first": Case.label(c.first), "sizes": {Case.label(s): s for s in c.sizes}}
                             for c in case_list], "entries": entries}, f)  # fmt: skip


def run_bundle(outdir: str, device, repeat: int) -> list:
    with gzip.open(os.path.join(outdir, "index.json.gz"), "rt") as f:
        index = json.load(f)
    io = np.load(os.path.join(outdir, "io.npz"))
    results = []
    for case in index["cases"]:
        name = case["name"]
        inputs = {k.split("|", 2)[2]: io[k] for k in io.files if k.startswith(f"{name}|x|")}
        references = {k.split("|", 2)[2]: io[k] for k in io.files if k.startswith(f"{name}|y|")}
        for api in dict.fromkeys(e["api"] for e in index["entries"] if e["model"] == name):
            entries = [e for e in index["entries"] if e["model"] == name and e["api"] == api]
            dynamic = load_artifact(outdir, next(e for e in entries if e["size"] is None))
            fixed = {e["size"]: load_artifact(outdir, e) for e in entries if e["size"] is not None and not e.get("variant")}
            variants = {e["size"]: load_artifact(outdir, e) for e in entries if e.get("variant")}
            specialized = with_variants_of(dynamic, variants, case["sizes"]) if variants else None
            refilled = any(is_refilled(e) for e in entries)  # (weights refilled where they run: no reference applies)
            print(f"[{time.strftime('%H:%M:%S')}] {name} on {api} ...", file=sys.stderr, flush=True)
            try:
                measured = measure(dynamic, fixed, inputs, None if refilled else references, case["first"], device or DEVICES[api], repeat, specialized)
            except Exception as err:  # one model failing on a device is a row, not the end of the campaign
                measured = {"device": device, "dynamic_device_bytes": 0, "rows": [], "error": f"{type(err).__name__}: {err}"}
            results.append({"model": name, "api": api, "dims": case["dims"], "first": case["first"], **measured})
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["ppocr_rec"], help="ppocr_rec, ppocr_det, crnn, crnn_gru, resnet18")
    parser.add_argument("--widths", nargs="+", type=int, default=[160, 640], help="the width-only models' measured widths")
    parser.add_argument("--range", default="32:1280", help="the width-only models' range, MIN:MAX")
    parser.add_argument("--api", choices=("opencl", "vulkan"), default="opencl")
    parser.add_argument("--apis", nargs="+", choices=("opencl", "vulkan"), default=None, help="--build: the APIs to build for (default: --api)")
    parser.add_argument("--device", default=None, help="default: pocl (OpenCL), lavapipe (Vulkan)")
    parser.add_argument("--device-name", default=None, help="--build: the fixed builds use this device's tuning database")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--build", metavar="DIR", help="build the artifacts, inputs and references into DIR (no run)")
    parser.add_argument("--run", metavar="DIR", help="run a bundle --build made (no TVM, no onnxruntime needed)")
    parser.add_argument("--refill-over", type=float, default=None, metavar="MIB",
                        help="--build: weights over this size travel as seeds and are refilled where they run (speed only: no error column)")
    parser.add_argument("--specialize", action="store_true",
                        help="also measure the run-time-dims artifact carrying a shape variant at each measured size (--specialize)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    lo, hi = (int(v) for v in args.range.split(":"))
    if args.run:
        results = run_bundle(args.run, args.device, args.repeat)
    else:
        case_list = cases(args.models, args.widths, lo, hi)
        if args.build:
            over = None if args.refill_over is None else int(args.refill_over * (1 << 20))
            build_bundle(args.build, case_list, args.apis or [args.api], args.device_name, over, args.specialize)
            return 0
        results = []
        with tempfile.TemporaryDirectory() as folder:
            for case in case_list:
                path = onnx_path(case, folder)
                inputs = _inputs(case)
                dynamic, fixed, seconds, variants = _builds(case, path, args.api, specialize=args.specialize)
                specialized = with_variants_of(dynamic, variants, {Case.label(s): s for s in case.sizes}) if variants else None
                measured = measure(dynamic, fixed, inputs, _references(path, inputs), Case.label(case.first), args.device or DEVICES[args.api], args.repeat,
                                   specialized)  # fmt: skip
                results.append({"model": case.name, "api": args.api, "dims": case.dims, "first": Case.label(case.first), "build_s": seconds, **measured})
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for result in results:
            print_table(result) if "error" not in result else print(f"{result['model']}, {result['api']}: {result['error']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
