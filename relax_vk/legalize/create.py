"""``full``, ``ones``, ``zeros`` and their ``_like`` forms, legalized where TVM 0.27's legalizer
crashes: it hands ``topi.full`` the output's dtype as a ``PrimType`` object, and ``topi.full``
tests it as a string (``"float" in dtype``: ``TypeError``). Static-shape calls are folded to
constants before they get here, so what reaches legalization is a tensor of run-time size (a
causal mask over a run-time sequence length, the fuzzer's first crash at run-time dims)."""

from __future__ import annotations

from tvm import relax, tirx, topi
from tvm.relax.transform.legalize_ops.common import _try_convert_to_scalar_const  # (upstream's reading of the fill value)


def _shape(bb: relax.BlockBuilder, shape) -> list:
    if isinstance(shape, relax.ShapeExpr):
        return list(shape.values)
    shape = bb.emit(shape)
    dims = [tirx.Var(f"s{i}", "int64") for i in range(shape.ty.ndim)]
    bb.match_cast(shape, relax.ShapeType(dims))
    return dims


def _full(like: bool, fill: "float | None", name: str):
    def legalize(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        shape = list(call.args[0].ty.shape.values) if like else _shape(bb, call.args[0])
        value = fill if fill is not None else _try_convert_to_scalar_const(call.args[1], python_native=True)
        return bb.call_te(topi.full, shape, str(call.ty.dtype), value, primfunc_name_hint=name)

    return legalize


#: op name -> legalizer
CREATE_LEGALIZERS = {
    "relax.full": _full(False, None, "full"),
    "relax.full_like": _full(True, None, "full"),
    "relax.ones": _full(False, 1.0, "ones"),
    "relax.ones_like": _full(True, 1.0, "ones"),
    "relax.zeros": _full(False, 0.0, "zeros"),
    "relax.zeros_like": _full(True, 0.0, "zeros"),
}
