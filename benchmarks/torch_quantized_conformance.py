"""Quantized PyTorch zoo models, as PyTorch's own tools make them, built for OpenCL and Vulkan, run
on pocl and lavapipe, compared with PyTorch's CPU run of the same quantized model.

Forms: ``pt2e_pc`` / ``pt2e_pt`` (``prepare_pt2e`` / ``convert_pt2e`` with XNNPACKQuantizer,
static, per-channel / per-tensor weights, calibrated on 4 fixed-seed normal inputs),
``pt2e_dyn`` (the dynamic config: linears only, activations quantized per run), ``int8_wo`` and
``int4_wo`` (torchao ``quantize_`` with ``IntxWeightOnlyConfig``: int8 per output channel, int4
in groups of 32; linears only), ``8da4w`` (torchao ``Int8DynamicActivationIntxWeightConfig``:
int8 activations per token, chosen at run time, and int4 weights in groups of 32; linears only).

One row per (model, form, API): the max error as a fraction of the output's range, whether the
arg-max agrees, the error of the quantized model against the float one (what quantization itself
costs, for scale), the artifact's integer and float32 constant bytes and the float32 model's
weight bytes. Usage::

    python benchmarks/torch_quantized_conformance.py                          # everything
    python benchmarks/torch_quantized_conformance.py resnet18 vit_small --forms pt2e_pc --api opencl

Exit code 1 when a row fails: an error over 1% of the range, a disagreeing arg-max, or an error.
A form the quantizer itself refuses for a model (torchao's int4 groups of 32 need every linear's
inputs to be a multiple of 32) is a row marked n/a.

Why a row can differ from PyTorch by whole quantization steps: a quantize rounds ``x / scale`` to
an integer, and where ``x`` is a sum of dequantized values (a mean, a residual add) the quotient is
often exactly ``k + 0.5``; a float sum taken in another order lands one ulp off the tie and rounds
the other way. The step then travels through the layers after it.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
import traceback
import warnings

import numpy as np

DEVICES = {"opencl": "pocl", "vulkan": "lavapipe"}
MODELS = ("resnet18", "mobilenet_v2", "vit_small", "convnext")
FORMS = ("pt2e_pc", "pt2e_pt", "pt2e_dyn", "int8_wo", "int4_wo", "8da4w")


def quantized(name: str, form: str):
    """``(quantized module, float module, example input, test input)``."""
    import torch

    from relax_vk.zoo import build_zoo_model

    model, x = build_zoo_model(name)
    gen = torch.Generator().manual_seed(1)
    calibration = [torch.randn(x.shape, generator=gen) for _ in range(4)]
    test = torch.randn(x.shape, generator=gen)
    if form.startswith("pt2e"):
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        from torchao.testing.pt2e._xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

        config = get_symmetric_quantization_config(is_per_channel=form != "pt2e_pt", is_dynamic=form == "pt2e_dyn")
        prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), XNNPACKQuantizer().set_global(config))
        for sample in calibration:
            prepared(sample)
        return convert_pt2e(prepared), model, x, test
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, IntxWeightOnlyConfig, PerAxis, PerGroup, quantize_

    q = copy.deepcopy(model)
    if form == "8da4w":
        quantize_(q, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(32)))
        return q, model, x, test
    granularity = PerAxis(0) if form == "int8_wo" else PerGroup(32)
    quantize_(q, IntxWeightOnlyConfig(weight_dtype=torch.int8 if form == "int8_wo" else torch.int4, granularity=granularity))
    return q, model, x, test


def row(name: str, form: str, api: str) -> dict:
    import torch

    import relax_vk
    from relax_vk.frontends.torch import from_torch
    from relax_vk.runtime import load

    out = {"model": name, "form": form, "api": api}
    start = time.time()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                q, model, x, test = quantized(name, form)
            except Exception as err:  # the quantizer's own refusal: nothing for relax_vk to run
                out.update(ok=True, skipped=f"the quantizer refuses it: {type(err).__name__}: {str(err).splitlines()[0][:160]}")
                return out
            with torch.no_grad():
                want, fp = q(test).numpy(), model(test).numpy()
            artifact = relax_vk.build(from_torch(q, (x,)), target=api).artifact()
        got = load(artifact, device=DEVICES[api]).run([test.numpy()])[0]
        constants = [t for t in artifact.program["tensors"] if t.get("kind") == "constant"]
        out.update(
            error=float(np.abs(got - want).max() / np.ptp(want)), argmax=bool((got.argmax(-1) == want.argmax(-1)).all()),
            quantization=float(np.abs(want - fp).max() / np.ptp(fp)),
            int_bytes=sum(t["bytes"] for t in constants if t["dtype"] in ("int8", "uint8")),
            float_bytes=sum(t["bytes"] for t in constants if t["dtype"] == "float32"),
            model_bytes=sum(p.numel() * 4 for p in model.parameters()),
        )  # fmt: skip
        out["ok"] = out["error"] <= 0.01 and out["argmax"]
    except Exception as err:  # a row, not the campaign
        out.update(ok=False, failure=f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}")
        traceback.print_exc(file=sys.stderr)
    out["seconds"] = round(time.time() - start, 1)
    return out


def _print(r: dict) -> None:
    if "skipped" in r:
        print(f"| {r['model']} | {r['form']} | {r['api']} | n/a: {r['skipped']} |||||||", flush=True)
        return
    if "failure" in r:
        print(f"| {r['model']} | {r['form']} | {r['api']} | FAIL: {r['failure']} |||||||", flush=True)
        return
    print(f"| {r['model']} | {r['form']} | {r['api']} | {r['error']:.2e} | {'yes' if r['argmax'] else 'NO'} | {r['quantization']:.2e} "
          f"| {r['int_bytes']} | {r['float_bytes']} | {r['model_bytes']} | {'OK' if r['ok'] else 'FAIL'} |", flush=True)  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(MODELS))
    parser.add_argument("--forms", default=",".join(FORMS))
    parser.add_argument("--api", default="opencl,vulkan")
    args = parser.parse_args(argv)
    print("| model | form | API | max error / range | same arg-max | quantized vs float | int bytes | float32 bytes | float model bytes | |")
    print("|---|---|---|---:|---|---:|---:|---:|---:|---|")
    failed = 0
    for name in args.models:
        for form in args.forms.split(","):
            for api in args.api.split(","):
                r = row(name, form, api)
                failed += not r["ok"]
                _print(r)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
