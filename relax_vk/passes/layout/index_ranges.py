"""RecordIndexRanges: the values an integer model input may take where it indexes a table.

Requires: constants folded (:class:`~relax_vk.passes.layout.FoldSmallConstants`: an ONNX
``Gather``'s negative-index wrap adds a constant). Guarantees: ``main`` records
``relax_vk.index_ranges``, input name -> ``[lo, hi]``, for every parameter whose values reach the
indices of a ``take`` in ``"fast"`` mode (what the importers write for ``Embedding`` and ONNX
``Gather``: no bounds check in the kernel) unchanged: through casts to an integer dtype and ops
that only move values (reshape, flatten, expand_dims, squeeze, permute_dims, broadcast_to), or
through ONNX's negative-index ``where(x < 0, x + n, x)``. ``hi`` is the table's extent along the
axis minus one; ``lo`` is ``-n`` with the wrap, else 0. Several such takes intersect their ranges.
Nothing else changes.

The artifact carries the range on the input tensor (``"index_range"``) and the runtime refuses a
run whose input holds a value outside it, naming the input, the value and where it lies, before
anything is uploaded: a token id past an embedding table would otherwise read past the table on
the device (a crash on pocl, undefined on a phone's driver), where PyTorch raises an IndexError and
onnxruntime an error too. Indices a model computes itself (an ``argmax`` feeding a gather) are in
range by construction and are not checked.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import tvm
from tvm import relax, tirx
from tvm.ir.expr import GenericConst

INDEX_RANGE_ATTR = "relax_vk.index_ranges"

#: ops whose output holds the values of their first argument, moved (or cast, checked apart)
_MOVES = {"relax.reshape", "relax.flatten", "relax.expand_dims", "relax.squeeze", "relax.permute_dims", "relax.broadcast_to"}


def _op(expr) -> str:
    return expr.op.name if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) else ""


def _scalar(expr) -> Optional[int]:
    """The value of an integer constant of one element, else None."""
    if isinstance(expr, GenericConst) and expr.value.numpy().size == 1 and expr.value.numpy().dtype.kind in "iu":
        return int(expr.value.numpy().reshape(-1)[0])
    return None


def _same(a, b) -> bool:
    return a is not None and b is not None and a.same_as(b)


class _Sources:
    """Where a function's values come from, through its bindings."""

    def __init__(self, func: relax.Function):
        self.params = set(func.params)
        self.values: Dict[relax.Var, relax.Expr] = {}
        body = func.body
        for block in body.blocks if isinstance(body, relax.SeqExpr) else []:
            for b in block.bindings:
                if isinstance(b, relax.VarBinding):
                    self.values[b.var] = b.value

    def resolve(self, expr):
        seen = set()
        while isinstance(expr, relax.Var) and expr in self.values and expr not in seen:
            seen.add(expr)
            expr = self.values[expr]
        return expr

    def moved(self, expr):
        """What ``expr`` holds the values of: through bindings, the ops of ``_MOVES`` and casts to
        an integer dtype (None past a chain that long)."""
        for _ in range(64):
            expr = self.resolve(expr)
            op = _op(expr)
            if op in _MOVES or (op == "relax.astype" and str(expr.attrs.dtype).startswith(("int", "uint"))):
                expr = expr.args[0]
                continue
            return expr
        return None

    def param(self, expr) -> Optional[relax.Var]:
        """The parameter whose values ``expr`` holds unchanged (moved or cast to an integer dtype)."""
        expr = self.moved(expr)
        return expr if isinstance(expr, relax.Var) and expr in self.params else None

    def indices(self, expr) -> Optional[Tuple[relax.Var, Optional[int]]]:
        """``(parameter, wrap)``: ``expr`` holds the parameter's values (``wrap`` None), or ONNX's
        ``where(x < 0, x + wrap, x)`` of them; else None."""
        expr = self.moved(expr)
        if isinstance(expr, relax.Var):
            return (expr, None) if expr in self.params else None
        if _op(expr) != "relax.where":
            return None
        cond, shifted, kept = (self.resolve(a) for a in expr.args)
        x = self.param(kept)
        if x is None or _op(cond) != "relax.less" or _op(shifted) != "relax.add":
            return None
        if not _same(self.param(cond.args[0]), x) or _scalar(self.resolve(cond.args[1])) != 0:
            return None
        a, b = shifted.args
        wrap = _scalar(self.resolve(b)) if _same(self.param(a), x) else _scalar(self.resolve(a)) if _same(self.param(b), x) else None
        return (x, wrap) if wrap is not None else None


def index_ranges(func: relax.Function) -> Dict[str, List[int]]:
    """``{input name: [lo, hi]}`` of ``func`` (the module docstring)."""
    sources = _Sources(func)
    ranges: Dict[str, List[int]] = {}
    for value in list(sources.values.values()):
        if _op(value) != "relax.take" or str(value.attrs.mode) != "fast":
            continue
        data = value.args[0].ty
        if not isinstance(data, relax.TensorType) or data.shape is None:
            continue
        dims = list(data.shape.values)
        axis = int(value.attrs.axis) if value.attrs.axis is not None else None
        if axis is None:  # (a flattened table)
            extent = 1
            for d in dims:
                extent = extent * int(d) if isinstance(d, tirx.IntImm) and extent is not None else None
        else:
            d = dims[axis % len(dims)]
            extent = int(d) if isinstance(d, tirx.IntImm) else None
        found = sources.indices(value.args[1])
        if extent is None or extent < 1 or found is None:
            continue
        param, wrap = found
        if wrap is not None and wrap != extent:
            continue
        lo, hi = (-extent if wrap is not None else 0), extent - 1
        old = ranges.get(param.name)
        ranges[param.name] = [lo, hi] if old is None else [max(old[0], lo), min(old[1], hi)]
    return ranges


def RecordIndexRanges() -> tvm.transform.Pass:
    """Record on ``main`` the ranges of the integer inputs that index tables (module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        for gvar, func in mod.functions_items():
            if isinstance(func, relax.Function) and gvar.name_hint == "main":
                ranges = {name: r for name, r in index_ranges(func).items() if r[0] <= r[1]}
                if ranges:
                    mod = mod.clone()
                    mod[gvar] = func.with_attr(INDEX_RANGE_ATTR, ranges)
                return mod
        return mod

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.RecordIndexRanges")
