"""Quantized conv weights packed at compile time (``relax_vk/passes/layout/quantized_weights.py``)
against packing them at run time, side by side in one process: QDQ versions (uint8, per channel: the conformance script's ``qdq_pc``)
of the zoo's ResNet-18 and MobileNetV2, built for one API, each run on one device.

Per model: kernels launched per run, the session's device bytes, the median latency (median of
``--rounds`` alternating timings of ``--repeat`` runs) and whether the outputs are bit-identical. "run-time packing" is the same build
with the compile-time packing turned off (the int8 weight is then dequantized, padded and
layout-transformed by kernels at every run, and an int32 bias dequantized by kernels).

    python benchmarks/quantized_weights.py [resnet18 mobilenet_v2] [--api opencl|vulkan] [--device pocl] [--repeat 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from quantized_conformance import float_model, preprocess, quantize  # noqa: E402


@contextlib.contextmanager
def run_time_packing():
    """The build as it was before compile-time packing: no quantized weight recognised, no int32
    dequantize folded."""
    import relax_vk.passes.layout.convert_layout as convert_layout
    import relax_vk.passes.layout.fold_small_constants as fold

    saved = convert_layout.dequantized_constant, fold._dequantize_wide
    convert_layout.dequantized_constant, fold._dequantize_wide = (lambda _call: None), (lambda _call: None)
    try:
        yield
    finally:
        convert_layout.dequantized_constant, fold._dequantize_wide = saved


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet18", "mobilenet_v2"])
    parser.add_argument("--api", choices=("opencl", "vulkan"), default="opencl")
    parser.add_argument("--device", default=None, help="default: pocl (OpenCL), lavapipe (Vulkan)")
    parser.add_argument("--repeat", type=int, default=10, help="runs per timing (median)")
    parser.add_argument("--rounds", type=int, default=3, help="timings per session, alternating between the two (median of medians)")
    args = parser.parse_args(argv)
    import relax_vk
    from relax_vk.frontends import from_onnx
    from relax_vk.runtime import load

    device = args.device or ("pocl" if args.api == "opencl" else "lavapipe")
    print(f"| model | weights packed | kernels/run | device MiB | median ms | outputs |")
    print("|---|---|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models:
            path, shapes, calib, x = float_model(name, folder)
            pre = preprocess(path, os.path.join(folder, f"{name}.pre.onnx"))
            q = quantize(pre, "qdq_pc", calib, os.path.join(folder, f"{name}.qdq.onnx"))
            rows = {}
            for label, context in (("at compile time", contextlib.nullcontext), ("at run time", run_time_packing)):
                with context():
                    compiled = relax_vk.build(from_onnx(q, shapes), target=args.api)
                session = load(compiled.artifact(), device=device)
                launches = sum(1 for s in compiled.artifact().program["steps"] if s["op"] == "launch")
                rows[label] = [launches, session.device_bytes / (1 << 20), [], session.run([x])[0], session]
            for _ in range(args.rounds):  # (the two sessions alternate: a slow spell of the machine hits both)
                for row in rows.values():
                    row[2].append(row[4].time([x], repeat=args.repeat)["median"])
            same = np.array_equal(rows["at compile time"][3], rows["at run time"][3])
            for label, (launches, mib, times, _, _) in rows.items():
                print(f"| {name} | {label} | {launches} | {mib:.2f} | {float(np.median(times)):.2f} | {'bit-identical' if same else 'DIFFER'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
