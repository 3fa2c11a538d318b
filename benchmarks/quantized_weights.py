"""Quantized conv weights read as integers by the conv (``relax_vk/passes/layout/quantized_weights.py``),
packed at compile time and dequantized by a kernel at every run, and packed at run time, side by
side in one process: QDQ versions (``--form qdq``: int8 symmetric per tensor, quantize_static's
default; ``qdq_pc``: uint8 per channel) of the zoo's ResNet-18 and MobileNetV2, built for one API,
each run on one device.

Per model: kernels launched per run, the session's device bytes, the median latency (median of
``--rounds`` alternating timings of ``--repeat`` runs) and whether the outputs are bit-identical. "run-time packing" is the same build
with the compile-time packing turned off (the int8 weight is then dequantized, padded and
layout-transformed by kernels at every run, and an int32 bias dequantized by kernels).

Then a transformer MLP block (512 -> 2048 -> 512, 8 tokens) in float32 and as ``MatMulNBits``
(onnxruntime's 4-bit weight-only format), whose matmul kernels read the packed blocks: device
bytes, kernels and the weights' bytes against float32.

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
def dequantize_kernels():
    """The compile-time packing with the weight dequantized by a kernel at every run (what it did
    before a conv read centred integer weights itself)."""
    import relax_vk.passes.layout.convert_layout as convert_layout

    saved = convert_layout.centred_weight
    convert_layout.centred_weight = lambda *_parts: None
    try:
        yield
    finally:
        convert_layout.centred_weight = saved


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


def _mlp_block(d: int, hidden: int, tokens: int):
    """A float32 transformer MLP block (MatMul + bias -> ReLU -> MatMul + residual) as ONNX."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.RandomState(1)
    inits = [numpy_helper.from_array((rng.randn(*shape) * 0.05).astype("float32"), name)
             for name, shape in (("w1", (d, hidden)), ("b1", (hidden,)), ("w2", (hidden, d)))]  # fmt: skip
    n = helper.make_node
    nodes = [n("MatMul", ["x", "w1"], ["h"]), n("Add", ["h", "b1"], ["hb"]), n("Relu", ["hb"], ["r"]),
             n("MatMul", ["r", "w2"], ["o"]), n("Add", ["o", "x"], ["y"])]  # fmt: skip
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, tokens, d])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, tokens, d])], inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def int4_block(api: str, device: str, d: int = 512, hidden: int = 2048, tokens: int = 8) -> None:
    """The MLP block in float32 and as MatMulNBits (4 bits, blocks of 32, symmetric): the
    session's device bytes and kernels of each, the weights' bytes."""
    import onnxruntime as ort
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    import relax_vk
    from relax_vk.frontends import from_onnx
    from relax_vk.runtime import load

    model = _mlp_block(d, hidden, tokens)
    quantizer = MatMulNBitsQuantizer(_mlp_block(d, hidden, tokens), bits=4, block_size=32, is_symmetric=True)  # (it rewrites its model)
    quantizer.process()
    x = np.random.RandomState(2).randn(1, tokens, d).astype("float32")
    weights = 2 * d * hidden * 4
    print(f"\nMLP block d={d}, hidden={hidden}, {tokens} tokens, {api} on {device}; float32 weights {weights / (1 << 20):.2f} MiB")
    print("| model | kernels/run | device MiB | weight bytes / float32 | max error / range (onnxruntime) |")
    print("|---|---:|---:|---:|---:|")
    for label, m in (("float32", model), ("MatMulNBits int4", quantizer.model.model)):
        compiled = relax_vk.build(from_onnx(m), target=api)
        program = compiled.artifact().program
        session = load(compiled.artifact(), device=device)
        got = session.run([x])[0]
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        # the weights: float32 (d x hidden each), or packed bytes plus a float32 scale per block of 32
        constants = sum(t["bytes"] for t in program["tensors"] if t.get("kind") == "constant"
                        and (t["dtype"] == "uint8" or int(np.prod(t["shape"])) in (d * hidden, d * hidden // 32)))  # fmt: skip
        launches = sum(1 for s in program["steps"] if s["op"] == "launch")
        print(f"| {label} | {launches} | {session.device_bytes / (1 << 20):.2f} | {constants / weights:.3f} | "
              f"{float(np.abs(got - want).max() / np.ptp(want)):.1e} |")  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet18", "mobilenet_v2"])
    parser.add_argument("--api", choices=("opencl", "vulkan"), default="opencl")
    parser.add_argument("--device", default=None, help="default: pocl (OpenCL), lavapipe (Vulkan)")
    parser.add_argument("--repeat", type=int, default=10, help="runs per timing (median)")
    parser.add_argument("--rounds", type=int, default=3, help="timings per session, alternating between the builds (median of medians)")
    parser.add_argument("--form", default="qdq", choices=("qdq", "qdq_pc"), help="qdq: int8 symmetric per tensor (quantize_static's default); qdq_pc: uint8 per channel")
    args = parser.parse_args(argv)
    import relax_vk
    from relax_vk.frontends import from_onnx
    from relax_vk.runtime import load

    device = args.device or ("pocl" if args.api == "opencl" else "lavapipe")
    print(f"| model | conv weights | kernels/run | device MiB | median ms | outputs against the run-time packing |")
    print("|---|---|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models:
            path, shapes, calib, x = float_model(name, folder)
            pre = preprocess(path, os.path.join(folder, f"{name}.pre.onnx"))
            q = quantize(pre, args.form, calib, os.path.join(folder, f"{name}.qdq.onnx"))
            rows = {}
            for label, context in (("integers read by the conv", contextlib.nullcontext), ("at compile time, dequantized by a kernel", dequantize_kernels),
                                   ("at run time", run_time_packing)):  # fmt: skip
                with context():
                    compiled = relax_vk.build(from_onnx(q, shapes), target=args.api)
                session = load(compiled.artifact(), device=device)
                launches = sum(1 for s in compiled.artifact().program["steps"] if s["op"] == "launch")
                rows[label] = [launches, session.device_bytes / (1 << 20), [], session.run([x])[0], session]
            for _ in range(args.rounds):  # (the two sessions alternate: a slow spell of the machine hits both)
                for row in rows.values():
                    row[2].append(row[4].time([x], repeat=args.repeat)["median"])
            base = rows["at run time"][3]
            for label, (launches, mib, times, out, _) in rows.items():
                error = float(np.abs(out - base).max() / np.ptp(base))
                print(f"| {name} | {label} | {launches} | {mib:.2f} | {float(np.median(times)):.2f} | "
                      f"{'bit-identical' if error == 0 else f'{error:.1e} of the range'} |")  # fmt: skip
    int4_block(args.api, device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
