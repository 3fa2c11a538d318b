"""``relax.layout_transform`` as a gather over the *output* space.

TVM's legalizer iterates over the input and scatters into the output through
``sch.transform_layout``; when the output is a texture, the 4-lane texel index then comes from an
outer input loop, vectorisation fails, and the lowered kernel writes a whole texel per scalar
(OpenCL accepts it and broadcasts the scalar: wrong numbers, no error; found by running on pocl).
Iterating over the output with the inverse index map puts the texel lane innermost, so schedules
vectorise it and each store writes one complete texel. Maps without an inverse (padding ones) use
TVM's legalizer; padding maps select the pad value per element (clamped reads, no conditional
store). A packing kernel is marked opaque (``op_pattern`` 8, as TVM's is): fused with a producer
that has conditionals, its texel store could not be vectorised. An unpacking kernel writes a plain
tensor and is injective, so it fuses with the slice or reshape that follows it.
"""

from __future__ import annotations

import tvm
from tvm import relax, te
from tvm.tirx import IndexMap

OPAQUE = 8
INJECTIVE = 2


def legalize_layout_transform(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    index_map = call.attrs.index_map
    pad_value = call.attrs.pad_value
    data = call.args[0]
    shape = data.ty.shape.values if isinstance(data.ty, relax.TensorType) and data.ty.shape is not None else None
    if shape is None:
        return _upstream(bb, call)
    try:
        inverse, padding = index_map.non_surjective_inverse(list(shape))
    except Exception:  # not injective on this shape
        return _upstream(bb, call)
    out_shape = index_map.map_shape(list(shape))
    padded = not (isinstance(padding, tvm.tirx.IntImm) and int(padding) == 0)
    if padded and pad_value is None:
        return _upstream(bb, call)
    fill = pad_value.value if padded else None

    def source(x, idx):
        src = inverse.map_indices(list(idx))
        if not padded:
            return x(*src)
        # padding elements read an in-bounds element (clamped) and select the pad value: a select,
        # not a conditional store, so the texel store stays one vectorised write
        clamped = [tvm.tirx.max(tvm.tirx.min(i, int(n) - 1), 0) for i, n in zip(src, shape)]
        in_pad = IndexMap(inverse.initial_indices, [padding], None).map_indices(list(idx))[0]
        return tvm.tirx.Select(in_pad, tvm.tirx.const(fill, data.ty.dtype), x(*clamped))

    def compute(x):
        return te.compute(out_shape, lambda *idx: source(x, idx), name="te_layout_transform")

    call_tir = bb.call_te(compute, data, primfunc_name_hint="te_layout_transform")
    gvar = call_tir.args[0]
    # a transform whose output can be a texture (packed: last axis of 4 lanes) is opaque; an
    # unpacking one writes a plain tensor and stays injective, so it fuses with the slice or
    # reshape after it and the unpacked intermediate never exists
    packs = len(out_shape) == 5 and int(out_shape[-1]) == 4
    bb.update_func(gvar, bb.get()[gvar].with_attr("op_pattern", OPAQUE if packs else INJECTIVE))
    return call_tir


def _upstream(bb, call):
    return tvm.ir.Op.get("relax.layout_transform").get_attr("FLegalize")(bb, call)
