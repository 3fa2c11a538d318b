"""IsolateBroadcastReductions: a conv whose result is broadcast to a larger tensor (a squeeze-excite
gate) stays its own kernel; convs followed by same-size epilogues still fuse them."""

import numpy as np
import pytest
from tvm import relax

import relax_vk
from relax_vk.analysis.reference import random_inputs, run_on_cpu
from relax_vk.passes import IsolateBroadcastReductions
from relax_vk.runtime import load

from helpers import const, module, tensor
from helpers_build import BACKENDS

C, H, W = 24, 6, 10


def squeeze_excite(gate=relax.op.sigmoid):
    """conv -> mean over H, W -> 1x1 conv + bias -> gate -> times the conv's map."""
    x = tensor("x", (1, C, H, W))

    def body(bb, x):
        y = bb.emit(relax.op.nn.relu(bb.emit(relax.op.nn.conv2d(x, const((C, C, 3, 3), 1), padding=1))))
        m = bb.emit(relax.op.mean(y, axis=[2, 3], keepdims=True))
        g = bb.emit(relax.op.add(bb.emit(relax.op.nn.conv2d(m, const((C, C, 1, 1), 2))), const((1, C, 1, 1), 3)))
        return relax.op.multiply(y, bb.emit(gate(g)))

    return module([x], body)


def _legalized(mod):
    """The module as the lowering stage hands it to FuseOps (scoped, legalized, patterns annotated)."""
    target = relax_vk.target.opencl()
    scoped = relax_vk.scope_pipeline(target)(mod)
    with target:
        mod = relax_vk.passes.LegalizeWithScopes()(scoped)
    return relax.transform.AnnotateTIROpPattern()(mod)


def _callees(mod):
    return [b.value.args[0].name_hint for block in mod["main"].body.blocks for b in block.bindings
            if isinstance(b.value, relax.Call) and getattr(b.value.op, "name", "") == "relax.call_tir"]  # fmt: skip


def test_the_gate_conv_calls_an_opaque_copy_and_the_map_conv_is_untouched():
    mod = _legalized(squeeze_excite())
    out = IsolateBroadcastReductions()(mod)
    apart = [name for name in _callees(out) if name.endswith("_apart")]
    assert len(apart) == 1, _callees(out)
    assert int(out[apart[0]].attrs["op_pattern"]) == 8  # kOpaque
    original = apart[0][: -len("_apart")]
    assert int(out[original].attrs["op_pattern"]) == 4  # (the PrimFunc itself is not changed)
    # the map's 3x3 conv (same-size relu after it, then a mean) is not isolated
    assert sum(1 for name in _callees(out) if "conv2d" in name and not name.endswith("_apart")) == 1


def test_a_conv_with_same_size_epilogues_is_left_to_fusion():
    x = tensor("x", (1, C, H, W))
    mod = module([x], lambda bb, x: relax.op.nn.relu(bb.emit(relax.op.add(bb.emit(relax.op.nn.conv2d(x, const((C, C, 1, 1), 1))), const((1, C, 1, 1), 2)))))
    legalized = _legalized(mod)
    assert IsolateBroadcastReductions()(legalized).same_as(legalized)


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", BACKENDS)
@pytest.mark.parametrize("prefer", ["texture", "buffer"])
@pytest.mark.parametrize("gate", [relax.op.sigmoid, lambda g: relax.op.clip(relax.op.add(relax.op.multiply(g, relax.const(1 / 6, "float32")), relax.const(0.5, "float32")), 0, 1)],
                         ids=["sigmoid", "hard_sigmoid"])  # fmt: skip
def test_squeeze_excite_gate_gets_the_conv_and_pool_schedules(backend, device, prefer, gate):
    mod = squeeze_excite(gate)
    compiled = relax_vk.build(mod, target=backend, options=relax_vk.ScopeOptions(prefer=prefer))
    kernels = compiled.artifact().program["kernels"]
    rules = {k["name"]: k.get("schedule") for k in kernels}
    assert [r for name, r in rules.items() if "conv2d" in name] == ["conv2d", "conv2d"], rules
    assert [r for name, r in rules.items() if "mean" in name] == ["pool"], rules
    inputs = random_inputs(mod)
    (out,) = load(compiled.artifact(), device=device).run(inputs)
    np.testing.assert_allclose(out, run_on_cpu(mod, inputs)[0], rtol=1e-4, atol=1e-5)


def test_an_isolated_conv_that_is_also_a_model_output_stays_one():
    x = tensor("x", (1, C, H, W))

    def body(bb, x):
        m = bb.emit(relax.op.mean(x, axis=[2, 3], keepdims=True))
        g = bb.emit_output(relax.op.nn.conv2d(m, const((C, C, 1, 1), 2)))  # (a non-dataflow var)
        return relax.Tuple([g, bb.emit(relax.op.multiply(x, g))])

    mod = module([x], body)
    out = IsolateBroadcastReductions()(_legalized(mod))
    relax.analysis.well_formed(out)
    assert any(name.endswith("_apart") for name in _callees(out))
    compiled = relax_vk.build(mod, target="opencl")
    inputs = random_inputs(mod)
    for got, ref in zip(load(compiled.artifact(), device="pocl").run(inputs), run_on_cpu(mod, inputs)):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
