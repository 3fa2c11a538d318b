"""PartialLegalize: legalize every op except those whose attributes scope assignment needs.

Requires: nothing (any Relax module).

Guarantees: ``LegalizeOps(skip_ops=registry.keep_for_scoping())`` then ``AnnotateTIROpPattern``:
conv2d and the pools stay Relax ops with their attributes; everything else becomes ``call_tir``
of a PrimFunc with an ``op_pattern``. Each PrimFunc produced here is also tagged with the op it
came from (``relax_vk.source_op``), so the registry can match kernels by op, e.g. the layout
transform whose input must be a buffer, instead of guessing from kernel names.
"""

from __future__ import annotations

from typing import Optional

import tvm
from tvm import relax

from ...core.ir_utils import ops_in
from ...core.registry import SOURCE_OP_ATTR, OpRegistry, default_registry
from ...legalize import LEGALIZE_MAP


def _tagging_legalizer(op_name: str, legalize):
    def legalize_and_tag(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        result = legalize(bb, call)
        kernels = []

        def visit(expr):
            if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name == "relax.call_tir":
                kernels.append(expr.args[0])

        relax.analysis.post_order_visit(result, visit)
        mod = bb.get()
        for gvar in kernels:
            func = mod[gvar]
            if isinstance(func, tvm.tirx.PrimFunc) and (func.attrs is None or SOURCE_OP_ATTR not in func.attrs):
                bb.update_func(gvar, func.with_attr(SOURCE_OP_ATTR, op_name))
        return result

    return legalize_and_tag


def PartialLegalize(registry: Optional[OpRegistry] = None) -> tvm.transform.Pass:
    """Legalize all but the ops kept for scoping, then annotate op patterns (module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        reg = registry or default_registry()
        skip = reg.keep_for_scoping()
        custom = {}
        for name in ops_in(mod) - set(skip):
            legalize = LEGALIZE_MAP.get(name) or tvm.ir.Op.get(name).get_attr("FLegalize")
            if legalize is not None:
                custom[name] = _tagging_legalizer(name, legalize)
        seq = tvm.transform.Sequential(
            [relax.transform.LegalizeOps(custom, skip_ops=skip), relax.transform.AnnotateTIROpPattern()]
        )
        return seq(mod)

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.PartialLegalize")
