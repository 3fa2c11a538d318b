"""``relax.layout_transform`` as a gather over the *output* space.

TVM's legalizer iterates over the input and scatters into the output through
``sch.transform_layout``; when the output is a texture, the 4-lane texel index then comes from an
outer input loop, vectorisation fails, and the lowered kernel writes a whole texel per scalar
(OpenCL accepts it and broadcasts the scalar: wrong numbers, no error; found by running on pocl).
Iterating over the output with the inverse index map puts the texel lane innermost, so schedules
vectorise it and each store writes one complete texel. Maps without an inverse (padding ones) use
TVM's legalizer. The kernel is marked opaque (``op_pattern`` 8, as TVM's is): fused with a
producer that has conditionals (a channel ``pad``), its texel store could not be vectorised.
"""

from __future__ import annotations

import tvm
from tvm import relax, te

OPAQUE = 8


def legalize_layout_transform(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    index_map = call.attrs.index_map
    pad_value = call.attrs.pad_value
    data = call.args[0]
    shape = data.ty.shape.values if isinstance(data.ty, relax.TensorType) and data.ty.shape is not None else None
    if pad_value is not None or shape is None:
        return _upstream(bb, call)
    try:
        inverse = index_map.inverse(list(shape))
    except Exception:  # not bijective on this shape
        return _upstream(bb, call)
    out_shape = index_map.map_shape(list(shape))

    def compute(x):
        return te.compute(out_shape, lambda *idx: x(*inverse.map_indices(list(idx))), name="te_layout_transform")

    call_tir = bb.call_te(compute, data, primfunc_name_hint="te_layout_transform")
    gvar = call_tir.args[0]
    bb.update_func(gvar, bb.get()[gvar].with_attr("op_pattern", OPAQUE))
    return call_tir


def _upstream(bb, call):
    return tvm.ir.Op.get("relax.layout_transform").get_attr("FLegalize")(bb, call)
