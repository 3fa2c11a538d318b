import json

import tvm
from tvm import relax

import relax_vk
from relax_vk.models import build_example
from relax_vk.passes.scope.scope_info import CONSUMER_ATTR

from helpers import TARGET, const, module, tensor


def legalized(mod):
    return relax_vk.passes.PartialLegalize()(relax_vk.layout_stage()(mod))


def info(mod):
    out = relax_vk.passes.CollectConsumerScopeInfo(TARGET)(mod)
    return out, json.loads(str(out["main"].attrs[CONSUMER_ATTR]))["sites"]


def test_rfc_example_demands():
    mod = legalized(build_example("rfc-conv2d"))
    out, sites = info(mod)
    by_op = {s["op"]: s for s in sites.values()}
    conv = by_op["relax.nn.conv2d"]
    assert conv["arg_preferred"] == ["global.texture", "global.texture-weight"]
    assert conv["follow_output"] == []  # conv's output does not dictate its inputs
    layout = [s for s in sites.values() if s["registration"] == "relax.layout_transform"]
    pack = [s for s in layout if s["arg_allowed"][0] == ["global"]]
    assert len(pack) == 2  # x and w: 4-D NCHW inputs are not texturable
    # and may write any scope the tensor fits: x's packed form is 16*56*56 = 50176 texels wide
    # in the weight mapping, over the 16384 limit
    assert pack[0]["out_allowed"] == [["global", "global.texture", "global.texture-nhwc"]]
    assert len(pack[1]["out_allowed"][0]) == 4
    # the unpacking transform may read the conv's output from a texture, and writes NCHW
    (unpack,) = [s for s in layout if s not in pack]
    assert "global.texture" in unpack["arg_allowed"][0] and unpack["out_allowed"] == [["global"]]
    # the pass only adds the attribute
    tvm.ir.assert_structural_equal(out["main"].body, mod["main"].body)
    assert out["main"].params[0].same_as(mod["main"].params[0])


def test_elementwise_is_all_synced_and_reduction_is_buffer():
    x = tensor("x", (1, 8, 8, 8))

    def body(bb, x):
        c = bb.emit(relax.op.nn.conv2d(x, const((8, 8, 3, 3), 1), padding=(1, 1)))
        a = bb.emit(relax.op.add(c, const((1, 8, 1, 1), 2)))
        s = bb.emit(relax.op.sum(a, axis=[2, 3], keepdims=True))
        return relax.op.nn.softmax(s, axis=1)

    _, sites = info(legalized(module([x], body)))
    add = [s for s in sites.values() if s["registration"] == "<op_pattern < 3>"][0]
    assert add["follow_output"] == [0, 1] and add["arg_preferred"] == ["global.texture"] * 2
    # a spatial sum of a packed tensor is registered texture-capable, its output synced
    total = [s for s in sites.values() if s["registration"] == "relax.sum"][0]
    assert "global.texture" in total["arg_allowed"][0] and total["follow_output"] == [0]
    # an unregistered reduction kernel is matched by its op_pattern: buffers
    red = [s for s in sites.values() if s["registration"] == "<op_pattern >= 3>"][0]
    assert red["arg_allowed"] == [["global"]]
    assert "reduction or opaque kernel" in red["reason"]


def test_texture_limits_of_the_target_are_applied():
    mod = legalized(build_example("rfc-conv2d"))
    small = relax_vk.target.opencl(spatial_limit=32)
    out = relax_vk.passes.CollectConsumerScopeInfo(small)(mod)
    sites = json.loads(str(out["main"].attrs[CONSUMER_ATTR]))["sites"]
    conv = [s for s in sites.values() if s["op"] == "relax.nn.conv2d"][0]
    # 56x56 images no longer fit; nhwc/weight mappings are wider still: buffers
    assert conv["arg_allowed"][0] == ["global"]
