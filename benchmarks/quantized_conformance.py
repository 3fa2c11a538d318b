"""Quantized real models: relax_vk's zoo ResNet-18 / MobileNetV2 (or any zoo model named; exported to ONNX) and the
PP-OCR detector, recognizer and direction classifier (the ONNX files inside
``rapidocr_onnxruntime``), quantized with onnxruntime's own tools in each form, built for OpenCL
and Vulkan, run on pocl and lavapipe, compared with onnxruntime's CPU run of the same quantized
model.

Forms: ``qdq`` (``quantize_static``'s default: QDQ, int8, per tensor), ``qdq_pc`` (QDQ, uint8
activations and weights, per channel), ``qoperator`` (``quant_format=QOperator``) and ``dynamic``
(``quantize_dynamic``). Calibration: a fixed-seed reader of 4 inputs (random normal for the zoo,
``relax_vk.zoo.packaged.example_input`` pages for PP-OCR).

One row per (model, form, API): the max error over the outputs as a fraction of that output's
range (and the mean error: one pixel of a probability map that lands a quantization step away
shows in the max, not the mean), the share of positions whose arg-max agrees (classifiers and the recognizer's per-time-step
classes; ``-`` for the detector's probability map), the artifact's constant bytes (int8/uint8 ones
in brackets) and the float32 model's weight bytes (after onnxruntime's pre-processing, which the
quantizers are given: ``quant_pre_process``). The error is also given against onnxruntime with
its graph optimizations off (each Q/DQ op as ONNX defines it; the default fuses QDQ groups into
integer kernels that requantize with their own rounding). Usage::

    python benchmarks/quantized_conformance.py                         # everything (long on 2 cores)
    python benchmarks/quantized_conformance.py resnet18 ppocr_cls --forms qdq,dynamic --api vulkan

Exit code 1 when a row fails: an error over 1% of the range (against onnxruntime's unoptimized
run where its optimized and unoptimized runs differ by more than 1% themselves), a disagreeing
arg-max, or an error.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import sys
import tempfile
import time
import traceback
import warnings
from contextlib import redirect_stderr, redirect_stdout

import numpy as np

DEVICES = {"opencl": "pocl", "vulkan": "lavapipe"}
MODELS = ("resnet18", "mobilenet_v2", "ppocr_cls", "ppocr_det", "ppocr_rec")
FORMS = ("qdq", "qdq_pc", "qoperator", "dynamic")


def _quiet(fn, *args, **kw):
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        return fn(*args, **kw)


def float_model(name: str, folder: str):
    """``(path of the float32 ONNX model, {input: shape}, [calibration inputs], test input)``."""
    from relax_vk.zoo import ZOO

    if name in ZOO:  # (any zoo model; resnet18 and mobilenet_v2 by default)
        import torch

        from relax_vk.zoo import build_zoo_model

        model, example = build_zoo_model(name)
        path = os.path.join(folder, f"{name}.onnx")
        _quiet(torch.onnx.export, model, (example,), path, dynamo=False, opset_version=17, input_names=["x"])
        shape = tuple(example.shape)
        rng = np.random.RandomState(0)
        calib = [rng.randn(*shape).astype("float32") for _ in range(4)]
        return path, {"x": shape}, calib, example.numpy()
    from relax_vk.zoo.packaged import PACKAGED, example_input, packaged_model_path

    shapes = dict(PACKAGED[name].input_shapes)
    calib = [example_input(name, seed) for seed in range(1, 5)]
    return packaged_model_path(name), shapes, calib, example_input(name, 0)


def preprocess(path: str, out: str) -> str:
    """onnxruntime's recommended pre-processing (``quant_pre_process``: shape inference and its
    basic optimizations, which also turn ``Constant`` weights, as the PP-OCR files hold them, into
    initializers that the quantizers then quantize)."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    try:
        _quiet(quant_pre_process, path, out)
    except Exception:  # (its symbolic shape inference asserts on some PP-OCR ops: ONNX's shape inference then)
        _quiet(quant_pre_process, path, out, skip_symbolic_shape=True)
    return out


def quantize(path: str, form: str, calib, out: str) -> str:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, quantize_static

    import onnx

    name = onnx.load(path).graph.input[0].name

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([{name: x} for x in calib])

        def get_next(self):
            return next(self.feeds, None)

    if form == "dynamic":
        _quiet(quantize_dynamic, path, out)
    elif form == "qdq":
        _quiet(quantize_static, path, out, Reader())
    elif form == "qdq_pc":
        _quiet(quantize_static, path, out, Reader(), per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QUInt8)
    elif form == "qoperator":
        _quiet(quantize_static, path, out, Reader(), quant_format=QuantFormat.QOperator)
    else:
        raise ValueError(form)
    return out


def float_weight_bytes(path: str) -> int:
    import onnx
    from onnx import TensorProto

    model = onnx.load(path)
    return sum(4 * int(np.prod(i.dims)) for i in model.graph.initializer if i.data_type == TensorProto.FLOAT and int(np.prod(i.dims)) > 1)


def row(name: str, form: str, api: str, qpath: str, shapes, x, float_bytes: int):
    import onnx
    import onnxruntime as ort

    import relax_vk
    from relax_vk.frontends import from_onnx
    from relax_vk.runtime import load

    model = onnx.load(qpath)
    session = ort.InferenceSession(qpath, providers=["CPUExecutionProvider"])
    want = session.run(None, {session.get_inputs()[0].name: x})
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    plain = ort.InferenceSession(qpath, options, providers=["CPUExecutionProvider"])
    reference = plain.run(None, {plain.get_inputs()[0].name: x})
    t0 = time.time()
    mod = _quiet(from_onnx, model, shapes)
    compiled = _quiet(relax_vk.build, mod, target=api)
    seconds = time.time() - t0
    artifact = compiled.artifact()
    got = load(artifact, device=DEVICES[api]).run([x])
    errors, plain_errors, means, agree = [], [], [], []
    itself = max(float(np.abs(w.astype("float64") - p).max()) / (float(np.ptp(w)) or 1.0) for w, p in zip(want, reference))
    for g, w, p in zip(got, want, reference):
        span = float(np.ptp(w)) or 1.0
        errors.append(float(np.abs(g.astype("float64") - w).max()) / span)
        means.append(float(np.abs(g.astype("float64") - w).mean()) / span)
        plain_errors.append(float(np.abs(g.astype("float64") - p).max()) / span)
        if w.ndim >= 2 and w.shape[-1] > 1 and name != "ppocr_det":
            agree.append(float((g.argmax(-1) == w.argmax(-1)).mean()))
    # the bytes the artifact stores (a conv weight in snorm8 texels is a float32 tensor of int8 bytes)
    stored = [artifact.constants[f"t{t['id']}"] for t in artifact.program["tensors"] if t.get("kind") == "constant"]
    quantized = sum(a.nbytes for a in stored if a.dtype in (np.int8, np.uint8))
    total = sum(a.nbytes for a in stored)
    return {
        "model": name, "form": form, "api": api, "error": max(errors), "mean_error": max(means), "plain_error": max(plain_errors), "itself": itself, "argmax": min(agree) if agree else None,
        "bytes": total, "int8_bytes": quantized, "float_bytes": float_bytes, "seconds": seconds,
        # within 1% of onnxruntime's default run, or, where its own two runs differ by more than
        # that (its fused integer kernels requantize with their own rounding), of the unoptimized one
        "ok": (max(errors) <= 0.01 or (itself > 0.01 and max(plain_errors) <= 0.01)) and (not agree or min(agree) == 1.0),
    }  # fmt: skip


def _print(r) -> None:
    if "failure" in r:
        print(f"| {r['model']} | {r['form']} | {r['api']} | FAILED: {r['failure']} | | | | | | | |", flush=True)
        return
    agree = "-" if r["argmax"] is None else f"{100 * r['argmax']:.1f}%"
    print(
        f"| {r['model']} | {r['form']} | {r['api']} | {100 * r['error']:.3f}% | {100 * r['mean_error']:.3f}% | {100 * r['plain_error']:.3f}% | {100 * r['itself']:.3f}% | {agree} | {r['bytes'] / 1e6:.2f} MB "
        f"({r['int8_bytes'] / 1e6:.2f} int8) | {r['float_bytes'] / 1e6:.2f} MB | {r['seconds']:.0f} s | {'ok' if r['ok'] else 'FAIL'} |",
        flush=True,
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(MODELS))
    parser.add_argument("--forms", default=",".join(FORMS))
    parser.add_argument("--api", default="opencl,vulkan")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.getLogger().setLevel(logging.ERROR)
    import onnxruntime

    onnxruntime.set_default_logger_severity(3)
    forms, apis = args.forms.split(","), args.api.split(",")
    print("| model | form | API | max error / range | mean error / range | vs onnxruntime unoptimized | onnxruntime: optimized vs unoptimized | arg-max agreement | artifact constants (int8) | float32 weights | build | |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    failed = False
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models:
            path, shapes, calib, x = float_model(name, folder)
            path = preprocess(path, os.path.join(folder, f"{name}_pre.onnx"))
            float_bytes = float_weight_bytes(path)
            for form in forms:
                try:
                    qpath = quantize(path, form, calib, os.path.join(folder, f"{name}_{form}.onnx"))
                except Exception as err:  # noqa: BLE001 (a row says what failed)
                    _print({"model": name, "form": form, "api": "-", "failure": f"quantization: {type(err).__name__}: {err}"})
                    failed = True
                    continue
                for api in apis:
                    try:
                        r = row(name, form, api, qpath, shapes, x, float_bytes)
                    except Exception as err:  # noqa: BLE001
                        if os.environ.get("RVK_TRACE"):
                            traceback.print_exc()
                        r = {"model": name, "form": form, "api": api, "failure": f"{type(err).__name__}: {str(err).splitlines()[0][:300]}", "ok": False}
                    failed |= not r["ok"]
                    _print(r)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
