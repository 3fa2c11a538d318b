"""SplitLargeWeights: weights over one buffer binding are split, results unchanged, and a weight
that cannot be split is a clear error; in the pipeline, the fully-connected weights importers wrap
(ONNX Gemm's transB, torch's Linear) are split too, and a VGG-style head runs right on pocl and
lavapipe under cut limits."""

import numpy as np
import pytest
import tvm
from helpers import const, module, tensor
from tvm import relax
from tvm.ir.expr import GenericConst

import relax_vk
from relax_vk.analysis.reference import random_inputs, run_on_cpu
from relax_vk.core.errors import LimitError
from relax_vk.passes import SplitLargeWeights


def _ops(mod, name):
    found = []
    relax.analysis.post_order_visit(mod["main"], lambda e: found.append(e) if isinstance(e, relax.Call) and getattr(e.op, "name", "") == name else None)
    return found


@pytest.mark.parametrize("groups", [1, 2])
def test_conv_weights_split_along_output_channels(groups):
    x = tensor("x", (1, 8, 6, 6))
    mod = module([x], lambda bb, x: relax.op.nn.conv2d(x, const((24, 8 // groups, 3, 3), seed=3), padding=(1, 1), groups=groups))
    per_part = 8 if groups == 1 else 12  # a grouped conv's parts hold whole groups (12 channels each)
    limit = per_part * (8 // groups) * 9 * 4
    split = SplitLargeWeights(limit)(mod)
    convs = _ops(split, "relax.nn.conv2d")
    assert len(convs) == 24 // per_part and all(int(c.args[1].ty.shape.values[0]) == per_part for c in convs)
    assert all(c.args[1].value.numpy().nbytes <= limit for c in convs)
    inputs = random_inputs(mod)
    np.testing.assert_allclose(run_on_cpu(split, inputs)[0], run_on_cpu(mod, inputs)[0], rtol=1e-5, atol=1e-5)


def test_matmul_weights_split_along_features_and_run_on_the_gpu():
    x = tensor("x", (2, 64))
    mod = module([x], lambda bb, x: relax.op.matmul(x, const((64, 40), seed=4)))
    target = relax_vk.target.opencl(max_buffer_bytes=64 * 12 * 4)
    artifact = relax_vk.build(mod, target).artifact()
    assert max(t["bytes"] for t in artifact.program["tensors"] if t["kind"] == "constant") <= 64 * 12 * 4
    from relax_vk.runtime import load

    inputs = random_inputs(mod)
    np.testing.assert_allclose(load(artifact, device="pocl").run(inputs)[0], run_on_cpu(mod, inputs)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["matmul", "conv2d"])
def test_weights_are_counted_as_stored_padded_reduction_axes_included(kind):
    """A matmul's 13-long reduction axis and a plain conv's 6 input channels are stored padded to
    16 and 8: a weight whose unpadded bytes fit the binding but whose stored bytes do not is split."""
    if kind == "matmul":
        x = tensor("x", (2, 13))
        mod = module([x], lambda bb, x: relax.op.matmul(x, const((13, 8), seed=5)))
        limit = 448  # unpadded 13 x 8 x 4 = 416, stored 16 x 8 x 4 = 512
    else:
        x = tensor("x", (1, 6, 5, 5))
        mod = module([x], lambda bb, x: relax.op.nn.conv2d(x, const((8, 6, 3, 3), seed=6), padding=(1, 1)))
        limit = 2000  # unpadded 8 x 6 x 9 x 4 = 1728, stored 8 x 8 x 9 x 4 = 2304
    artifact = relax_vk.build(mod, relax_vk.target.opencl(max_buffer_bytes=limit)).artifact()
    assert max(t["bytes"] for t in artifact.program["tensors"] if t["kind"] == "constant") <= limit
    from relax_vk.runtime import load

    inputs = random_inputs(mod)
    np.testing.assert_allclose(load(artifact, device="pocl").run(inputs)[0], run_on_cpu(mod, inputs)[0], rtol=1e-4, atol=1e-5)


def _embedding_and_head(tied: bool, vocab=50, hidden=12):
    """ids [1, 5] -> embeddings -> logits, the table [V, H] (axis 0) or, tied, one [H, V] table
    whose columns are the embeddings and which the logits' matmul reads too."""
    ids = tensor("ids", (1, 5), "int32")
    x = tensor("x", (3, hidden))
    table = const((hidden, vocab) if tied else (vocab, hidden), seed=7)

    def body(bb, ids, x):
        if tied:
            rows = bb.emit(relax.op.permute_dims(relax.op.take(table, relax.op.reshape(ids, (5,)), axis=1, mode="clip"), [1, 0]))
            return relax.Tuple([rows, bb.emit(relax.op.matmul(x, table))])
        return relax.Tuple([bb.emit(relax.op.take(table, ids, axis=0, mode="clip"))])

    return module([ids, x], body)


@pytest.mark.parametrize("tied", [False, True])
def test_embedding_tables_over_one_binding_are_split_and_every_index_reads_its_row(tied):
    mod = _embedding_and_head(tied)
    limit = 16 * 12 * 4  # 16 slices of 12 floats (a tied table's matmul pads its 12-long reduction axis to 12)
    split = SplitLargeWeights(limit)(mod)
    parts = [c.args[0] for c in _ops(split, "relax.take") if isinstance(c.args[0], GenericConst)]
    assert len(parts) == 4 and all(p.value.numpy().nbytes <= limit for p in parts)
    if tied:  # the matmul reads the very parts the take reads (one copy of the table on the device)
        weights = [m.args[1] for m in _ops(split, "relax.matmul")]
        assert len(weights) == 4 and all(any(w.same_as(p) for p in parts) for w in weights)
    ids = np.array([[0, 49, 16, 15, 77]], np.int32)  # the part edges, and an id past the table (clipped to its last row)
    inputs = [ids, np.random.default_rng(0).standard_normal((3, 12)).astype("float32")]
    for got, want in zip(run_on_cpu(split, inputs), run_on_cpu(mod, inputs)):
        np.testing.assert_array_equal(got, want) if got.ndim == 3 or not tied else np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_a_weight_that_is_a_model_input_cannot_be_split():
    x, w = tensor("x", (1, 64)), tensor("w", (64, 4096))
    mod = module([x, w], lambda bb, x, w: relax.op.matmul(x, w))
    with pytest.raises(LimitError, match=r"matmul weight w takes 1048576 bytes, over the device's 4096-byte buffer binding limit, and is a model input"):
        SplitLargeWeights(4096)(mod)


def test_a_weight_computed_at_run_time_is_left_to_the_plan():
    """Attention's K^T over a binding may still fit a texture: not this pass's to refuse."""
    x, y = tensor("x", (1, 64)), tensor("y", (64, 64))
    mod = module([x, y], lambda bb, x, y: relax.op.matmul(x, bb.emit(relax.op.nn.relu(y))))
    tvm.ir.assert_structural_equal(SplitLargeWeights(4096)(mod), mod)


def test_an_activation_over_one_binding_is_a_limit_error_naming_it():
    """Only constant weights can be split: any other tensor over a binding is refused at build time,
    named with its shape, size and the limit (not left for the device to reject)."""
    x = tensor("x", (1, 70000))
    mod = module([x], lambda bb, x: relax.op.nn.relu(x))
    for make in (relax_vk.target.opencl, relax_vk.target.vulkan):
        with pytest.raises(LimitError, match=r"tensor x \(input, shape \[1, 70000\]\) takes 280000 bytes, more than one buffer binding of the device \(32768 bytes\)"):
            relax_vk.build(mod, make(max_buffer_bytes=32768)).artifact()


def _vgg_head(torch, channels=8, side=5, features=96, classes=10):
    """A VGG-style network: conv, pool, adaptive pool to side x side, flatten, three Linear layers."""
    nn = torch.nn

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(side))
            flat = channels * side * side
            self.classifier = nn.Sequential(nn.Linear(flat, features), nn.ReLU(), nn.Linear(features, features), nn.ReLU(), nn.Linear(features, classes))

        def forward(self, x):
            return self.classifier(torch.flatten(self.features(x), 1))

    torch.manual_seed(0)
    return Head().eval()


@pytest.mark.parametrize("frontend,backend,device", [("onnx", "opencl", "pocl"), ("onnx", "vulkan", "lavapipe"), ("torch", "vulkan", "lavapipe")])
def test_vgg_style_heads_are_split_and_run_right(frontend, backend, device, tmp_path):
    """ONNX exports hold fc weights as Gemm(transB=1) and torch's importer as Linear: both reach the
    split as matmul(x, permute_dims(W)). Under a binding that the first fc weight (200 x 96 floats)
    exceeds, every constant fits and the outputs match PyTorch."""
    torch = pytest.importorskip("torch")
    from relax_vk.frontends import from_onnx
    from relax_vk.frontends.torch import from_torch
    from relax_vk.runtime import load

    model, x = _vgg_head(torch), torch.randn(1, 3, 20, 20)
    if frontend == "onnx":
        pytest.importorskip("onnx")
        path = str(tmp_path / "head.onnx")
        torch.onnx.export(model, (x,), path, dynamo=False, opset_version=13)
        mod = from_onnx(path)
    else:
        mod = from_torch(model, (x,))
    limit = 24 * 1024  # fc1's weight: 200 x 96 x 4 = 76,800 bytes
    make = relax_vk.target.opencl if backend == "opencl" else relax_vk.target.vulkan
    artifact = relax_vk.build(mod, make(max_buffer_bytes=limit)).artifact()
    constants = [t for t in artifact.program["tensors"] if t["kind"] == "constant"]
    assert all(t["bytes"] <= limit for t in constants)
    assert len(constants) > 8  # 3 weights, 3 biases, the conv's: fc1 became several parts
    with torch.no_grad():
        expected = model(x).numpy()
    got = load(artifact, device=device).run([x.numpy()])[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
