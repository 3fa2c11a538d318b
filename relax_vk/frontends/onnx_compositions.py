"""ONNX ops TVM's importer has no converter for, written as compositions of Relax ops that the
layout and scope passes already know.

- ``LpNormalization`` (``p`` 1 or 2 along ``axis``): ``x / ||x||_p``, and 0 where the norm is 0, as
  onnxruntime gives (the definition divides by it).
- ``Celu`` (``alpha``): ``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``.
"""

from __future__ import annotations

from ..core.errors import UnsupportedError
from .errors import onnx_node


def convert_lp_normalization(bb, inputs, attrs):
    from tvm import relax

    x = inputs[0]
    p, axis = int(attrs.get("p", 2)), int(attrs.get("axis", -1))
    if p not in (1, 2):
        raise UnsupportedError(f"{onnx_node(attrs, 'LpNormalization')}: p={p}: the operator defines 1 and 2")
    dtype = str(x.ty.dtype)
    R = relax.op
    if p == 2:
        norm = bb.normalize(R.sqrt(R.sum(R.multiply(x, x), axis=[axis], keepdims=True)))
    else:
        norm = bb.normalize(R.sum(R.abs(x), axis=[axis], keepdims=True))
    zero, one = relax.const(0.0, dtype), relax.const(1.0, dtype)
    return R.divide(x, bb.normalize(R.where(R.equal(norm, zero), one, norm)))  # (x is 0 where its norm is)


def convert_celu(bb, inputs, attrs):
    from tvm import relax

    x = inputs[0]
    dtype = str(x.ty.dtype)
    alpha = float(attrs.get("alpha", 1.0))
    R = relax.op
    a = relax.const(alpha, dtype)
    negative = R.multiply(a, R.subtract(R.exp(R.divide(x, a)), relax.const(1.0, dtype)))
    return R.add(R.maximum(x, relax.const(0.0, dtype)), R.minimum(bb.normalize(negative), relax.const(0.0, dtype)))


#: op type -> converter
CONVERTERS = {"LpNormalization": convert_lp_normalization, "Celu": convert_celu}
