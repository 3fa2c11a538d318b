"""Small IR queries shared by passes and legalizers."""

from __future__ import annotations

from typing import Set

import tvm
from tvm import relax

from .scope import GLOBAL, MemoryScope, scope_from_name


def tensor_scope(ty) -> MemoryScope:
    """The memory scope a tensor type's VDevice names; ``global`` without one (or for non-tensors)."""
    if isinstance(ty, relax.TensorType) and ty.vdevice is not None:
        return scope_from_name(str(ty.vdevice.memory_scope))
    return GLOBAL


def ops_in(mod: tvm.IRModule) -> Set[str]:
    """Names of the Relax ops called anywhere in ``mod``'s Relax functions."""
    names: Set[str] = set()

    def visit(expr):
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
            names.add(expr.op.name)

    for _, func in mod.functions_items():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return names


def tir_uses_any(expr, variables) -> bool:
    """Whether the TIR expression ``expr`` reads any of ``variables``."""
    if not variables:
        return False
    from tvm import tirx

    free = tirx.analysis._ffi_api.UndefinedVars(expr, [])
    return any(any(v.same_as(u) for u in variables) for v in free)
