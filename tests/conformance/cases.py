"""The upstream TVM texture-scoping conformance models (tests/python/relax/backend/adreno/
test_transform_annotate_custom_scope.py, listed in ../shared/reference/tvm-texture-scoping.md 5.1),
rebuilt with the BlockBuilder. Weights are parameters, as upstream."""

from tvm import relax

from helpers import module

X = (2, 16, 28, 28)
W = (4, 16, 3, 3)


def _v(name, shape):
    return relax.Var(name, relax.TensorType(shape, "float32"))


_module = module  # one dataflow block returning body(bb, *params), shared with the other tests


def conv(x, w, **kw):
    return relax.op.nn.conv2d(x, w, out_dtype="float32", **kw)


def _conv_then(then, x_shape=X, w_shape=W, extra=()):
    params = [_v("x", x_shape), _v("w", w_shape)] + [_v(n, s) for n, s in extra]
    return _module(params, lambda bb, x, w, *rest: then(bb, bb.emit(conv(x, w)), *rest))


def case_conv2d():
    return _module([_v("x", (2, 64, 56, 56)), _v("w", (32, 64, 3, 3))], lambda bb, x, w: conv(x, w))


def case_conv2d_nchw():
    return _conv_then(lambda bb, c: c)


def case_conv2d_nhwc():
    return _module(
        [_v("x", (2, 28, 28, 16)), _v("w", (4, 3, 3, 16))],
        lambda bb, x, w: relax.op.nn.conv2d(x, w, data_layout="NHWC", kernel_layout="OHWI", out_dtype="float32"),
    )


def case_conv2d_relu():
    return _conv_then(lambda bb, c: relax.op.nn.relu(c))


def case_relu_conv2d_relu():
    return _module([_v("x", X), _v("w", W)], lambda bb, x, w: relax.op.nn.relu(bb.emit(conv(bb.emit(relax.op.nn.relu(x)), w))))


def case_conv2d_relu_tanh():
    return _conv_then(lambda bb, c: relax.op.tanh(bb.emit(relax.op.nn.relu(c))))


def case_conv2d_add():
    return _conv_then(lambda bb, c, bias: relax.op.add(c, bias), extra=[("bias", (2, 4, 26, 26))])


def case_conv2d_fma_relu_conv2d():
    params = [_v("x", (2, 4, 28, 28)), _v("w", (4, 4, 3, 3)), _v("scale", (2, 4, 26, 26)), _v("bias", (2, 4, 26, 26))]

    def body(bb, x, w, scale, bias):
        c = bb.emit(conv(x, w))
        f = bb.emit(relax.op.ewise_fma(c, scale, bias))
        return conv(bb.emit(relax.op.nn.relu(f)), w)

    return _module(params, body)


def case_conv2d_sum():
    return _conv_then(lambda bb, c: relax.op.sum(c, axis=[2, 3]))


def case_conv2d_sum_keepdims():
    return _conv_then(lambda bb, c: relax.op.sum(c, axis=[2, 3], keepdims=True))


def case_conv2d_sum_reduce():
    return _conv_then(lambda bb, c: relax.op.sum(c, axis=[1, 2]))


def case_conv2d_transpose():
    return _conv_then(lambda bb, c: relax.op.permute_dims(c, axes=[3, 2, 1, 0]))


def case_conv2d_expand_dims():
    return _conv_then(lambda bb, c: relax.op.expand_dims(c, axis=(-3, 1)))


def case_conv2d_squeeze():
    return _conv_then(lambda bb, c: relax.op.squeeze(c, axis=[0]), x_shape=(1, 16, 28, 28))


def case_conv2d_strided_slice():
    return _conv_then(
        lambda bb, c: relax.op.strided_slice(c, axes=[1, 2, 3], begin=[0, 0, 0], end=[4, 26, 26], strides=[2, 3, 4])
    )


def case_conv2d_relu_concat():
    return _conv_then(lambda bb, c: relax.op.concat([c, bb.emit(relax.op.nn.relu(c))], axis=1))


def _relu_concat_split(bb, c):
    cat = bb.emit(relax.op.concat([c, bb.emit(relax.op.nn.relu(c))], axis=1))
    return bb.emit(relax.op.split(cat, 2, axis=1))


def case_conv2d_relu_concat_split():
    return _conv_then(lambda bb, c: _relu_concat_split(bb, c))


def case_conv2d_relu_concat_split_transpose_concat():
    def then(bb, c):
        parts = _relu_concat_split(bb, c)
        a = bb.emit(relax.op.permute_dims(bb.emit(relax.TupleGetItem(parts, 0)), axes=[3, 2, 1, 0]))
        b = bb.emit(relax.op.permute_dims(bb.emit(relax.TupleGetItem(parts, 1)), axes=[3, 2, 1, 0]))
        return relax.op.concat([a, b], axis=2)

    return _conv_then(then)


def case_conv2d_maxpool2d():
    return _conv_then(lambda bb, c: relax.op.nn.max_pool2d(c, (2, 2), (2, 2)))


def case_conv2d_avgpool2d():
    return _conv_then(lambda bb, c: relax.op.nn.adaptive_avg_pool2d(c, (13, 13)))


def case_conv2d_softmax():
    return _conv_then(lambda bb, c: relax.op.nn.softmax(c, axis=1))


def case_conv2d_layernorm():
    return _conv_then(
        lambda bb, c, g, b: relax.op.nn.layer_norm(c, g, b, axes=[-2, -1]), extra=[("gamma", (26, 26)), ("beta", (26, 26))]
    )


def case_binary_broadcast():
    return _conv_then(lambda bb, c, bias: relax.op.add(c, bias), extra=[("bias", (26, 26))])


def case_binary_ewise_scalar():
    return _conv_then(lambda bb, c: relax.op.add(c, relax.const(1.0, "float32")))


def case_residual_block():
    params = [_v("x", (2, 32, 40, 40)), _v("w1", (32, 32, 2, 2)), _v("w2", (32, 32, 1, 1)), _v("w3", (32, 32, 2, 2)), _v("bias", (1, 32, 1, 1))]

    def body(bb, x, w1, w2, w3, bias):
        g = bb.emit(relax.op.nn.relu(bb.emit(relax.op.add(bb.emit(conv(x, w1, strides=[2, 2])), bias))))
        g3 = bb.emit(conv(g, w2))
        b1 = bb.emit(relax.op.multiply(bias, relax.const(0.15, "float32")))
        g5 = bb.emit(relax.op.nn.relu(bb.emit(relax.op.add(g3, b1))))
        return relax.op.nn.relu(bb.emit(conv(g5, w3, strides=[2, 2])))

    return _module(params, body)


def _three_convs(w3_out):
    params = [
        _v("x", (2, 32, 40, 40)), _v("w1", (96, 32, 2, 2)), _v("w2", (32, 96, 2, 2)), _v("w3", (w3_out, 96, 2, 2)),
        _v("bias1", (1, 96, 1, 1)), _v("bias2", (1, 32, 1, 1)),
    ]  # fmt: skip

    def body(bb, x, w1, w2, w3, bias1, bias2):
        g2 = bb.emit(relax.op.nn.relu(bb.emit(relax.op.add(bb.emit(conv(x, w1, strides=[2, 2])), bias1))))
        g3 = bb.emit(conv(g2, w2, strides=[2, 2]))
        bb.emit(relax.op.nn.relu(bb.emit(relax.op.add(g3, bias2))))  # dead, as upstream
        g6 = bb.emit(conv(g2, w3, strides=[2, 2]))
        return relax.op.concat([g3, g6], axis=1)

    return _module(params, body)


def case_conv2d_conv2d_fallback_to_buffer_conv2d():
    return _three_convs(5)


def case_conv2d_conv2d_conv2d_concat():
    return _three_convs(8)


def case_pooling_branching_texture_params():
    params = [
        _v("x", (2, 32, 40, 40)), _v("w1", (32, 32, 1, 1)), _v("w2", (32, 32, 2, 2)), _v("w3", (32, 32, 1, 1)),
        _v("w4", (32, 32, 2, 2)), _v("bias1", (1, 32, 1, 1)),
    ]  # fmt: skip

    def body(bb, x, w1, w2, w3, w4, bias1):
        g1 = bb.emit(relax.op.nn.max_pool2d(bb.emit(conv(x, w1)), (2, 2), (2, 2)))
        g2 = bb.emit(conv(g1, w2, padding=[0, 0, 1, 1]))
        bb.emit(relax.op.nn.relu(bb.emit(relax.op.add(g2, bias1))))  # dead, as upstream
        g5 = bb.emit(conv(g1, w3))
        g6 = bb.emit(conv(g1, w4, padding=[0, 1, 1, 0]))
        bb.emit(relax.op.nn.relu(g6))  # dead, as upstream
        return relax.op.add(bb.emit(relax.op.add(g2, g5)), g6)

    return _module(params, body)


def _injective(second_mul_operand):
    params = [_v("x", (1, 4, 40, 40)), _v("w1", (4, 4, 3, 3)), _v("w2", (4, 4, 3, 3)), _v("w3", (4, 4, 3, 3))]

    def body(bb, x, w1, w2, w3):
        mean = bb.emit(relax.op.mean(x, axis=[1], keepdims=True))
        c1 = bb.emit(conv(x, w1, padding=[1, 1, 1, 1]))
        c2 = bb.emit(conv(c1, w2, padding=[1, 1, 1, 1]))
        ad3 = bb.emit(relax.op.add(c1, c2))
        ad1 = bb.emit(relax.op.add(mean, c1))
        ad2 = bb.emit(relax.op.multiply(ad1, c1 if second_mul_operand == 1 else c2))
        return relax.op.add(ad3, ad2) if second_mul_operand == 1 else relax.op.add(ad2, ad3)

    return _module(params, body)


def case_injective_inputs1():
    return _injective(1)


def case_injective_nwo_inputs2():
    return _injective(2)


CASES = {name[len("case_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}
