"""Small IR queries shared by passes and legalizers."""

from __future__ import annotations

from typing import Set

import tvm
from tvm import relax


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
