"""StepQuotients: the quotient of a stepped dim is written one way everywhere.

Requires: a ``main`` whose stepped dims are bound by :func:`relax_vk.core.dims.bind_stepped_dims`
(``stepped_dims = match_cast(shape([W // 4]), Shape([w]))``), after TVM's ``CanonicalizeBindings``.
Guarantees: outside that ``match_cast``, every size argument of a call (``arange(0, 4 * w)``'s end,
a ``PrimExpr`` argument) names ``W // 4`` where it named ``w``; nothing else changes.

Why: ``CanonicalizeBindings`` rewrites ``w`` as ``W // 4`` in every shape but not in a call's
``PrimExpr`` arguments, so an ``arange`` over the dim was legalized to a tensor of ``w * 4``
elements beside the input's ``W // 4 * 4``: TVM could not tell the two equal, the sum of the two
lost its shape, and the build stopped inside TVM (``slot_map_`` in its VM shape lowering;
``VarRemapGet`` in ``FuseTIR`` for a meshgrid): a YOLO-style grid ``x + arange(W)`` over a stepped
``W`` did not build from PyTorch or ONNX.
"""

from __future__ import annotations

from typing import Dict

import tvm
import tvm_ffi
from tvm import relax, tirx

from ...core.dims import STEP_ATTR


def _quotients(func: relax.Function) -> Dict[tirx.Var, tvm.ir.Expr]:
    """The ``{w: W // 4}`` the leading ``stepped_dims`` match_cast defines, or {}."""
    for block in func.body.blocks[:1]:
        for b in block.bindings:
            if isinstance(b, relax.MatchCast) and isinstance(b.value, relax.ShapeExpr) and str(b.var.name) == "stepped_dims":
                declared = b.ty.values if getattr(b.ty, "values", None) is not None else []
                return {v: e for v, e in zip(declared, b.value.values) if isinstance(v, tirx.Var)}
    return {}


def StepQuotients() -> tvm.transform.Pass:
    """Stepped dims' quotients named one way (module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        gvars = {g.name_hint: g for g in mod.get_global_vars()}
        main = mod[gvars["main"]] if "main" in gvars else None
        if not isinstance(main, relax.Function) or main.attrs is None or STEP_ATTR not in main.attrs:
            return mod
        quotients = _quotients(main)
        if not quotients:
            return mod

        def substitute(var):
            for q, e in quotients.items():
                if var.same_as(q):
                    return e
            return var

        blocks = []
        for i, block in enumerate(main.body.blocks):
            bindings = []
            for b in block.bindings:
                if i == 0 and isinstance(b, relax.MatchCast) and str(b.var.name) == "stepped_dims":
                    bindings.append(b)
                    continue
                value = tvm_ffi.structural_map(b.value, [(tirx.Var, substitute)])
                bindings.append(relax.MatchCast(b.var, value, b.ty) if isinstance(b, relax.MatchCast) else relax.VarBinding(b.var, value))
            blocks.append(relax.DataflowBlock(bindings) if isinstance(block, relax.DataflowBlock) else relax.BindingBlock(bindings))
        body = relax.SeqExpr(blocks, main.body.body)
        func = relax.Function(main.params, body, main.body.ty, main.is_pure, main.attrs, main.span)
        out = mod.clone()
        out[gvars["main"]] = func
        return relax.transform.Normalize()(out)

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.StepQuotients")
