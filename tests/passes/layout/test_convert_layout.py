"""ConvertToPackedLayout (run through relax_vk.layout_stage, which also folds constant weights)."""

import numpy as np
from tvm import relax

import relax_vk
from relax_vk.models import build_example

from helpers import assert_same_numbers, const, module, op_count, tensor


def packed(mod):
    out = relax_vk.layout_stage()(mod)
    relax.analysis.well_formed(out)
    return out


def convs(mod):
    rows = []

    def visit(e):
        if isinstance(e, relax.Call) and hasattr(e.op, "name") and e.op.name == "relax.nn.conv2d":
            rows.append((str(e.attrs.data_layout), int(e.attrs.groups), tuple(int(d) for d in e.ty.shape.values)))

    relax.analysis.post_order_visit(mod["main"], visit)
    return rows


def ranks_into(mod, op_name):
    """Rank of the first tensor argument of every call to ``op_name``."""
    out = []

    def visit(e):
        if isinstance(e, relax.Call) and hasattr(e.op, "name") and e.op.name == op_name:
            first = e.args[0].fields[0] if isinstance(e.args[0], relax.Tuple) else e.args[0]
            out.append(len(first.ty.shape.values))

    relax.analysis.post_order_visit(mod["main"], visit)
    return out


def test_rfc_example_matches_the_rfc():
    out = packed(build_example("rfc-conv2d"))
    assert convs(out) == [("NCHW4c", 1, (2, 8, 54, 54, 4))]
    assert op_count(out, "relax.layout_transform") == 3  # x, w (a parameter) and the result


def test_packed_layout_flows_through_the_whole_network():
    x = tensor("x", (1, 8, 16, 16))

    def body(bb, x):
        c1 = bb.emit(relax.op.nn.conv2d(x, const((8, 8, 3, 3), 1), padding=(1, 1)))
        r = bb.emit(relax.op.clip(c1, 0.0, 6.0))  # ReLU6: upstream wraps it in layout transforms
        p = bb.emit(relax.op.nn.max_pool2d(r, (2, 2), (2, 2)))
        pd = bb.emit(relax.op.nn.pad(p, [0, 0, 0, 0, 1, 1, 1, 1]))
        up = bb.emit(relax.op.image.resize2d(pd, (20, 20), method="nearest_neighbor"))
        c2 = bb.emit(relax.op.nn.conv2d(up, const((4, 8, 1, 1), 2)))
        cat = bb.emit(relax.op.concat([up, c2], axis=1))  # 12 channels
        dw = bb.emit(relax.op.nn.conv2d(cat, const((12, 1, 3, 3), 3), padding=(1, 1), groups=12))
        b = bb.emit(relax.op.add(dw, const((12, 1, 1), 4)))
        s = bb.emit(relax.op.nn.silu(b))
        a = bb.emit(relax.op.nn.avg_pool2d(s, (2, 2), (2, 2)))
        m = bb.emit(relax.op.mean(a, axis=[2, 3], keepdims=True))
        g = bb.emit(relax.op.nn.adaptive_avg_pool2d(a, (1, 1)))
        return relax.op.multiply(m, g)

    mod = module([x], body)
    out = packed(mod)
    assert all(layout == "NCHW4c" for layout, _, _ in convs(out))
    assert [g for _, g, _ in convs(out)] == [1, 1, 12]
    assert ranks_into(out, "relax.concat") == [5]
    # one transform packs the input, one unpacks the result: nothing in between
    assert op_count(out, "relax.layout_transform") == 2
    assert_same_numbers(mod, out)


def test_batch_norm_decomposes_and_packs():
    x = tensor("x", (1, 8, 10, 10))

    def body(bb, x):
        c = bb.emit(relax.op.nn.conv2d(x, const((8, 8, 3, 3), 1)))
        gamma, beta = const((8,), 2), const((8,), 3)
        mean, var = const((8,), 4), relax.const(np.linspace(0.5, 2.0, 8).astype("float32"))
        bn = bb.emit(relax.op.nn.batch_norm(c, gamma, beta, mean, var, axis=1, training=False))
        return relax.op.nn.relu(bb.emit(relax.TupleGetItem(bn, 0)))

    mod = module([x], body)
    out = packed(mod)
    assert op_count(out, "relax.layout_transform") == 2
    assert_same_numbers(mod, out)


def test_rgb_stem_and_two_channel_head_are_padded_and_packed():
    mod = build_example("rgb-stem")
    out = packed(mod)
    assert [layout for layout, _, _ in convs(out)] == ["NCHW4c"] * 3
    # 3 input channels padded to 4; depthwise 16; the 2-channel head padded to 4 then sliced once
    assert convs(out)[2][2] == (1, 1, 32, 32, 4)
    assert op_count(out, "relax.strided_slice") == 1
    assert op_count(out, "relax.layout_transform") == 2
    assert op_count(out, "relax.nn.pad") == 0  # the packing transform pads the RGB input itself
    assert_same_numbers(mod, out)


def test_global_pooling_without_keepdims_reduces_packed():
    x = tensor("x", (1, 6, 8, 8))

    def body(bb, x):
        c = bb.emit(relax.op.nn.relu(relax.op.nn.conv2d(x, const((6, 6, 3, 3), 1), padding=(1, 1))))
        return relax.op.mean(c, axis=[2, 3], keepdims=False)  # torch's x.mean([2, 3])

    mod = module([x], body)
    out = packed(mod)
    # the mean reads the packed (padded) tensor; only its (1, 8, 1, 1, 4) result is unpacked,
    # sliced to 6 channels and reshaped to (1, 6)
    assert ranks_into(out, "relax.mean") == [5]
    assert op_count(out, "relax.layout_transform") == 2
    assert_same_numbers(mod, out)


def test_ops_that_need_nchw_get_exact_channels():
    x = tensor("x", (1, 4, 8, 8))

    def body(bb, x):
        c = bb.emit(relax.op.nn.conv2d(x, const((6, 4, 3, 3), 1), padding=(1, 1)))  # 6 channels: padded to 8
        s = bb.emit(relax.op.nn.softmax(c, axis=1))  # channel softmax: needs the 6 real channels
        return relax.op.add(s, c)

    mod = module([x], body)
    out = packed(mod)
    assert ranks_into(out, "relax.nn.softmax") == [4]
    assert op_count(out, "relax.strided_slice") >= 1
    assert_same_numbers(mod, out)


def test_unsafe_ops_on_padding_fall_back_to_nchw():
    x = tensor("x", (1, 4, 8, 8))

    def body(bb, x):
        c = bb.emit(relax.op.nn.conv2d(x, const((6, 4, 3, 3), 1), padding=(1, 1)))
        s = bb.emit(relax.op.sigmoid(c))  # finite everywhere: stays packed
        return relax.op.log(s)  # log of padding lanes is not guaranteed finite: NCHW

    mod = module([x], body)
    out = packed(mod)
    assert ranks_into(out, "relax.sigmoid") == [5]
    assert ranks_into(out, "relax.log") == [4]
    assert_same_numbers(mod, out)


def test_divide_by_per_channel_constant_pads_the_divisor_with_ones():
    x = tensor("x", (1, 4, 8, 8))

    def body(bb, x):
        c = bb.emit(relax.op.nn.conv2d(x, const((6, 4, 1, 1), 1)))
        d = bb.emit(relax.op.divide(c, relax.const(np.linspace(1, 2, 6).astype("float32").reshape(6, 1, 1))))
        return relax.op.nn.conv2d(d, const((4, 6, 1, 1), 2))

    mod = module([x], body)
    out = packed(mod)
    assert ranks_into(out, "relax.divide") == [5]
    assert_same_numbers(mod, out)


def test_grouped_convs():
    x = tensor("x", (1, 8, 8, 8))

    def body(bb, x):
        g = bb.emit(relax.op.nn.conv2d(x, const((8, 4, 3, 3), 1), groups=2))  # packs
        y = bb.emit(relax.op.nn.conv2d(g, const((6, 8, 1, 1), 2)))  # 6 channels, padded
        return relax.op.nn.conv2d(y, const((6, 3, 1, 1), 3), groups=2)  # 3 per group: stays NCHW

    mod = module([x], body)
    out = packed(mod)
    assert [(layout, groups) for layout, groups, _ in convs(out)] == [("NCHW4c", 2), ("NCHW4c", 1), ("NCHW", 2)]
    assert_same_numbers(mod, out)


def test_split_on_channel_blocks_and_concat_fallback():
    x = tensor("x", (1, 8, 8, 8))

    def body(bb, x):
        c = bb.emit(relax.op.nn.conv2d(x, const((16, 8, 3, 3), 1), padding=(1, 1)))
        parts = bb.emit(relax.op.split(c, [4, 12], axis=1))  # 4 | 8 | 4 channels: packed split
        a = bb.emit(relax.op.nn.relu(bb.emit(relax.TupleGetItem(parts, 1))))
        b = bb.emit(relax.TupleGetItem(parts, 2))
        odd = bb.emit(relax.op.nn.conv2d(b, const((3, 4, 1, 1), 2)))  # 3 channels (padded)
        return relax.op.concat([a, odd], axis=1)  # 8 + 3: padding would land mid-tensor: NCHW

    mod = module([x], body)
    out = packed(mod)
    assert ranks_into(out, "relax.split") == [5]
    assert ranks_into(out, "relax.concat") == [4]
    assert_same_numbers(mod, out)


def test_functions_without_dataflow_blocks_are_untouched():
    bb = relax.BlockBuilder()
    x = tensor("x", (1, 4, 8, 8))
    with bb.function("main", [x]):
        y = bb.emit(relax.op.nn.conv2d(x, const((4, 4, 3, 3), 1)))
        bb.emit_func_output(y)
    mod = bb.get()
    out = packed(mod)
    assert convs(out) == [("NCHW", 1, (1, 4, 6, 6))]


def test_nhwc_conv_then_unary_keeps_the_nhwc_result():
    """A unary op on an NHWC conv's packed output keeps its logical layout: the result is unpacked
    back to NHWC (it used to come back as NCHW, changing the model's signature)."""
    x = tensor("x", (1, 9, 9, 3))

    def body(bb, x):
        c = bb.emit(relax.op.nn.conv2d(x, const((8, 3, 3, 3), 1), padding=(1, 1), data_layout="NHWC", kernel_layout="OHWI"))
        return relax.op.nn.relu(c)

    mod = module([x], body)
    out = packed(mod)
    assert [tuple(int(d) for d in out["main"].body.ty.shape.values)] == [(1, 9, 9, 8)]
    assert ranks_into(out, "relax.nn.relu") == [5]
    assert_same_numbers(mod, out)
