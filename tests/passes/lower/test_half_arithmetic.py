"""HalfArithmetic (ScopeOptions(arithmetic="fp16")): kernels compute in float16 with float32
accumulators, on lavapipe (shader-f16; pocl has no cl_khr_fp16, so OpenCL is checked at the source
and at load). Textures stay float32 here (precision="fp32"), so every difference from the float32
build comes from the arithmetic."""

import numpy as np
import pytest
from tvm import relax

import relax_vk
from relax_vk.core.options import ScopeOptions
from relax_vk.passes.lower.half_arithmetic import HalfPolicy, half_represents
from relax_vk.runtime import load

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from helpers import module, tensor  # noqa: E402
from onnx_chain import chain_model  # noqa: E402

HALF = ScopeOptions(arithmetic="fp16")


def _model(nodes, x_shape, y_shape, inits=()):
    from relax_vk.frontends import from_onnx

    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
                              [numpy_helper.from_array(np.asarray(v), n) for n, v in inits])  # fmt: skip
    return from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def _run(mod, x, options=HALF, **kw):
    artifact = relax_vk.build(mod, "vulkan", options=options, **kw).artifact()
    return artifact, load(artifact, device="lavapipe").run([x])[0]


def _rel(got, ref):
    return float(np.max(np.abs(got - ref))) / float(np.max(np.abs(ref)))


def test_policy_and_constants():
    assert half_represents(0.0) and half_represents(65504.0) and half_represents(2.0**-14)
    assert not half_represents(65520.0) and not half_represents(1e-8) and not half_represents(float("-inf"))
    with pytest.raises(ValueError, match="accumulate"):
        HalfPolicy(accumulate="int8")
    with pytest.raises(ValueError, match="arithmetic"):
        ScopeOptions(arithmetic="bf16")
    assert ScopeOptions(arithmetic="fp16", fp32_ops="head").fp32_ops == ("head",)  # one name, not its letters
    policy = HalfPolicy(fp32_ops=("layer1.*",), overflow={"big": 1e5})
    assert "layer1.*" in policy.keeps(["fused_conv2d_kernel"], ["layer1.conv"])
    assert "overflow" in policy.keeps(["k"], ["big"])
    assert policy.keeps(["k"], ["layer2.conv"]) is None


def test_elementwise_computes_in_half(lavapipe):
    x = np.random.default_rng(0).standard_normal((1, 8, 16, 16)).astype(np.float32)
    mod = _model([helper.make_node("Mul", ["x", "s"], ["a"], name="scale"), helper.make_node("Add", ["a", "b"], ["c"], name="shift"),
                  helper.make_node("Sigmoid", ["c"], ["y"], name="act")], [1, 8, 16, 16], [1, 8, 16, 16],
                 [("s", np.float32(1.7)), ("b", np.float32(0.3))])  # fmt: skip
    ref = 1 / (1 + np.exp(-(x * np.float32(1.7) + np.float32(0.3))))
    artifact, y = _run(mod, x)
    half = [k for k in artifact.program["kernels"] if k.get("arithmetic") == "float16"]
    assert half and "enable f16;" in artifact.source
    assert 1e-5 < _rel(y, ref) < 5e-3  # half's 11 bits, not float32's
    _, y32 = _run(mod, x, ScopeOptions())
    assert _rel(y32, ref) < 1e-5


def test_conv_chain_accumulates_in_float32(lavapipe):
    mod = chain_model()
    x = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)
    _, ref = _run(mod, x, ScopeOptions())
    artifact, y = _run(mod, x)
    assert 1e-6 < _rel(y, ref) < 5e-3
    conv = next(k for k in artifact.program["kernels"] if k.get("schedule") == "conv2d")
    assert conv["arithmetic"] == "float16" and conv["accumulate"] == "float32"
    shader = artifact.source[conv["shader"]["offset"] : conv["shader"]["offset"] + conv["shader"]["length"]]
    assert "array<f16" in shader  # the input and weight caches are half ...
    assert "_intermediate_local: array<f32" in shader  # ... the accumulator is not


@pytest.mark.parametrize("case", ["mean", "matmul"])
def test_long_reductions_keep_float32_sums(lavapipe, case):
    """4096-term sums of values near 1: float32 accumulators hold them to 1e-6; half accumulators
    (``accumulate="fp16"``, for comparison) lose 1e-3 -- a test half accumulation fails."""
    x_shape = [1, 8, 64, 64] if case == "mean" else [1, 8, 4096]
    x = (1 + 0.01 * np.random.default_rng(0).random(x_shape)).astype(np.float32)
    if case == "mean":
        mod = _model([helper.make_node("ReduceMean", ["x"], ["y"], name="avg", axes=[2, 3], keepdims=1)], x_shape, [1, 8, 1, 1])
        ref = x.astype(np.float64).mean((2, 3), keepdims=True)
    else:
        w = np.random.default_rng(1).uniform(0.5, 1.0, (4096, 16)).astype(np.float32)
        mod = _model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], x_shape, [1, 8, 16], [("w", w)])
        ref = x.astype(np.float64) @ w
    _, y = _run(mod, x, calibration=False)
    assert _rel(y, ref) < 1e-4
    _, y_half_sums = _run(mod, x, ScopeOptions(arithmetic="fp16", accumulate="fp16"), calibration=False)
    assert _rel(y_half_sums, ref) > 3e-4


@pytest.mark.parametrize("case", ["softmax", "layernorm"])
def test_row_reductions(lavapipe, case):
    n = 1000 if case == "softmax" else 768
    x = (3 * np.random.default_rng(2).standard_normal((4, n))).astype(np.float32)
    if case == "softmax":
        mod = _model([helper.make_node("Softmax", ["x"], ["y"], name="probs", axis=-1)], [4, n], [4, n])
        e = np.exp(x - x.max(-1, keepdims=True))
        ref = e / e.sum(-1, keepdims=True)
    else:
        g = np.random.default_rng(3).uniform(0.5, 1.5, n).astype(np.float32)
        b = np.random.default_rng(4).uniform(-0.5, 0.5, n).astype(np.float32)
        mod = _model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], name="norm", axis=-1, epsilon=1e-5)],
                     [4, n], [4, n], [("g", g), ("b", b)])  # fmt: skip
        ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b
    artifact, y = _run(mod, x)
    assert any(k.get("arithmetic") == "float16" for k in artifact.program["kernels"])
    assert _rel(y, ref) < 3e-3


def test_named_ops_stay_float32(lavapipe):
    mod = chain_model()
    artifact, _ = _run(mod, np.zeros((1, 3, 16, 16), np.float32), ScopeOptions(arithmetic="fp16", fp32_ops=("middle*",)))
    kept = artifact.program["arithmetic"]["float32"]
    assert len(kept) == 1 and "middle" in next(iter(kept.values()))
    for step in artifact.program["steps"]:
        if step["op"] == "launch" and step.get("ops"):
            kernel = next(k for k in artifact.program["kernels"] if k["name"] == step["kernel"])
            assert (kernel.get("arithmetic") is None) == any(op.startswith("middle") for op in step["ops"]), step
    by_kernel = relax_vk.build(mod, "vulkan", options=ScopeOptions(arithmetic="fp16", fp32_ops=("*tanh*",))).artifact()
    assert any("tanh" in k for k in by_kernel.program["arithmetic"]["float32"])


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_overflowing_layers_fall_back_to_float32(lavapipe, precision):
    """The first conv's outputs reach ~1e5 (the chain bisect plants an fp16 overflow with): the
    calibration run keeps it and its reader in float32 (under half texels, the textures they
    write keep float32 texels), and the model stays right; without calibration half arithmetic
    overflows."""
    from relax_vk.analysis.fp16_range import overflowing_ops

    mod = chain_model(scale=1e4)
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    hot = overflowing_ops(mod, [x])
    assert {"first", "first_relu", "middle"} <= set(hot) and "last" not in hot
    _, ref = _run(mod, x, ScopeOptions())
    options = ScopeOptions(precision=precision, arithmetic="fp16")
    artifact, y = _run(mod, x, options, calibration=[x])
    kept = artifact.program["arithmetic"]["float32"]
    assert kept and all("overflow" in why for why in kept.values())
    # (half texels: the middle conv's weights, ~1e-5, are subnormal in half: the fp16 bound)
    assert _rel(y, ref) < (5e-3 if precision == "fp32" else 2e-2)
    if precision == "fp16":
        texels = {t.get("texel") for t in artifact.program["tensors"] if t["image"] and t["kind"] == "intermediate"}
        assert texels == {None, "float16"}  # float32 texels where the values are large, half elsewhere
    _, unsafe = _run(mod, x, options, calibration=False)
    assert not np.all(np.isfinite(unsafe)) or _rel(unsafe, ref) > 0.1


def test_opencl_source_and_devices_without_half_arithmetic(pocl):
    from relax_vk.runtime import DeviceLimitError

    compiled = relax_vk.build(chain_model(), "opencl", options=HALF)
    assert "cl_khr_fp16" in compiled.source and "half" in compiled.source
    with pytest.raises(DeviceLimitError, match="cl_khr_fp16"):
        load(compiled.artifact(), device="pocl")


def test_the_rewrite_of_scheduled_kernels():
    """On the scheduled TIR: a conv's input and weight caches become half, its accumulator and
    epilogue stay float32; a layout transform's copy-only stage stays float32; parameters keep
    their dtype; max pooling's -3.4e38 start keeps its accumulator float32 even with half sums."""
    import tvm
    import tvm_ffi
    from tvm import tirx

    from relax_vk.core import target as _target
    from relax_vk.models import build_example
    from relax_vk.passes.lower.half_arithmetic import KERNEL_ATTR, to_half_arithmetic
    from relax_vk.pipeline import _lowering_stage, _scope_pipeline

    tgt = _target.resolve("vulkan")
    lowered = _lowering_stage(tgt)(_scope_pipeline(tgt, None, ScopeOptions())(build_example("conv-relu-pool")))
    funcs = {gv.name_hint: f for gv, f in lowered.functions_items() if isinstance(f, tirx.PrimFunc)}

    def allocs(func):
        found = {}

        def on_block(b):
            found.update({str(buf.name): str(buf.dtype) for buf in b.alloc_buffers})
            return b

        tvm_ffi.structural_map(func.body, [(tvm.s_tir.SBlock, on_block)])
        return found

    conv = to_half_arithmetic(next(f for n, f in funcs.items() if n.startswith("fused_conv2d")))
    locals_ = allocs(conv)
    assert sorted(d for n, d in locals_.items() if "pad" in n or n.startswith("lv")) == ["float16", "float16"]
    assert next(d for n, d in locals_.items() if "intermediate_local" in n) == "float32"
    assert str(conv.attrs[KERNEL_ATTR]) == "float32"
    assert 'T.Buffer((T.int64(1), T.int64(8), T.int64(32), T.int64(32), T.int64(4)), "float32"' in conv.script()  # (its output)
    assert "T.max(conv2d" in conv.script()  # the epilogue reads the float32 sum as it is
    layout = next(f for n, f in funcs.items() if "layout_transform" in n)
    assert allocs(layout) and set(allocs(to_half_arithmetic(layout)).values()) == {"float32"}
    pool = to_half_arithmetic(next(f for n, f in funcs.items() if "pool" in n), accumulate="float16")
    assert set(allocs(pool).values()) == {"float32"}


def test_a_weight_beyond_half_keeps_its_kernel_float32(lavapipe):
    """A static bound, without calibration: a constant operand float16 cannot hold (7e4) keeps its
    kernel in float32 arithmetic."""
    x = np.random.default_rng(5).standard_normal((1, 8, 16, 16)).astype(np.float32)
    big = np.full((1, 8, 16, 16), 7e4, np.float32) + np.arange(16, dtype=np.float32)
    mod = _model([helper.make_node("Add", ["x", "big"], ["y"], name="offset")], [1, 8, 16, 16], [1, 8, 16, 16], [("big", big)])
    artifact, y = _run(mod, x, calibration=False)
    assert any(why.startswith("constant") for why in artifact.program["arithmetic"]["float32"].values())
    np.testing.assert_allclose(y, x + big, rtol=1e-6)


@pytest.mark.parametrize("norm", ["group", "instance"])
def test_pytorch_norms_under_half_arithmetic_run_within_the_fp16_bound(norm, lavapipe):
    """PyTorch's GroupNorm / InstanceNorm under half arithmetic (their two-pass kernels,
    relax_vk.legalize.norms) build and run within the fp16 bound."""
    torch = pytest.importorskip("torch")
    from relax_vk.frontends import from_torch
    torch.manual_seed(0)
    layer = torch.nn.GroupNorm(2, 8) if norm == "group" else torch.nn.InstanceNorm2d(8, affine=True)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), layer).eval()
    x = torch.randn(1, 3, 16, 16)
    artifact = relax_vk.build(from_torch(model, (x,)), "vulkan", options=ScopeOptions(precision="fp16", arithmetic="fp16"), calibration=False).artifact()
    want = model(x).detach().numpy()
    got = load(artifact, device="lavapipe").run([x.numpy()])[0]
    assert np.abs(got - want).max() <= 1e-2 * np.abs(want).max()


def test_a_kernel_whose_float16_reduction_tvm_cannot_lower_stays_float32_and_runs(lavapipe):
    """TOPI's one-pass group norm (a tuple reduction of x and x * x) under half arithmetic stopped
    the build inside TVM ("Cross-thread reduction cannot be applied ... condition #7"); such a
    kernel stays float32, named with the reason, and runs right."""
    from tvm import topi

    rng = np.random.default_rng(0)
    gamma, beta = (rng.random(8) + 0.5).astype("float32"), rng.standard_normal(8).astype("float32")
    mod = module([tensor("x", (1, 8, 16, 16))], lambda bb, v: bb.emit_te(topi.nn.group_norm, v, relax.const(gamma), relax.const(beta), 2, 1, [2, 3], 1e-5))
    artifact = relax_vk.build(mod, "vulkan", options=ScopeOptions(precision="fp16", arithmetic="fp16"), calibration=False).artifact()
    kept = artifact.program["arithmetic"]["float32"]
    assert any("TVM cannot lower its float16 form" in why for why in kept.values()), kept
    x = rng.standard_normal((1, 8, 16, 16)).astype("float32")
    groups = x.reshape(1, 2, 4, 16, 16)
    want = ((groups - groups.mean(axis=(2, 3, 4), keepdims=True)) / np.sqrt(groups.var(axis=(2, 3, 4), keepdims=True) + 1e-5)).reshape(x.shape)
    want = want * gamma.reshape(1, 8, 1, 1) + beta.reshape(1, 8, 1, 1)
    got = load(artifact, device="lavapipe").run([x])[0]
    assert np.abs(got - want).max() <= 1e-2 * np.abs(want).max()


def test_an_fp32_op_pattern_that_names_nothing_is_said_so():
    """--fp32-op 'layer4.*' on a model whose ops are blocks.N kept nothing float32, silently."""
    mod = chain_model()
    with pytest.warns(UserWarning, match=r"fp32_ops 'layer4\.\*' names no kernel, model op or tensor"):
        relax_vk.build(mod, "vulkan", options=ScopeOptions(arithmetic="fp16", fp32_ops=("layer4.*",)), calibration=False)
