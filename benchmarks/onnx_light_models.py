"""The ONNX model zoo's classic CNNs as the ``onnx`` package ships them, with seeded random weights,
through relax_vk's ONNX front door on pocl and lavapipe, against onnxruntime.

``onnx`` installs light copies of nine ONNX model zoo networks (opset 9, 224x224 inputs): AlexNet
and ZFNet-512 (LRN, grouped convs, dropout, Gemm), GoogLeNet v1 (LRN, ceil-mode pools), BN-Inception
(v2), DenseNet-121, ResNet-50 (``Sum`` residuals), ShuffleNet v1 (channel shuffles as reshape and
transpose), SqueezeNet 1.0 and VGG-19. Their weights are ``ConstantOfShape`` nodes of one value
(every channel alike: a comparison would prove little), so each is rewritten first: each such node
becomes an initializer of seeded normal values (conv and Gemm weights scaled by ``1/sqrt(fan in)``,
batch-norm variances positive), and graph inputs that are weights are dropped, leaving the image.
The final Softmax is left out and the logits compared (random weights can make the probabilities
one-hot). Nothing is downloaded. One row per model and API: result, max error relative to the
output's largest magnitude, the arg-max, activation texture share, copies, kernels and seconds.
Usage::

    python benchmarks/onnx_light_models.py                     # every model on both APIs
    python benchmarks/onnx_light_models.py light_resnet50 --apis opencl

Exit code 1 when any row is not OK.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

import numpy as np

DEVICES = {"opencl": "pocl", "vulkan": "lavapipe"}
#: max error relative to the largest output magnitude for a row to be OK
BOUND = 1e-4


def light_models() -> dict:
    """``{name: path}`` of the light models the installed ``onnx`` package holds."""
    import onnx

    folder = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    return {os.path.basename(p)[: -len(".onnx")]: p for p in sorted(glob.glob(os.path.join(folder, "light_*.onnx")))}


def with_random_weights(path: str, seed: int = 0):
    """The model at ``path`` with every ``ConstantOfShape`` of a constant shape replaced by a seeded
    random initializer, weight inputs dropped; returns ``(model, input name, input shape)``."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    g = model.graph
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    uses = {}
    for n in g.node:
        for pos, name in enumerate(n.input):
            uses.setdefault(name, []).append((n.op_type, pos))
    rng = np.random.default_rng(seed)
    made, kept = {}, []
    for n in g.node:
        if n.op_type == "ConstantOfShape" and n.input and n.input[0] in inits:
            shape = [int(d) for d in inits[n.input[0]]]
            out = n.output[0]
            use = uses.get(out, [("", -1)])[0]
            if use in (("BatchNormalization", 1), ("BatchNormalization", 4)):  # a scale or a variance: positive, about one
                value = rng.uniform(0.5, 1.5, shape)
            elif len(shape) >= 2:  # a conv or Gemm weight
                fan_in = int(shape[-1]) if use[0] == "Gemm" else int(np.prod(shape[1:]))
                value = rng.standard_normal(shape) / np.sqrt(max(1, fan_in))
            else:  # a bias, a shift, a mean
                value = rng.standard_normal(shape) * 0.1
            made[out] = numpy_helper.from_array(value.astype(np.float32), out)
        else:
            kept.append(n)
    del g.node[:]
    g.node.extend(kept)
    g.initializer.extend(made.values())
    weights = {i.name for i in g.initializer}
    inputs = [i for i in g.input if i.name not in weights and i.name not in made]
    del g.input[:]
    g.input.extend(inputs)
    image = [i for i in inputs if len(i.type.tensor_type.shape.dim) == 4]
    if len(image) != 1:
        raise ValueError(f"{path}: {len(image)} image inputs left ({[i.name for i in inputs]})")
    # inputs left that are not the image (a Gemm's unused dummy): removed when nothing reads them
    read = {name for n in g.node for name in n.input}
    for i in list(g.input):
        if i is not image[0] and i.name not in read:
            g.input.remove(i)
    if len(g.input) != 1:
        raise ValueError(f"{path}: inputs other than the image are read: {[i.name for i in g.input]}")
    unread = [i for i in g.initializer if i.name not in read]  # (the replaced nodes' shapes)
    for i in unread:
        g.initializer.remove(i)
    model.ir_version = max(model.ir_version, 4)  # (initializers that are not graph inputs)
    # the classifiers end in a Softmax: their logits are compared instead (random weights can make
    # the probabilities one-hot, which would hide any error in the others)
    if len(g.output) == 1 and g.node[-1].op_type == "Softmax" and g.node[-1].output[0] == g.output[0].name:
        logits = g.node[-1].input[0]
        shape = [d.dim_value for d in g.output[0].type.tensor_type.shape.dim]  # (the softmax keeps its input's shape)
        del g.node[-1]
        del g.output[:]
        g.output.extend([onnx.helper.make_tensor_value_info(logits, onnx.TensorProto.FLOAT, shape)])
    onnx.checker.check_model(model)
    shape = tuple(d.dim_value for d in image[0].type.tensor_type.shape.dim)
    return model, image[0].name, shape


def run_row(name: str, path: str, api: str) -> dict:
    import onnxruntime as ort

    import relax_vk
    from relax_vk.frontends import from_onnx
    from relax_vk.runtime import load

    t0 = time.perf_counter()
    model, input_name, shape = with_random_weights(path)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {input_name: x})
    row = {"model": name, "api": api}
    try:
        compiled = relax_vk.build(from_onnx(model), api)
        got = load(compiled.artifact(), device=DEVICES[api]).run([x])
        err = max(float(np.max(np.abs(g - e))) / max(1e-12, float(np.max(np.abs(e)))) for g, e in zip(got, expected))
        top = all(np.array_equal(np.argmax(g.reshape(g.shape[0], -1), 1), np.argmax(e.reshape(e.shape[0], -1), 1)) for g, e in zip(got, expected))
        plan = compiled.plan()
        row.update(result="OK" if err <= BOUND and top else "WRONG", err=err, top1=top, share=plan.activation_texture_share,
                   copies=plan.copies, kernels=len(compiled.kernels))  # fmt: skip
    except Exception as e:  # noqa: BLE001 (a row, not a traceback)
        row.update(result="FAIL", detail=f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
    row["seconds"] = time.perf_counter() - t0
    return row


def main(argv=None) -> int:
    models = light_models()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", choices=[[]] + sorted(models), help="default: all")
    parser.add_argument("--apis", nargs="+", default=["opencl", "vulkan"], choices=sorted(DEVICES))
    args = parser.parse_args(argv)
    print(f"{'model':20s} {'api':7s} result  max rel err  top-1  textures  copies  kernels  seconds")
    bad = 0
    for name in args.models or list(models):
        for api in args.apis:
            r = run_row(name, models[name], api)
            bad += r["result"] != "OK"
            if r["result"] == "FAIL":
                print(f"{name:20s} {api:7s} FAIL    {r['detail']}  {r['seconds']:.1f}", flush=True)
            else:
                print(f"{name:20s} {api:7s} {r['result']:6s} {r['err']:11.1e}  {'same' if r['top1'] else 'DIFF':5s}  {100 * r['share']:7.1f}%  "
                      f"{r['copies']:6d}  {r['kernels']:7d}  {r['seconds']:7.1f}", flush=True)  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
