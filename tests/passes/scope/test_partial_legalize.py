
import relax_vk
from relax_vk.models import build_example
from relax_vk.core.registry import SOURCE_OP_ATTR


def test_keeps_scoping_ops_and_tags_kernels():
    mod = relax_vk.layout_stage()(build_example("conv-relu-pool"))
    out = relax_vk.passes.PartialLegalize()(mod)
    ops, kernels = [], {}
    for b in out["main"].body.blocks[0].bindings:
        v = b.value
        if v.op.name == "relax.call_tir":
            f = out[v.args[0]]
            kernels[v.args[0].name_hint] = (int(f.attrs["op_pattern"]), str(f.attrs[SOURCE_OP_ATTR]))
        else:
            ops.append(v.op.name)
    # conv2d and max_pool2d keep their attributes for scope assignment
    assert ops == ["relax.nn.conv2d", "relax.nn.max_pool2d"]
    assert kernels["relu"] == (0, "relax.nn.relu")
    layout = [k for k in kernels.values() if k[1] == "relax.layout_transform"]
    # x and w packed (opaque kernels: texel stores), the result unpacked (injective: it fuses)
    assert sorted(p for p, _ in layout) == [2, 8, 8]


def test_custom_keep_for_scoping_op_is_skipped():
    reg = relax_vk.default_registry().copy()
    relax_vk.register_op("relax.nn.relu", relax_vk.ANY_SCOPE, keep_for_scoping=True, registry=reg)
    mod = relax_vk.layout_stage()(build_example("conv-relu-pool"))
    out = relax_vk.passes.PartialLegalize(reg)(mod)
    names = [b.value.op.name for b in out["main"].body.blocks[0].bindings]
    assert "relax.nn.relu" in names
