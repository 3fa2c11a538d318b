"""Front doors: ONNX exports of zoo models, .pt2 archives, model names, bad files."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs the torch extra")
onnx = pytest.importorskip("onnx", reason="needs the onnx extra")

import relax_vk  # noqa: E402
from relax_vk.frontends import ModelLoadError, from_onnx, load_model  # noqa: E402
from relax_vk.runtime import load  # noqa: E402
from relax_vk.zoo import build_zoo_model  # noqa: E402


# (MobileNetV2: ONNX's Clip with min/max inputs and depthwise convs, with ``make test-full``: the
# fuzzer's ONNX front door and tests/frontends/test_onnx_op_classes.py export from PyTorch too;
# ``python benchmarks/conformance.py --front-door onnx`` runs every zoo model)
@pytest.mark.full_only("the fuzzer's ONNX front door")
@pytest.mark.parametrize("name", ["mobilenet_v2"])
def test_onnx_export_runs_and_matches_pytorch(name, tmp_path):
    model, example = build_zoo_model(name)
    path = str(tmp_path / f"{name}.onnx")
    torch.onnx.export(model, (example,), path, dynamo=False, opset_version=17)
    compiled = relax_vk.build(from_onnx(path))
    out = load(compiled.artifact(), device="pocl").run([example.numpy()])[0]
    with torch.no_grad():
        np.testing.assert_allclose(out, model(example).numpy(), rtol=1e-3, atol=1e-3)
    # TVM's ONNX frontend imports Clip (ReLU6) as prebuilt TIR maximum/minimum kernels; from_onnx
    # raises them to Relax ops, so MobileNetV2 packs through its ReLU6s as via torch.export
    assert compiled.plan().activation_texture_share > 0.99
    assert compiled.plan().copies == 0


def test_pt2_archive_and_names(tmp_path):
    model, example = build_zoo_model("rgb_stem")
    path = str(tmp_path / "stem.pt2")
    torch.export.save(torch.export.export(model, (example,)), path)
    mod, source = load_model(path)
    assert source == {"pt2": path}
    out = load(relax_vk.build(mod).artifact(), device="pocl").run([example.numpy()])[0]
    with torch.no_grad():
        np.testing.assert_allclose(out, model(example).numpy(), rtol=1e-3, atol=1e-3)
    assert load_model("rfc-conv2d")[1] == {"example": "rfc-conv2d"}
    assert load_model("rgb_stem")[1] == {"zoo": "rgb_stem"}


def test_a_half_precision_pt2_archive_keeps_its_signature(tmp_path, lavapipe):
    """A float16 program saved with torch.export.save failed in TVM's importer (a float32 + float16
    add); it computes in float32 behind its float16 signature, as from_torch does."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU()).eval().half()
    x = torch.randn(1, 3, 16, 16).half()
    path = str(tmp_path / "half.pt2")
    torch.export.save(torch.export.export(model, (x,)), path)
    mod, _ = load_model(path)
    out = load(relax_vk.build(mod, "vulkan").artifact(), device="lavapipe").run([x.numpy()])[0]
    assert out.dtype == np.float16
    with torch.no_grad():
        np.testing.assert_allclose(out.astype("float32"), model(x).float().numpy(), rtol=2e-3, atol=2e-3)


def test_bad_model_files_are_named(tmp_path):
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"this is not a protobuf")
    with pytest.raises(ModelLoadError, match="broken.onnx: not a readable ONNX model"):
        load_model(str(broken))
    with pytest.raises(ModelLoadError, match="missing.pt2: no such file"):
        load_model(str(tmp_path / "missing.pt2"))
    bad_pt2 = tmp_path / "bad.pt2"
    bad_pt2.write_bytes(b"PK\x03\x04 nope")
    with pytest.raises(ModelLoadError, match="bad.pt2: not a readable torch.export archive"):
        load_model(str(bad_pt2))
    with pytest.raises(ValueError, match="unknown model 'lenet'"):
        load_model("lenet")


@pytest.mark.parametrize("op, window", [("AveragePool", [2, 12]), ("MaxPool", [5, 2])])
def test_a_window_larger_than_its_padded_input_is_refused_by_node(op, window):
    """A pool whose window exceeds its padded input (torch.onnx sized an AveragePool after a
    ceil-mode MaxPool by ONNX's rule, 12 columns, over the 11 PyTorch's rule gives): TVM's importer
    gives it an output of size 0, onnxruntime refuses the model; relax_vk names the node."""
    from onnx import TensorProto, helper

    from relax_vk.core.errors import UnsupportedError

    node = helper.make_node(op, ["x"], ["y"], kernel_shape=window, strides=window, name="the_pool")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 11])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, "h", "w"])])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedError, match=r"node the_pool \((avg|max)_pool2d\): its window is larger than its padded input \[1, 1, 4, 11\]"):
        from_onnx(model)
    fits = helper.make_node(op, ["x"], ["y"], kernel_shape=[2, 11], strides=[2, 11], name="the_pool")
    from_onnx(helper.make_model(helper.make_graph([fits], "g", graph.input, graph.output), opset_imports=[helper.make_opsetid("", 17)]))


def test_unsupported_ops_stay_in_buffers_and_say_why():
    """A ViT's matmul/layer_norm/softmax have no packed form: they run in buffers, the plan says why."""
    mod, _ = load_model("vit_small")
    plan = relax_vk.plan(relax_vk.scope_pipeline()(mod))
    reasons = {t.reason for t in plan.tensors if t.kind == "tensor" and t.scope == "global"}
    assert any(r.startswith("not a packed float tensor") for r in reasons)
    assert all(r for r in reasons)


def test_missing_extra_names_the_extra(monkeypatch):
    import builtins

    from relax_vk.core import extras as _extras

    real_import = builtins.__import__

    def fake(name, *a, **k):
        if name == "onnx":
            raise ImportError("No module named 'onnx'")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    monkeypatch.delitem(__import__("sys").modules, "onnx", raising=False)
    with pytest.raises(_extras.MissingExtra, match=r"pip install 'relax_vk\[onnx\]'"):
        _extras.require("onnx", "onnx")


def test_max_and_min_over_a_dim_with_their_indices():
    """``x.max(dim)`` / ``x.min(dim)`` (TVM imports them as ``topk``, which nothing lowers): a
    reduction, and an arg-reduction only where the indices are used."""
    from relax_vk.frontends import from_torch

    class Stats(torch.nn.Module):
        def forward(self, x):
            values, indices = x.max(1)
            return x - x.max(-1, keepdim=True).values + x.min(-1, keepdim=True)[0], values, indices

    x = torch.randn(1, 20, 12)
    mod = from_torch(Stats(), (x,))
    assert "topk" not in str(mod["main"])
    ops = str(relax_vk.layout_stage()(mod)["main"])  # (unused indices dropped)
    assert ops.count("R.argmax") == 1 and "R.argmin" not in ops
    outs = load(relax_vk.build(mod).artifact(), device="pocl").run([x.numpy()])
    for out, ref in zip(outs, Stats()(x)):
        np.testing.assert_allclose(out, ref.numpy(), rtol=1e-6, atol=1e-6)


def test_legacy_per_channel_broadcasts_get_explicit_shapes():
    """Opset < 7: a PRelu's 1-D slope is per channel, a ``broadcast=1`` Add aligns at ``axis``;
    each gets an Unsqueeze to its numpy shape. Opset 7 on, broadcasting is numpy's: unchanged."""
    from onnx import TensorProto, helper, numpy_helper

    from relax_vk.frontends.onnx import align_legacy_broadcasts

    def model(opset):
        nodes = [helper.make_node("PRelu", ["x", "s"], ["p"]), helper.make_node("Add", ["p", "b"], ["y"], broadcast=1, axis=1)]
        inits = [numpy_helper.from_array(np.ones(3, "float32"), n) for n in ("s", "b")]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4, 5])], initializer=inits)  # fmt: skip
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])

    legacy = model(6)
    assert align_legacy_broadcasts(legacy) == 2
    unsqueezes = [n for n in legacy.graph.node if n.op_type == "Unsqueeze"]
    assert [list(helper.get_attribute_value(n.attribute[0])) for n in unsqueezes] == [[1, 2], [1, 2]]
    modern = model(13)
    modern.graph.node[1].ClearField("attribute")
    assert align_legacy_broadcasts(modern) == 0 and [n.op_type for n in modern.graph.node] == ["PRelu", "Add"]
