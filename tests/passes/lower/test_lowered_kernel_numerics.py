"""Kernel-level numbers for the RFC example: each texture-writing (and texture-reading) kernel of
the lowered module, with its scopes mapped back to buffers and built for llvm, computes the
packing/conv that numpy computes. A wrong index map or flattening cannot hide behind the
end-to-end identity of a later layout transform."""

import numpy as np
import tvm
from tvm import relax, tirx

import relax_vk
from relax_vk.models import build_example
from relax_vk.pipeline import scope_pipeline
from relax_vk.passes import LegalizeWithScopes
from relax_vk.passes import FoldScopeCopies, SpecializeKernelScopes


def _unscheduled_kernels():
    target = relax_vk.target.opencl()
    mod = scope_pipeline(target)(build_example("rfc-conv2d"))
    seq = tvm.transform.Sequential(
        [LegalizeWithScopes(), relax.transform.AnnotateTIROpPattern(), relax.transform.FuseOps(), relax.transform.FuseTIR(),
         relax.transform.DeadCodeElimination(), FoldScopeCopies(), SpecializeKernelScopes()]
    )
    return seq(mod)


def _as_buffers(func):
    """The PrimFunc with every parameter buffer back in global memory."""
    mapping = {}
    for p in func.params:
        if str(p.ty.storage_scope) != "global":
            mapping[p] = tirx.decl_buffer(p.ty.shape, p.ty.dtype, p.name, scope="global")
    func = func.specialize(mapping).without_attr("relax_vk.scoped")
    return func.without_attr("target") if func.attrs is not None and "target" in func.attrs else func


def _run(func, *arrays, out_shape):
    lib = tvm.compile(tvm.IRModule({"main": _as_buffers(func).with_attr("global_symbol", "main")}), target="llvm")
    out = tvm.runtime.tensor(np.zeros(out_shape, "float32"))
    lib["main"](*[tvm.runtime.tensor(a) for a in arrays], out)
    return out.numpy()


def _pack(x):
    n, c, h, w = x.shape
    return x.reshape(n, c // 4, 4, h, w).transpose(0, 1, 3, 4, 2)


def _pack_weight(w):
    o, i, kh, kw = w.shape
    return w.reshape(o // 4, 4, i, kh, kw).transpose(0, 2, 3, 4, 1)


def test_rfc_texture_kernels_compute_the_right_numbers():
    mod = _unscheduled_kernels()
    scopes = {}
    for b in mod["main"].body.blocks[0].bindings:
        v = b.value
        if isinstance(v, relax.Call) and v.op.name == "relax.call_tir":
            scopes[v.args[0].name_hint] = str(v.ty_args[0].vdevice.memory_scope)
    assert scopes["te_layout_transform"] == "global.texture"
    assert scopes["te_layout_transform1"] == "global.texture-weight"
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 64, 56, 56)).astype("float32")
    w = rng.standard_normal((32, 64, 3, 3)).astype("float32")
    px = _run(mod[mod.get_global_var("te_layout_transform")], x, out_shape=(2, 16, 56, 56, 4))
    np.testing.assert_array_equal(px, _pack(x))
    pw = _run(mod[mod.get_global_var("te_layout_transform1")], w, out_shape=(8, 64, 3, 3, 4))
    np.testing.assert_array_equal(pw, _pack_weight(w))
    conv = [gv for gv in mod.get_global_vars() if gv.name_hint.startswith("conv2d_NCHWc_OIHWo")][0]
    y = _run(mod[conv], px, pw, out_shape=(2, 8, 54, 54, 4))
    # reference: direct convolution in numpy (via einsum over sliding windows)
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))  # n, c, 54, 54, 3, 3
    ref = np.einsum("nchwij,ocij->nohw", windows, w, optimize=True)
    np.testing.assert_allclose(y, _pack(ref), rtol=1e-4, atol=1e-3)
