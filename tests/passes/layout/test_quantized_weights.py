"""Quantized conv weights (``dequantize`` of an integer constant) are packed to OIHW4o at compile
time as integers, dequantized in the packed layout by one elementwise kernel, and compute what
the run-time packing computed; where ``q - zero point`` fits int8 the conv reads those integers
and scales its sums (no dequantize, no float copy of the weight); an int32 ``dequantize`` (a
bias) folds to float32."""

import numpy as np
import pytest
from tvm import relax
from tvm.ir.expr import GenericConst

import relax_vk
from relax_vk.passes import FoldSmallConstants

from helpers import assert_same_numbers, module, op_count, tensor


def _quantized_conv(dtype, per_channel, cin=3, cout=6, groups=1, centred=False):
    """conv2d(x, dequantize(q, scale, zp)) + dequantize(int32 bias): ``cin`` and ``cout`` not
    multiples of 4, so packing pads both. ``centred``: zero points 0 (int8) or 128 (uint8), as
    symmetric quantizers write them."""
    rng = np.random.default_rng(7)
    lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
    q = rng.integers(lo, hi + 1, (cout, cin // groups, 3, 3)).astype(dtype)
    scale = (rng.random(cout if per_channel else 1) * 0.02 + 0.005).astype("float32")
    zp = rng.integers(lo // 4, hi // 4 + 1, cout if per_channel else 1).astype(dtype)
    if centred:
        zp = np.full(cout if per_channel else 1, 0 if dtype == "int8" else 128, dtype)
    bias = rng.integers(-2000, 2000, cout).astype("int32")

    def body(bb, x):
        w = bb.emit(relax.op.dequantize(relax.const(q), relax.const(scale), relax.const(zp), axis=0))
        b = bb.emit(relax.op.dequantize(relax.const(bias), relax.const(scale * 0.1), relax.const(np.zeros(cout if per_channel else 1, "int32")), axis=0))
        y = bb.emit(relax.op.nn.conv2d(x, w, padding=1, groups=groups))
        return relax.op.add(y, relax.op.reshape(b, (1, cout, 1, 1)))

    return module([tensor("x", (1, cin, 9, 7))], body)


def _constants(mod):
    found = []
    relax.analysis.post_order_visit(mod["main"], lambda e: found.append(e) if isinstance(e, GenericConst) else None)
    return found


@pytest.mark.parametrize("dtype, per_channel", [("int8", True), ("uint8", True), ("int8", False), ("uint8", False)])
def test_quantized_weights_pack_at_compile_time_and_compute_the_same(dtype, per_channel):
    mod = _quantized_conv(dtype, per_channel)
    out = relax_vk.layout_stage()(mod)
    relax.analysis.well_formed(out)
    packed = [c for c in _constants(out) if str(c.value.dtype) == dtype]
    assert [tuple(c.value.shape) for c in packed] == [(2, 4, 3, 3, 4)]  # OIHW4o: 6 -> 8 outputs, 3 -> 4 inputs
    assert op_count(out, "relax.dequantize") == 0 and op_count(out, "relax.layout_transform") == 2  # (the input's and the output's only)
    assert op_count(out, "relax.nn.pad") == 0 and not [c for c in _constants(out) if str(c.value.dtype) == "int32"]
    assert_same_numbers(mod, out, rtol=1e-6, atol=1e-6)


def test_a_depthwise_quantized_weight_packs_too():
    mod = _quantized_conv("int8", True, cin=6, cout=6, groups=6)
    out = relax_vk.layout_stage()(mod)
    assert [tuple(c.value.shape) for c in _constants(out) if str(c.value.dtype) == "int8"] == [(2, 1, 3, 3, 4)]
    assert_same_numbers(mod, out, rtol=1e-6, atol=1e-6)


def test_int32_dequantize_folds_and_int8_stays():
    mod = _quantized_conv("int8", True)
    out = FoldSmallConstants()(mod)
    assert op_count(out, "relax.dequantize") == 1  # (the weight's)
    assert_same_numbers(mod, out, rtol=0, atol=0)


@pytest.mark.parametrize("dtype, per_channel", [("int8", True), ("uint8", True), ("int8", False)])
def test_centred_weights_are_read_by_the_conv_as_integers(dtype, per_channel):
    mod = _quantized_conv(dtype, per_channel, centred=True)
    out = relax_vk.layout_stage()(mod)
    relax.analysis.well_formed(out)
    assert [tuple(c.value.shape) for c in _constants(out) if str(c.value.dtype) == "int8"] == [(2, 4, 3, 3, 4)]
    assert op_count(out, "relax.astype") == 0 and op_count(out, "relax.subtract") == 0  # (no weight dequantized)
    assert_same_numbers(mod, out, rtol=1e-5, atol=1e-5)


def test_a_centred_weight_has_no_float_copy_on_the_device(pocl):
    """Built and run: one kernel (conv, scale, bias), no float32 tensor of the weight's size, right
    numbers; the same conv with zero points off-centre keeps its dequantize kernel."""
    from relax_vk.analysis.reference import run_on_cpu
    from relax_vk.runtime import load

    x = np.random.default_rng(3).standard_normal((1, 3, 9, 7)).astype("float32")
    for centred, kernels in ((True, 1), (False, 2)):
        mod = _quantized_conv("int8", True, centred=centred)
        want = run_on_cpu(mod, [x])[0]
        artifact = relax_vk.build(mod, target="opencl").artifact()
        launches = sum(1 for step in artifact.program["steps"] if step["op"] == "launch")
        weight_sized = [t for t in artifact.program["tensors"] if t["dtype"] == "float32" and int(np.prod(t["shape"])) == 2 * 4 * 3 * 3 * 4]
        got = load(artifact, device="pocl").run([x])[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        assert launches - 2 == kernels, launches  # (+ the input's and the output's layout transforms)
        assert bool(weight_sized) != centred, weight_sized
