"""RecordIndexRanges: the values an integer model input may take where it indexes a table.

Requires: constants folded (:class:`~relax_vk.passes.layout.FoldSmallConstants`: an ONNX
``Gather``'s negative-index wrap adds a constant). Guarantees: ``main`` records
``relax_vk.index_ranges``, input name -> ``[lo, hi]``, for every parameter whose values reach the
indices of an op that reads or writes at them with no bounds check in its kernel unchanged: through
casts to an integer dtype and ops that only move values (reshape, flatten, expand_dims, squeeze,
permute_dims, broadcast_to), or through ONNX's negative-index ``where(x < 0, x + n, x)``. The ops:
``take`` in ``"fast"`` mode (what the importers write for ``Embedding`` and ONNX ``Gather``),
``gather_elements`` and ``scatter_elements`` (along their axis), ``gather_nd`` and ``scatter_nd``
(index tuples on the last axis; also the ``gather_nd`` kernel :class:`EdgeDtypes` writes for
Vulkan). ``hi`` is the table's extent along the axis minus one; ``lo`` is ``-n`` with the wrap,
else 0. An index tuple whose components index axes of different extents records a range per
component instead, ``[[lo, hi], ...]``, the input's last axis (reached through casts only); the
runtime checks its element ``i`` against range ``i % K``. Several such ops intersect their ranges.
Nothing else changes.

The artifact carries the range on the input tensor (``"index_range"``) and the runtime refuses a
run whose input holds a value outside it, naming the input, the value and where it lies, before
anything is uploaded: a token id past an embedding table would otherwise read past the table on
the device (a crash on pocl, undefined on a phone's driver), where PyTorch raises an IndexError and
onnxruntime an error too. Indices a model computes itself (an ``argmax`` feeding a gather) are in
range by construction and are not checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Dict, List, Optional

import numpy as np
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


def _vector(expr) -> Optional[List[int]]:
    """The values of a one-dimensional integer constant, else None."""
    if isinstance(expr, GenericConst) and expr.value.numpy().ndim == 1 and expr.value.numpy().dtype.kind in "iu":
        return [int(v) for v in expr.value.numpy()]
    return None


def _static(shape) -> Optional[List[int]]:
    if shape is None or not hasattr(shape, "values"):
        return None
    dims = list(shape.values)
    return [int(d) for d in dims] if all(isinstance(d, tirx.IntImm) for d in dims) else None


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

    def cast_param(self, expr) -> Optional[relax.Var]:
        """The parameter ``expr`` is, through bindings and casts to an integer dtype only (its
        elements where they were: a range per position of its last axis stays right)."""
        for _ in range(64):
            expr = self.resolve(expr)
            if _op(expr) == "relax.astype" and str(expr.attrs.dtype).startswith(("int", "uint")):
                expr = expr.args[0]
                continue
            return expr if isinstance(expr, relax.Var) and expr in self.params else None
        return None

    def indices(self, expr, vector: bool = False):
        """``(parameter, wrap)``: ``expr`` holds the parameter's values (``wrap`` None), or ONNX's
        ``where(x < 0, x + wrap, x)`` of them; else None. ``vector``: the wrap may be a constant
        vector (a list: an index tuple's extents), and only casts may lie between."""
        if vector:
            expr = self.resolve(expr)
            while _op(expr) == "relax.astype" and str(expr.attrs.dtype).startswith(("int", "uint")):
                expr = self.resolve(expr.args[0])
        else:
            expr = self.moved(expr)
        param = self.cast_param if vector else self.param
        if vector and param(expr) is not None:
            return (param(expr), None)
        if isinstance(expr, relax.Var):
            return (expr, None) if expr in self.params else None
        if _op(expr) != "relax.where":
            return None
        cond, shifted, kept = (self.resolve(a) for a in expr.args)
        x = param(kept)
        if x is None or _op(cond) != "relax.less" or _op(shifted) != "relax.add":
            return None
        if not _same(param(cond.args[0]), x) or _scalar(self.resolve(cond.args[1])) != 0:
            return None
        a, b = shifted.args
        value = _vector if vector else _scalar
        wrap = value(self.resolve(b)) if _same(param(a), x) else value(self.resolve(a)) if _same(param(b), x) else None
        if wrap is None and vector:  # (a tuple of one component: a scalar wrap)
            one = _scalar(self.resolve(b)) if _same(param(a), x) else _scalar(self.resolve(a)) if _same(param(b), x) else None
            wrap = [one] if one is not None else None
        return (x, wrap) if wrap is not None else None


def range_pairs(r) -> List[List[int]]:
    """An input's recorded range as ``[lo, hi]`` pairs: one (``[lo, hi]``), or one a position of
    its last axis (``[[lo, hi], ...]``), whatever sequence type holds it (a list, TVM's Array)."""
    return [[int(v) for v in q] for q in r] if isinstance(r[0], Sequence) else [[int(v) for v in r]]


def _intersect(old, new):
    """Two ranges of one input (``[lo, hi]`` or ``[[lo, hi], ...]`` per position), intersected;
    None when their positions disagree."""
    if old is None:
        return new
    a, b = range_pairs(old), range_pairs(new)
    if len(a) == 1 and len(b) == 1:
        return [max(a[0][0], b[0][0]), min(a[0][1], b[0][1])]
    a, b = a * len(b) if len(a) == 1 else a, b * len(a) if len(b) == 1 else b
    if len(a) != len(b):
        return None
    return [[max(x[0], y[0]), min(x[1], y[1])] for x, y in zip(a, b)]


def _axis_extent(data, axis) -> Optional[int]:
    dims = _static(data.ty.shape) if isinstance(data.ty, relax.TensorType) else None
    return dims[int(axis) % len(dims)] if dims else None


def _tuple_extents(call, data, indices) -> Optional[List[int]]:
    """The extents a ``gather_nd`` / ``scatter_nd`` index tuple's components index."""
    dims = _static(data.ty.shape) if isinstance(data.ty, relax.TensorType) else None
    idx = _static(indices.ty.shape) if isinstance(indices.ty, relax.TensorType) else None
    if not dims or not idx:
        return None
    k = idx[-1]
    if _op(call) == "relax.gather_nd":
        batch = int(call.attrs.batch_dims)
    elif _op(call) == "relax.scatter_nd":
        batch = 0
    else:  # (EdgeDtypes' gather_nd kernel: the batch axes from the ranks of its result)
        out = _static(call.ty.shape) if isinstance(call.ty, relax.TensorType) else None
        if out is None:
            return None
        batch = len(idx) - 1 + len(dims) - k - len(out)
    return dims[batch : batch + k] if 0 <= batch and batch + k <= len(dims) else None


def _index_operands(value, mod):
    """``(data, indices, extents, per_component, negatives)`` of a call that reads or writes at its
    indices with no bounds check (``negatives``: its kernel wraps a negative index itself, as TOPI's
    ``scatter_elements`` does), else None."""
    op = _op(value)
    if op == "relax.take" and str(value.attrs.mode) == "fast":
        data = value.args[0]
        if not isinstance(data.ty, relax.TensorType):
            return None
        if value.attrs.axis is None:  # (a flattened table)
            dims = _static(data.ty.shape)
            return (data, value.args[1], [int(np.prod(dims))] if dims else None, False, False)
        return (data, value.args[1], [_axis_extent(data, value.attrs.axis)], False, False)
    if op in ("relax.gather_elements", "relax.scatter_elements"):
        return (value.args[0], value.args[1], [_axis_extent(value.args[0], value.attrs.axis)], False, op == "relax.scatter_elements")
    if op in ("relax.gather_nd", "relax.scatter_nd"):
        return (value.args[0], value.args[1], _tuple_extents(value, value.args[0], value.args[1]), True, False)
    if op == "relax.call_tir" and mod is not None:  # (EdgeDtypes' gather_nd kernel for Vulkan)
        callee = mod[value.args[0]] if isinstance(value.args[0], relax.GlobalVar) else None
        if callee is not None and value.args[0].name_hint.startswith("gather_nd") and len(value.args[1].fields) == 2:
            data, indices = value.args[1].fields
            return (data, indices, _tuple_extents(value, data, indices), True, False)
    return None


def index_ranges(func: relax.Function, mod: Optional[tvm.IRModule] = None) -> Dict[str, list]:
    """``{input name: [lo, hi] or [[lo, hi], ...]}`` of ``func`` (the module docstring)."""
    sources = _Sources(func)
    ranges: Dict[str, list] = {}
    skip = set()  # (inputs whose ops' positions disagree: left unchecked rather than checked wrong)
    for value in list(sources.values.values()):
        operands = _index_operands(value, mod)
        if operands is None:
            continue
        _data, indices, extents, per_component, negatives = operands
        if not extents or any(e is None or e < 1 for e in extents):
            continue
        uniform = len(set(extents)) == 1
        found = sources.indices(indices, vector=per_component and not uniform)
        if found is None and per_component and uniform:
            found = sources.indices(indices, vector=True)
        if found is None:
            continue
        param, wrap = found
        wraps = wrap if isinstance(wrap, list) else [wrap]
        if wrap is not None and wraps != extents and not (uniform and wraps == extents[:1]):
            continue  # (a wrap by other extents than the axes': the range is not these)
        new = [[(-e if wrap is not None or negatives else 0), e - 1] for e in extents]
        if uniform:
            new = new[0]
        elif (_static(param.ty.shape) or [None])[-1] != len(extents):
            continue
        if param.name in skip:
            continue
        merged = _intersect(ranges.get(param.name), new)
        if merged is None:
            skip.add(param.name)
            ranges.pop(param.name, None)
            continue
        ranges[param.name] = merged
    return ranges


def RecordIndexRanges() -> tvm.transform.Pass:
    """Record on ``main`` the ranges of the integer inputs that index tables (module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        for gvar, func in mod.functions_items():
            if isinstance(func, relax.Function) and gvar.name_hint == "main":
                ranges = {name: r for name, r in index_ranges(func, mod).items() if all(lo <= hi for lo, hi in range_pairs(r))}
                if ranges:
                    mod = mod.clone()
                    mod[gvar] = func.with_attr(INDEX_RANGE_ATTR, ranges)
                return mod
        return mod

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.RecordIndexRanges")
