"""LegalizeWithScopes keeps the decided VDevice on every call_tir."""

from tvm import relax

from relax_vk.passes import LegalizeWithScopes

from helpers import TARGET

TEX = relax.VDevice(TARGET, 0, "global.texture")
GLB = relax.VDevice(TARGET, 0, "global")


def _typed(name, shape, vdev):
    return relax.Var(name, relax.TensorType(shape, "float32", vdev))


def _one_call(make, params, out_vdev, out_shape):
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            call = make(*params)
            call = relax.Call(call.op, call.args, call.attrs, [relax.TensorType(out_shape, "float32", out_vdev)])
            gv = bb.emit_output(call)
        bb.emit_func_output(gv)
    mod = bb.get()
    mod.update_global_info("vdevice", [GLB, TEX])
    return mod


def _out_vdevice(mod):
    for b in mod["main"].body.blocks[0].bindings:
        if isinstance(b.value, relax.Call) and b.value.op.name == "relax.call_tir":
            vdev = b.value.ty_args[0].vdevice
            return None if vdev is None else str(vdev.memory_scope)
    raise AssertionError("no call_tir")


def test_kwargs_legalizer_keeps_vdevice():
    """TVM's default conv2d legalizer passes tensors as keyword arguments: its call_tir has no VDevice."""
    x, w = _typed("x", (1, 4, 8, 8), GLB), _typed("w", (4, 4, 3, 3), GLB)
    mod = _one_call(lambda x, w: relax.op.nn.conv2d(x, w), [x, w], GLB, (1, 4, 6, 6))
    assert _out_vdevice(relax.transform.LegalizeOps()(mod)) is None  # upstream drops it
    assert _out_vdevice(LegalizeWithScopes()(mod)) == "global"


def test_pool_output_scope_differs_from_input():
    x = _typed("x", (1, 2, 8, 8, 4), TEX)
    mod = _one_call(lambda x: relax.op.nn.max_pool2d(x, (2, 2), (2, 2), layout="NCHW4c"), [x], GLB, (1, 2, 4, 4, 4))
    assert _out_vdevice(relax.transform.LegalizeOps()(mod)) == "global.texture"  # upstream: the input's
    assert _out_vdevice(LegalizeWithScopes()(mod)) == "global"


def test_depthwise_nchw4c_conv_legalizes():
    """Upstream's adreno conv legalizer divides by zero on depthwise convs."""
    x, w = _typed("x", (1, 2, 8, 8, 4), TEX), _typed("w", (2, 1, 3, 3, 4), GLB)
    make = lambda x, w: relax.op.nn.conv2d(  # noqa: E731
        x, w, padding=(1, 1), groups=8, data_layout="NCHW4c", kernel_layout="OIHW4o", out_layout="NCHW4c"
    )
    mod = _one_call(make, [x, w], TEX, (1, 2, 8, 8, 4))
    out = LegalizeWithScopes()(mod)
    assert _out_vdevice(out) == "global.texture"
