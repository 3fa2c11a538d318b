"""Run-time dims: the symbolic sizes of a model's inputs, their declared ranges, and the integer
expressions over them that the artifact carries (tensor shapes, kernel scalar arguments, grids).

A model keeps a dim symbolic when its ``main`` has a ``tirx.Var`` in an input's shape and a range
for it in the function attributes ``tir_var_upper_bound`` (required: TVM's own name, which its
memory planner reads too) and ``tir_var_lower_bound`` (optional, default 1). The artifact then
holds:

* ``program["dims"]``: ``[{"name", "min", "max"}]`` (and ``"step"`` when the sizes are multiples
  of one, :mod:`relax_vk.core.dims`), in the order the inputs first name them;
* on a tensor whose shape is symbolic, ``"shape_expr"`` (one expression per axis) beside
  ``"shape"``, which is the shape at the bound (each axis at its largest value over the ranges:
  what storage is planned and allocated for);
* on a launch step, ``"scalars"`` (``{"index", "dtype", "value"}``: a kernel parameter that is an
  integer, at its position in the kernel's parameter list) and ``"global"`` (the step's global size
  as expressions, when it depends on a dim).

An expression is a JSON integer, a dim's name, or ``[op, a, b]`` with ``op`` one of :data:`OPS`
(integer arithmetic on int64: ``floordiv``/``floormod`` round toward minus infinity,
``truncdiv``/``truncmod`` toward zero, as TIR's ``Div``/``Mod``). The runtime evaluates them once
per input shape; an expression this module cannot write exactly raises
:class:`~relax_vk.core.errors.UnsupportedError` naming what it was for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import tvm
from tvm import relax, tirx
from tvm.sym import Analyzer

from ..core.dims import LOWER_ATTR, UPPER_ATTR, dim_steps
from ..core.errors import UnsupportedError

#: TIR node type -> the artifact's operator
OPS = {"Add": "+", "Sub": "-", "Mul": "*", "FloorDiv": "floordiv", "FloorMod": "floormod", "Div": "truncdiv",
       "Mod": "truncmod", "Min": "min", "Max": "max"}  # fmt: skip

Expr = Union[int, str, list]


@dataclass(frozen=True)
class Dim:
    """One run-time dim: its variable, name and inclusive range."""

    var: tirx.Var
    name: str
    min: int
    max: int
    step: int = 1


def _bounds_attr(func: relax.Function, key: str) -> Dict[str, int]:
    if func.attrs is None or key not in func.attrs:
        return {}
    return {str(k): int(v) for k, v in func.attrs[key].items()}


class RunTimeDims:
    """The run-time dims of a Relax ``main`` (module docstring) and the expressions over them."""

    def __init__(self, main: relax.Function):
        upper, lower, steps = _bounds_attr(main, UPPER_ATTR), _bounds_attr(main, LOWER_ATTR), dim_steps(main)
        self.dims: List[Dim] = []
        seen: Dict[str, tirx.Var] = {}
        for param in main.params:
            shape = getattr(param.ty, "shape", None)
            for axis in getattr(shape, "values", None) or []:
                for var in tirx.analysis.undefined_vars(axis):
                    name = str(var.name)
                    if name in seen:
                        if not seen[name].same_as(var):
                            raise UnsupportedError(f"input {param.name}: two different dims are named {name}")
                        continue
                    if not isinstance(axis, tirx.Var):
                        raise UnsupportedError(
                            f"input {param.name}: dim {name} appears only inside the expression {axis}; a run-time dim "
                            "must be an axis of an input on its own"
                        )
                    if name not in upper:
                        raise UnsupportedError(
                            f"input {param.name}: dim {name} has no upper bound; declare its range (ONNX: --dim "
                            f"{name}=MIN:MAX, Python dims={{{name!r}: (MIN, MAX)}}; the function attribute {UPPER_ATTR})"
                        )
                    lo, hi = lower.get(name, 1), upper[name]
                    if not 1 <= lo <= hi:
                        raise UnsupportedError(f"dim {name}: range {lo}..{hi} is empty or holds sizes below 1 (a run-time dim is at least 1)")
                    seen[name] = var
                    self.dims.append(Dim(var, name, lo, hi, steps.get(name, 1)))
        self.analyzer = Analyzer()
        for d in self.dims:
            self.analyzer.bind(d.var, tvm.ir.Range.from_min_extent(d.min, d.max - d.min + 1))
        self._by_var = {d.var: d for d in self.dims}
        self.derived = derived_dims(main)

    def _inputs_only(self, expr):
        """``expr`` with the derived dims (:func:`derived_dims`) written over the inputs' dims."""
        return substitute(expr, self.derived) if self.derived and not isinstance(expr, int) else expr

    def __bool__(self) -> bool:
        return bool(self.dims)

    def table(self) -> List[dict]:
        """``program["dims"]``."""
        return [{"name": d.name, "min": d.min, "max": d.max, **({"step": d.step} if d.step > 1 else {})} for d in self.dims]

    def bound(self, expr, what: str) -> int:
        """The largest value ``expr`` takes over the dims' ranges."""
        if isinstance(expr, int):
            return expr
        expr = self._inputs_only(expr)
        value = getattr(self.analyzer.simplify(expr), "value", None)
        if isinstance(value, int):
            return value
        hi = self.analyzer.const_int_bound(expr).max_value
        if hi >= 2**62:
            raise UnsupportedError(f"{what}: {expr} has no finite bound over the declared dim ranges")
        return int(hi)

    def at_max(self, expr, what: str) -> int:
        """``expr``'s value with every dim at its maximum (a grid's size at the bound: what a
        load-time check reads; the runtime checks each run's own)."""
        if isinstance(expr, int):
            return expr
        expr = self._inputs_only(expr)
        value = getattr(Analyzer().simplify(substitute(expr, {d.var: tirx.const(d.max, d.var.ty.dtype) for d in self.dims})), "value", None)
        if not isinstance(value, int):
            raise UnsupportedError(f"{what}: {expr} is not a number at the dims' maxima")
        return value

    def expression(self, expr, what: str) -> Expr:
        """``expr`` (over the model's dims) in the artifact's form (module docstring)."""
        if isinstance(expr, int):
            return expr
        expr = self.analyzer.simplify(self._inputs_only(expr))
        return self._write(expr, what)

    def _write(self, e, what: str) -> Expr:
        if isinstance(e, tirx.IntImm):
            return int(e.value)
        if isinstance(e, tirx.Var):
            if e in self._by_var:
                return self._by_var[e].name
            raise UnsupportedError(f"{what}: {e} is not a run-time dim of the model's inputs")
        if isinstance(e, tirx.Cast) and "int" in str(e.ty.dtype):
            return self._write(e.value, what)
        branch = _taken_branch(e, self.analyzer)
        if branch is not None:
            return self._write(self.analyzer.simplify(branch), what)
        op = OPS.get(type(e).__name__)
        if op is None:
            raise UnsupportedError(f"{what}: the size {e} ({type(e).__name__}) cannot be computed by the runtime")
        return [op, self._write(e.a, what), self._write(e.b, what)]

    def shape(self, values: Sequence, what: str) -> Tuple[List[int], Optional[List[Expr]]]:
        """``(shape at the bound, expressions or None when static)`` of a tensor's shape."""
        exprs = [self.expression(v, what) for v in values]
        if all(isinstance(e, int) for e in exprs):
            return [int(e) for e in exprs], None
        return [self.bound(v, what) for v in values], exprs


def derived_dims(main: relax.Function) -> Dict:
    """Dims ``main`` derives from its inputs' dims: ``var -> expression`` of each
    ``R.match_cast(R.shape([expr]), R.Shape([var]))`` (a dim with a step: the input axis ``H`` and
    ``H_div32 = H // 32``, :mod:`relax_vk.core.dims`)."""
    out: Dict = {}
    for block in getattr(main.body, "blocks", []):
        for b in block.bindings:
            if isinstance(b, relax.MatchCast) and isinstance(b.value, relax.ShapeExpr):
                for var, value in zip(b.ty.values or [], b.value.values):
                    if isinstance(var, tirx.Var) and var not in out:
                        out[var] = substitute(value, out)
    return out


def match_shapes(pairs: Sequence[Tuple[str, Sequence, Sequence]], bound: Optional[Dict] = None) -> Dict:
    """Unify a PrimFunc's buffer shapes with the shapes its caller passes: ``pairs`` is
    ``(what, callee shape, caller shape)`` per operand. A callee axis that is a variable not yet
    bound takes the caller's expression; any other axis must equal the caller's after
    substitution (checked by :func:`tvm.sym.Analyzer.can_prove_equal` when both are symbolic).
    Returns the callee var -> caller expression map."""
    out: Dict = dict(bound or {})
    analyzer = Analyzer()
    for what, callee, caller in pairs:
        if len(callee) != len(caller):
            raise UnsupportedError(f"{what}: rank {len(callee)} against the caller's {len(caller)}")
    # every plain variable first: an operand may use it in an expression before another binds it (S * 4, then S)
    for _, callee, caller in pairs:
        for c, v in zip(callee, caller):
            if isinstance(c, tirx.Var) and c not in out:
                out[c] = v
    for what, callee, caller in pairs:
        for axis, (c, v) in enumerate(zip(callee, caller)):
            got = substitute(c, out)
            if not analyzer.can_prove_equal(got, v):
                raise UnsupportedError(f"{what}: axis {axis} is {got} in the kernel and {v} at the call")
    return out


def _taken_branch(e, analyzer: Optional[Analyzer] = None):
    """The branch a ``Select`` takes whose condition is constant, or provable over the dims'
    ranges ``analyzer`` knows (a size simplified from ``abs`` or ``max`` can be one: ``0 <= 6 * H *
    W``), else None."""
    if not isinstance(e, tirx.Select):
        return None
    cond = (analyzer or Analyzer()).simplify(e.condition)
    return (e.true_value if cond.value else e.false_value) if isinstance(cond, tirx.IntImm) else None


def substitute(e, values: Mapping):
    """``e`` (an integer expression of :data:`OPS`, casts, constants and variables) with the
    variables of ``values`` replaced (TVM's Python API has no expression substitution)."""
    if isinstance(e, (int, tirx.IntImm)):
        return e
    if isinstance(e, tirx.Var):
        got = values.get(e, e)
        return tirx.Cast(e.ty.dtype, got) if not isinstance(got, int) and str(got.ty.dtype) != str(e.ty.dtype) else got
    if isinstance(e, tirx.Cast):
        return tirx.Cast(e.ty.dtype, substitute(e.value, values))
    name = type(e).__name__
    if name in OPS or name in _CONDITIONS:
        return type(e)(substitute(e.a, values), substitute(e.b, values))
    if isinstance(e, tirx.Select):  # (its branch decided here if it can be, else by the dims' ranges when written)
        branch = _taken_branch(e)
        if branch is not None:
            return substitute(branch, values)
        return tirx.Select(substitute(e.condition, values), substitute(e.true_value, values), substitute(e.false_value, values))
    raise UnsupportedError(f"the size {e} ({name}) cannot be computed by the runtime")


#: the comparisons a size's ``Select`` may test (:func:`substitute` carries them through)
_CONDITIONS = ("LE", "LT", "GE", "GT", "EQ", "NE", "And", "Or")
