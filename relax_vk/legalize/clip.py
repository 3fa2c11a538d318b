"""``clip`` of an integer tensor with an open bound (PyTorch's ``clamp(max=4)`` of int64 indices:
the importer writes the missing bound as an infinity).

TVM's legalizer casts both bounds to the tensor's dtype, and an infinite one crashes the cast
("Cannot convert infinity to BigInt"). An infinite bound of an integer clip clamps nothing, so it
becomes the dtype's own limit; the call is then TVM's legalizer's.
"""

from __future__ import annotations

import math

import numpy as np
import tvm
from tvm import relax, tirx
from tvm.relax.transform.legalize_ops.common import _try_convert_to_scalar_const


def legalize_clip(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    upstream = tvm.ir.Op.get("relax.clip").get_attr("FLegalize")
    dtype = str(call.ty.dtype) if isinstance(call.ty, relax.TensorType) else ""
    if not dtype.startswith(("int", "uint")):
        return upstream(bb, call)
    info = np.iinfo(dtype)
    bounds = []
    for arg, limit in zip(call.args[1:], (info.min, info.max)):
        value = arg.value if isinstance(arg, (tirx.FloatImm, tirx.IntImm)) else _try_convert_to_scalar_const(arg, python_native=True)
        if isinstance(value, float) and math.isinf(value):
            value = int(limit)
        elif isinstance(value, float):
            value = math.ceil(value) if limit == info.min else math.floor(value)
        bounds.append(value)
    if not all(isinstance(v, int) for v in bounds):
        return upstream(bb, call)
    return upstream(bb, relax.op.clip(call.args[0], bounds[0], bounds[1]))
