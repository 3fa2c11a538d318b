"""``relax.nn.rms_norm`` over every axis of its input, which TVM's legalizer cannot index.

TOPI's ``rms_norm`` sums the squares with the reduced axes dropped and reads that sum back by the
output's non-reduced indices. When the axes cover the whole input (ONNX ``RMSNormalization`` with
``axis=0``, or ``axis=-rank``) the sum is TOPI's one-element ``(1,)`` tensor read with no index:
"Tensor dimension mismatch in read ndim = 1, indices.size=0" (TVM's own llvm build fails the same
way). This legalizer computes those norms itself, the sum kept with unit dimensions so any set of
axes indexes it, and hands every other rms_norm to TVM's legalizer.

Result: ``y = x / sqrt(mean(x^2 over axes) + epsilon) * weight`` (``weight`` shaped like the
normalized axes), accumulated in float32 for float16/bfloat16 inputs as TOPI does.
"""

from __future__ import annotations

from typing import Sequence

import tvm
from tvm import relax, te, tirx


def _upstream(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    return tvm.ir.Op.get("relax.nn.rms_norm").get_attr("FLegalize")(bb, call)


def rms_norm_compute(x: te.Tensor, weight: te.Tensor, axes: Sequence[int], epsilon: float) -> te.Tensor:
    """RMS norm of ``x`` over ``axes`` (any subset, negative allowed), scaled by ``weight``."""
    ndim = len(x.shape)
    axes = sorted({int(a) % ndim for a in axes})
    acc = "float32" if str(x.dtype) in ("float16", "bfloat16") else str(x.dtype)
    count = 1
    for a in axes:
        count *= int(x.shape[a])
    kept = [1 if i in axes else x.shape[i] for i in range(ndim)]

    def square_sum(*idx):
        rs = [te.reduce_axis((0, x.shape[a]), name=f"k{a}") for a in axes]
        full = list(idx)
        for a, r in zip(axes, rs):
            full[a] = r
        v = x[tuple(full)].astype(acc)
        return te.sum(v * v, axis=rs)

    sums = te.compute(kept, square_sum, name="rms_norm_square_sum")

    def value(*idx):
        s = sums[tuple(0 if i in axes else idx[i] for i in range(ndim))]
        scale = tirx.rsqrt(s / tirx.const(float(count), acc) + tirx.const(float(epsilon), acc))
        w = weight[tuple(idx[a] for a in axes[len(axes) - len(weight.shape) :])].astype(acc)
        return (x[idx].astype(acc) * scale * w).astype(x.dtype)

    return te.compute(x.shape, value, name="rms_norm")


def legalize_rms_norm(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    """relax_vk's compute when ``call`` normalizes over every axis, else TVM's legalizer."""
    data = call.args[0]
    ndim = data.ty.ndim if isinstance(data.ty, relax.TensorType) else -1
    axes = {int(a) % ndim for a in call.attrs.axes} if ndim > 0 else set()
    if ndim <= 0 or len(axes) < ndim:
        return _upstream(bb, call)
    return bb.call_te(rms_norm_compute, data, call.args[1], list(axes), float(call.attrs.epsilon), primfunc_name_hint="rms_norm")
