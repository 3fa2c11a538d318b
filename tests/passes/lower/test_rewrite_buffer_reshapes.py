"""RewriteBufferReshapes: reshape kernels become views on buffers only."""

import numpy as np
from tvm import relax

import relax_vk
from relax_vk.passes import RewriteBufferReshapes
from relax_vk.pipeline import lowering_stage

from helpers import const, module, tensor


def _global_pool():
    x = tensor("x", (1, 8, 6, 6))

    def body(bb, x):
        c = bb.emit(relax.op.nn.conv2d(x, const((8, 8, 3, 3), 1), padding=(1, 1)))
        pooled = bb.emit(relax.op.mean(c, axis=[2, 3], keepdims=False))
        return relax.op.nn.softmax(pooled)  # reshape results bound to dataflow vars are rewritten

    return module([x], body)


def _calls(mod):
    out = []
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call):
                name = v.args[0].name_hint if v.op.name == "relax.call_tir" else v.op.name
                out.append((name, str(b.var.ty.vdevice.memory_scope) if b.var.ty.vdevice is not None else None))
    return out


def test_texture_reading_reshape_kernel_stays_a_kernel():
    """The unpacking transform of the pooled texture fused with the reshape has a reshape pattern
    (its index arithmetic is the identity on memory order); TVM's pass would make it a view of a
    texture."""
    lowered = lowering_stage()(relax_vk.scope_pipeline()(_global_pool()))
    fused = [n for n, _ in _calls(lowered) if "layout_transform" in n and "reshape" in n]
    assert fused, _calls(lowered)
    assert relax.analysis.has_reshape_pattern(lowered[fused[0]])
    upstream = relax.transform.RewriteDataflowReshape()(lowered)
    assert fused[0] not in [n for n, _ in _calls(upstream)]  # upstream: a view of the texture
    ours = RewriteBufferReshapes()(lowered)
    assert fused[0] in [n for n, _ in _calls(ours)]


def test_buffer_reshape_kernel_becomes_a_view():
    x = tensor("x", (2, 3, 4))

    def body(bb, x):
        r = bb.emit(relax.op.reshape(bb.emit(relax.op.nn.relu(x)), (6, 4)))
        return relax.op.nn.softmax(r)

    mod = relax.transform.LegalizeOps()(module([x], body))
    out = RewriteBufferReshapes()(mod)
    names = [n for n, _ in _calls(out)]
    assert "relax.reshape" in names and "reshape" not in names
    from relax_vk.analysis.reference import run_on_cpu

    a = np.random.default_rng(0).standard_normal((2, 3, 4)).astype("float32")
    r = np.maximum(a, 0).reshape(6, 4)
    e = np.exp(r - r.max(axis=1, keepdims=True))
    np.testing.assert_allclose(run_on_cpu(out, [a])[0], e / e.sum(axis=1, keepdims=True), rtol=1e-5)


def test_a_run_time_reshape_on_buffers_becomes_a_view_when_the_counts_agree():
    """``[S, 64] -> [S, 4, 16]``: element counts ``S*64`` and ``S*4*16``, provably equal: a view;
    ``[S, 64] -> [T, 64]`` (another dim): not provably equal, the kernel stays."""
    from tvm import tirx

    S, T = tirx.Var("S", "int64"), tirx.Var("T", "int64")
    x = relax.Var("x", relax.TensorType((S, 64), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            heads = bb.emit(relax.op.reshape(bb.emit(relax.op.nn.relu(x)), (S, 4, 16)))
            out = bb.emit_output(relax.op.add(heads, heads))
        bb.emit_func_output(out)
    mod = relax.transform.LegalizeOps()(bb.get())
    names = [n for n, _ in _calls(RewriteBufferReshapes()(mod))]
    assert "relax.reshape" in names and "reshape" not in names
    from relax_vk.passes.lower.rewrite_buffer_reshapes import _same_count

    assert _same_count(S * 64, S * 4 * 16) and not _same_count(S * 64, T * 64) and not _same_count(None, 64)
