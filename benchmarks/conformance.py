"""Model conformance table: every zoo model through both front doors and the packaged PP-OCR models,
compiled for OpenCL and Vulkan, run on pocl and lavapipe, compared with PyTorch eager / onnxruntime.

One row per (model, front door, backend): activation texture share, copies, kernels, compile
seconds, result and max abs error. Usage::

    python benchmarks/conformance.py                       # everything (about 10-20 minutes on 2 cores)
    python benchmarks/conformance.py resnet18 ppocr_det    # some models
    python benchmarks/conformance.py --backend opencl --front-door onnx

Exit code 1 when any row is not OK. CI runs a representative subset through the test suite
(tests/zoo); the full table is in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
import warnings
from contextlib import redirect_stderr, redirect_stdout

import numpy as np

DEVICES = {"opencl": "pocl", "vulkan": "lavapipe"}


def _quiet(fn, *args, **kw):
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        return fn(*args, **kw)


def _torch_case(name: str, front_door: str):
    import torch

    from relax_vk.frontends import from_onnx, from_torch
    from relax_vk.zoo import build_zoo_model

    model, example = build_zoo_model(name)
    with torch.no_grad():
        expected = model(example)
    expected = [e.numpy() for e in (expected if isinstance(expected, tuple) else (expected,))]
    if front_door == "torch":
        return _quiet(from_torch, model, (example,)), [example.numpy()], expected
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{name}.onnx")
        fast = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(False)  # nn.MultiheadAttention's fused eval kernel has no ONNX export
        try:
            with torch.no_grad():
                _quiet(torch.onnx.export, model, (example,), path, dynamo=False, opset_version=17)
        finally:
            torch.backends.mha.set_fastpath_enabled(fast)
        return _quiet(from_onnx, path), [example.numpy()], expected


def _packaged_case(name: str):
    import onnxruntime as ort

    from relax_vk.frontends import load_model
    from relax_vk.zoo.packaged import example_input, packaged_model_path

    x = example_input(name)
    expected = ort.InferenceSession(packaged_model_path(name)).run(None, {"x": x})
    return _quiet(load_model, name)[0], [x], expected


def run_row(name: str, front_door: str, backend: str) -> dict:
    import relax_vk
    from relax_vk.runtime import load
    from relax_vk.zoo.packaged import PACKAGED

    row = {"model": name, "front_door": front_door, "backend": backend, "share": None, "copies": None, "kernels": None,
           "compile_s": None, "result": "ERROR", "max_err": None, "error": ""}  # fmt: skip
    try:
        mod, inputs, expected = _packaged_case(name) if name in PACKAGED else _torch_case(name, front_door)
        t0 = time.perf_counter()
        compiled = _quiet(relax_vk.build, mod, target=backend)
        row["compile_s"] = time.perf_counter() - t0
        plan = compiled.plan()
        row.update(share=plan.activation_texture_share, copies=plan.copies, kernels=len(compiled.kernels))
        outputs = load(compiled.artifact(), device=DEVICES[backend]).run(inputs)
        errs = [float(np.max(np.abs(o - e))) for o, e in zip(outputs, expected)]
        row["max_err"] = max(errs)
        ok = len(outputs) == len(expected) and all(np.allclose(o, e, rtol=1e-3, atol=1e-4) for o, e in zip(outputs, expected))
        row["result"] = "OK" if ok else "MISMATCH"
    except Exception as err:  # a row per failure, the table goes on
        row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:100] if str(err) else ''}"
    return row


def main(argv=None) -> int:
    from relax_vk.zoo import ZOO
    from relax_vk.zoo.packaged import PACKAGED

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", help="zoo or packaged model names (default: all)")
    p.add_argument("--backend", choices=("opencl", "vulkan", "both"), default="both")
    p.add_argument("--front-door", choices=("torch", "onnx", "both"), default="both")
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore")
    models = args.models or sorted(ZOO) + sorted(PACKAGED)
    backends = ("opencl", "vulkan") if args.backend == "both" else (args.backend,)
    doors = ("torch", "onnx") if args.front_door == "both" else (args.front_door,)
    header = f"{'model':<15} {'door':<6} {'backend':<7} {'texture %':>9} {'copies':>6} {'kernels':>7} {'compile s':>9}  {'result':<8} {'max err':>8}  error"
    print(header)
    print("-" * len(header))
    failures = 0
    for name in models:
        for door in (("onnx",) if name in PACKAGED else doors):
            for backend in backends:
                r = run_row(name, door, backend)
                failures += r["result"] != "OK"
                share = f"{100 * r['share']:.1f}" if r["share"] is not None else "-"
                compile_s = f"{r['compile_s']:.1f}" if r["compile_s"] is not None else "-"
                err = f"{r['max_err']:.1e}" if r["max_err"] is not None else "-"
                print(f"{name:<15} {door:<6} {backend:<7} {share:>9} {str(r['copies'] if r['copies'] is not None else '-'):>6} "
                      f"{str(r['kernels'] or '-'):>7} {compile_s:>9}  {r['result']:<8} {err:>8}  {r['error']}", flush=True)  # fmt: skip
    print(f"\n{failures} of the rows failed" if failures else "\nevery row OK")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
