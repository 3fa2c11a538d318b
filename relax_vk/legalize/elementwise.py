"""Legalizers for Relax ops that TVM 0.27 has none for (they would stay opaque and fail to build)."""

from __future__ import annotations

from tvm import relax, te, tirx, topi


def legalize_ewise_fma(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    """``ewise_fma(a, b, c) = a * b + c``, elementwise."""
    return bb.call_te(lambda a, b, c: topi.add(topi.multiply(a, b), c), *call.args, primfunc_name_hint="ewise_fma")


def legalize_round(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    """``round`` to the nearest integer, halves to even (``tirx.nearbyint``: OpenCL's ``rint``,
    WGSL's ``round``): what ONNX ``Round``, ``torch.round`` and ``QuantizeLinear`` mean. Upstream
    legalizes it with C's ``round``, halves away from zero, so 2.5 became 3 where every frontend
    that makes the op says 2 (and a quantized model's values landed one step off at exact ties)."""
    x = call.args[0]
    if not str(x.ty.dtype).startswith(("float", "bfloat")):
        return bb.call_te(topi.round, x, primfunc_name_hint="round")
    return bb.call_te(lambda t: te.compute(t.shape, lambda *i: tirx.nearbyint(t(*i)), name="round", tag="elemwise"), x, primfunc_name_hint="round")


#: op name -> legalizer, for ops without an upstream ``FLegalize`` or whose upstream one computes
#: something else than the op means (``round``)
MISSING_LEGALIZERS = {"relax.ewise_fma": legalize_ewise_fma, "relax.round": legalize_round}
