"""NCHW4c / OIHW4o conv2d as a TE compute, for every ``groups`` (plain, depthwise, grouped).

TVM's ``topi.nn.conv2d_NCHWc_OIHWo`` divides by ``oc_chunk // groups``, which is zero for
depthwise convs (upstream's "Divide by zero" on MobileNetV2). Here the group of output channel
``oc`` is ``oc // (C_out / groups)`` on the *unpacked* channel index, so any group structure works,
including channel counts padded to a multiple of 4. The reduction block is named
``conv2d_NCHWc_OIHWo`` with loops ``n, oc_chunk, oh, ow, oc_block, ic, kh, kw`` (the order TVM's
adreno conv schedule expects) and the output VDevice comes from the call's ``ty_args``.
"""

from __future__ import annotations

from typing import Sequence

from tvm import relax, te, topi


LANES = 4


def _pair(v: Sequence[int]):
    v = [int(x) for x in v]
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def conv2d_nchw4c_compute(data: te.Tensor, kernel: te.Tensor, strides, padding, dilation, groups: int, out_dtype: str):
    n, ic_chunk, ih, iw, ic_bn = (int(x) for x in data.shape)
    oc_chunk, ic_per_group, kh, kw, oc_bn = (int(x) for x in kernel.shape)
    cin, cout = ic_chunk * ic_bn, oc_chunk * oc_bn
    if cin % groups or cout % groups or cin // groups != ic_per_group:
        raise ValueError(
            f"conv2d NCHW4c: {cin} input / {cout} output channels do not form {groups} groups of {ic_per_group} inputs"
        )
    oc_per_group = cout // groups
    sh, sw = _pair(strides)
    dh, dw = _pair(dilation)
    pad = [int(p) for p in padding]
    pt, pl, pb, pr = (pad * 4)[:4] if len(pad) == 1 else (pad[0], pad[1], pad[0], pad[1]) if len(pad) == 2 else pad
    oh = (ih + pt + pb - (kh - 1) * dh - 1) // sh + 1
    ow = (iw + pl + pr - (kw - 1) * dw - 1) // sw + 1
    if pt or pl or pb or pr:
        data = topi.nn.pad(data, (0, 0, pt, pl, 0), (0, 0, pb, pr, 0), name="conv2d_data_pad")
    ric = te.reduce_axis((0, ic_per_group), name="ic")
    rkh = te.reduce_axis((0, kh), name="kh")
    rkw = te.reduce_axis((0, kw), name="kw")

    def compute(b, occ, y, x, ocb):
        oc = occ * oc_bn + ocb
        if groups == 1:  # (written out so schedules see the channel does not depend on the lane)
            c = ric
        elif ic_per_group == 1 and oc_per_group == 1:  # depthwise: each channel reads itself
            c = oc
        else:
            c = (oc // oc_per_group) * ic_per_group + ric
        value = data[b, c // ic_bn, y * sh + rkh * dh, x * sw + rkw * dw, c % ic_bn].astype(out_dtype)
        return te.sum(value * kernel[occ, ric, rkh, rkw, ocb].astype(out_dtype), axis=[ric, rkh, rkw])

    return te.compute((n, oc_chunk, oh, ow, oc_bn), compute, name="conv2d_NCHWc_OIHWo", tag="conv2d_NCHWc_OIHWo")


def legalize_conv2d_nchw4c(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    """``LegalizeOps`` entry for ``relax.nn.conv2d``: NCHW4c calls become ``call_tir`` of
    :func:`conv2d_nchw4c_compute`; other layouts use TVM's own legalizer."""
    a = call.attrs
    if (str(a.data_layout), str(a.kernel_layout), str(a.out_layout)) != ("NCHW4c", "OIHW4o", "NCHW4c"):
        from tvm.relax.transform.legalize_ops.nn import _nn_conv2d

        return _nn_conv2d(bb, call)
    out_dtype = str(a.out_dtype) if str(a.out_dtype) not in ("", "void", "None") else str(call.args[0].ty.dtype)
    kwargs = {"primfunc_name_hint": "conv2d_NCHWc_OIHWo"}
    if len(call.ty_args) == 1:
        kwargs["ty_args"] = list(call.ty_args)
    return bb.call_te(
        conv2d_nchw4c_compute,
        call.args[0],
        call.args[1],
        list(a.strides),
        list(a.padding),
        list(a.dilation),
        int(a.groups),
        out_dtype,
        **kwargs,
    )
