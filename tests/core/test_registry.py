import pytest
from tvm import relax

import relax_vk
from relax_vk.core.registry import OPAQUE_CALL, PATTERN_BUFFER, UNKNOWN, default_registry
from relax_vk.core.representation import ANY_SCOPE, BUFFER_ONLY

from helpers import call_scopes, const, module, scoped, tensor


def _conv_sum():
    x = tensor("x", (1, 8, 16, 16))

    def body(bb, x):
        c = bb.emit(relax.op.nn.conv2d(x, const((8, 8, 3, 3), 1), padding=(1, 1)))
        return relax.op.sum(c, axis=[2, 3], keepdims=True)

    return module([x], body)


def test_defaults():
    reg = default_registry()
    assert reg.keep_for_scoping() == [
        "relax.nn.adaptive_avg_pool2d",
        "relax.nn.avg_pool2d",
        "relax.nn.conv2d",
        "relax.nn.max_pool2d",
    ]
    x = tensor("x", (1, 2, 8, 8, 4))
    w = tensor("w", (2, 8, 3, 3, 4))
    packed = relax.op.nn.conv2d(x, w, data_layout="NCHW4c", kernel_layout="OIHW4o", out_layout="NCHW4c")
    assert reg.lookup(packed).name == "relax.nn.conv2d"
    nchw = relax.op.nn.conv2d(tensor("y", (1, 8, 8, 8)), tensor("v", (8, 8, 3, 3)))
    assert reg.lookup(nchw) is UNKNOWN  # an NCHW conv is not texture-capable
    assert reg.lookup(relax.op.nn.max_pool2d(x, layout="NCHW4c")).name == "relax.nn.max_pool2d"
    assert reg.lookup(relax.op.nn.max_pool2d(tensor("z", (1, 4, 8, 8)))) is UNKNOWN
    assert reg.lookup(relax.op.nn.softmax(x)) is UNKNOWN
    assert reg.lookup(relax.Call(relax.ExternFunc("my_extern"), [x])) is OPAQUE_CALL


def test_kernels_matched_by_source_op_then_pattern():
    x = tensor("x", (1, 8, 16, 16))

    def body(bb, x):
        c = bb.emit(relax.op.nn.conv2d(x, const((8, 8, 3, 3), 1), padding=(1, 1)))
        s = bb.emit(relax.op.sum(c, axis=[2, 3], keepdims=True))
        return relax.op.nn.softmax(s, axis=1)

    mod = relax_vk.passes.PartialLegalize()(relax_vk.layout_stage()(module([x], body)))
    reg = default_registry()
    kernels = {}
    for b in mod["main"].body.blocks[0].bindings:
        v = b.value
        if isinstance(v, relax.Call) and v.op.name == "relax.call_tir":
            kernels[v.args[0].name_hint] = reg.lookup(v, mod)
    # the packing transform and the (packed, spatial) sum are matched by their source ops; the
    # channel softmax, a reduction nobody registered, by its op_pattern
    assert kernels["te_layout_transform"].name == "relax.layout_transform"
    assert kernels["sum"].name == "relax.sum"
    assert kernels["softmax"] is PATTERN_BUFFER


def test_duplicate_registration_needs_override():
    reg = default_registry().copy()
    with pytest.raises(ValueError, match="already registered"):
        relax_vk.register_op("relax.nn.conv2d", ANY_SCOPE, registry=reg)
    relax_vk.register_op("relax.nn.conv2d", BUFFER_ONLY, BUFFER_ONLY, registry=reg, override=True)
    assert reg.get("relax.nn.conv2d").inputs == BUFFER_ONLY
    assert default_registry().get("relax.nn.conv2d").inputs != BUFFER_ONLY  # the copy is independent


def test_custom_registration_changes_the_plan():
    mod = _conv_sum()
    before = call_scopes(scoped(mod))
    conv_before = [r for r in before if r[0] == "relax.nn.conv2d"][0]
    assert conv_before[2] == ["global.texture"]  # the default sum reads textures

    reg = default_registry().copy()
    relax_vk.register_op("relax.sum", inputs=[BUFFER_ONLY], outputs=[BUFFER_ONLY], registry=reg, reason="buffer sum", override=True)
    after = call_scopes(scoped(mod, registry=reg))
    conv_after = [r for r in after if r[0] == "relax.nn.conv2d"][0]
    assert conv_after[2] == ["global"]  # its only consumer now reads buffers: no copy, a buffer
    sum_after = [r for r in after if r[0].startswith("sum")][0]
    assert sum_after[1] == ["global"] and sum_after[2] == ["global"]
    assert default_registry().get("relax.sum").inputs == ANY_SCOPE  # the copy is independent


def test_global_register_op_is_used_by_default_and_removable():
    mod = _conv_sum()
    original = default_registry().get("relax.sum")
    relax_vk.register_op("relax.sum", inputs=[BUFFER_ONLY], outputs=[BUFFER_ONLY], override=True)
    try:
        conv = [r for r in call_scopes(scoped(mod)) if r[0] == "relax.nn.conv2d"][0]
        assert conv[2] == ["global"]
        default_registry().unregister("relax.sum")  # unregistered: matched by its op_pattern (buffers)
        conv = [r for r in call_scopes(scoped(mod)) if r[0] == "relax.nn.conv2d"][0]
        assert conv[2] == ["global"]
    finally:
        default_registry().register(original, override=True)
    conv = [r for r in call_scopes(scoped(mod)) if r[0] == "relax.nn.conv2d"][0]
    assert conv[2] == ["global.texture"]
