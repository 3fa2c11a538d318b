"""Legalizers for Relax ops that TVM 0.27 has none for (they would stay opaque and fail to build)."""

from __future__ import annotations

from tvm import relax, topi


def legalize_ewise_fma(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    """``ewise_fma(a, b, c) = a * b + c``, elementwise."""
    return bb.call_te(lambda a, b, c: topi.add(topi.multiply(a, b), c), *call.args, primfunc_name_hint="ewise_fma")


#: op name -> legalizer, for ops without an upstream ``FLegalize``
MISSING_LEGALIZERS = {"relax.ewise_fma": legalize_ewise_fma}
