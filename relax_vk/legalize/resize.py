"""``relax.image.resize2d`` where TVM's legalizer divides by zero.

With ``coordinate_transformation_mode="align_corners"``, TOPI scales source coordinates by
``(in - 1) / (out - 1)``, which is a division by zero when an output spatial extent is 1 (the
build fails with "Divide by zero"); PyTorch and ONNX define that axis' only sample as source index
0. This legalizer computes those resizes itself (nearest and linear, the methods exporters emit
with ``align_corners``), for NCHW and packed NCHW4c data alike (H and W are axes 2 and 3), of an
input of static or run-time size, and hands every other resize to TVM's legalizer.

It also computes nearest resizes with ``asymmetric`` coordinates and ``floor`` rounding
(``torch.nn.functional.interpolate``'s ``nearest``) of an input with run-time spatial dims to a
static size: there TOPI asks whether the scale is an integer of a symbolic division and crashes
(``'Div' object has no attribute 'value'``). The source index is TOPI's own general form,
``floor(dst * (in / out))`` in float32, clamped to ``in - 1``.
"""

from __future__ import annotations

import tvm
from tvm import relax, te, tirx


def _upstream(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    return tvm.ir.Op.get("relax.image.resize2d").get_attr("FLegalize")(bb, call)


def _static(values):
    out = []
    for v in values:
        if not isinstance(v, (tirx.IntImm, int)) and not hasattr(v, "value"):
            return None
        out.append(int(getattr(v, "value", v)))
    return out


def _nearest_floor_of_run_time_input(bb: relax.BlockBuilder, call: relax.Call) -> "relax.Expr | None":
    a = call.attrs
    data = call.args[0]
    if not (str(a.method) == "nearest_neighbor" and str(a.coordinate_transformation_mode) == "asymmetric"
            and str(a.rounding_method) in ("floor", "") and str(a.layout) in ("NCHW", "NCHW4c")):  # fmt: skip
        return None
    if not isinstance(data.ty, relax.TensorType) or data.ty.shape is None or call.ty.shape is None:
        return None
    in_shape, out_shape = list(data.ty.shape.values), list(call.ty.shape.values)
    if _static(in_shape[2:4]) is not None or _static(out_shape[2:4]) is None:
        return None

    def compute(x):
        def source(index, n_in, n_out):
            scale = tirx.Cast("float32", n_in) / tirx.const(float(n_out), "float32")
            return tvm.tirx.min(tirx.Cast("int64", tvm.tirx.floor(tirx.Cast("float32", index) * scale)), n_in - 1)

        def sample(*idx):
            return x[(idx[0], idx[1], source(idx[2], x.shape[2], int(out_shape[2])), source(idx[3], x.shape[3], int(out_shape[3])), *idx[4:])]

        return te.compute(out_shape, sample, name="resize2d_nearest")

    return bb.call_te(compute, data, primfunc_name_hint="resize2d_nearest")


def legalize_resize2d(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    nearest = _nearest_floor_of_run_time_input(bb, call)
    if nearest is not None:
        return nearest
    a = call.attrs
    data = call.args[0]
    shape = list(data.ty.shape.values) if isinstance(data.ty, relax.TensorType) and data.ty.shape is not None else None
    out_shape = _static(call.ty.shape.values) if isinstance(call.ty, relax.TensorType) and call.ty.shape is not None else None
    degenerate = (
        str(a.coordinate_transformation_mode) == "align_corners"
        and str(a.layout) in ("NCHW", "NCHW4c")
        and str(a.method) in ("nearest_neighbor", "linear")
        and shape is not None
        and out_shape is not None
        and 1 in out_shape[2:4]
    )
    if not degenerate:
        return _upstream(bb, call)
    out_h, out_w = out_shape[2], out_shape[3]
    method, rounding = str(a.method), str(a.rounding_method) or "round"

    def source(index, n_in, n_out):
        if n_out == 1:
            return tirx.const(0.0, "float32")
        if not isinstance(n_in, int):  # (as TOPI scales a run-time size: in float32)
            return tirx.Cast("float32", index) * (tirx.Cast("float32", n_in - 1) / tirx.const(float(n_out - 1), "float32"))
        return tirx.Cast("float32", index) * tirx.const((n_in - 1) / (n_out - 1), "float32")

    def compute(x):
        in_h, in_w = (int(d) if isinstance(d, tirx.IntImm) else d for d in x.shape[2:4])  # (a run-time size: its expression)

        def sample(*idx):
            y, xx = source(idx[2], in_h, out_h), source(idx[3], in_w, out_w)
            rest = list(idx[4:])
            if method == "nearest_neighbor":
                pick = {"floor": tvm.tirx.floor, "ceil": tvm.tirx.ceil}.get(rounding, tvm.tirx.round)
                iy = tvm.tirx.min(tirx.Cast("int64", pick(y)), in_h - 1)
                ix = tvm.tirx.min(tirx.Cast("int64", pick(xx)), in_w - 1)
                return x[(idx[0], idx[1], iy, ix, *rest)]
            y0, x0 = tvm.tirx.floor(y), tvm.tirx.floor(xx)
            wy, wx = y - y0, xx - x0
            iy0, ix0 = tirx.Cast("int64", y0), tirx.Cast("int64", x0)
            iy1, ix1 = tvm.tirx.min(iy0 + 1, in_h - 1), tvm.tirx.min(ix0 + 1, in_w - 1)

            def at(iy, ix):
                return tirx.Cast("float32", x[(idx[0], idx[1], iy, ix, *rest)])

            top = at(iy0, ix0) * (1.0 - wx) + at(iy0, ix1) * wx
            bottom = at(iy1, ix0) * (1.0 - wx) + at(iy1, ix1) * wx
            return tirx.Cast(x.dtype, top * (1.0 - wy) + bottom * wy)

        return te.compute(out_shape, sample, name="resize2d_align_corners")

    return bb.call_te(compute, data, primfunc_name_hint="resize2d_align_corners")
