"""The artifact's run-time size expressions (:mod:`relax_vk.codegen.run_time_shapes` writes them,
the native runtime evaluates them): evaluation for tools that read a program without a device
(shapes of intermediates in ``profile``/``bisect``, reports)."""

from __future__ import annotations

from typing import Mapping, Union

Expr = Union[int, str, list]


def _floordiv(a: int, b: int) -> int:
    return a // b


def _truncdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


_OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "floordiv": _floordiv,
    "floormod": lambda a, b: a - _floordiv(a, b) * b,
    "truncdiv": _truncdiv,
    "truncmod": lambda a, b: a - _truncdiv(a, b) * b,
    "min": min,
    "max": max,
}


def evaluate(expr: Expr, dims: Mapping[str, int]) -> int:
    """The value of ``expr`` (an integer, a dim's name or ``[op, a, b]``) at ``dims``."""
    if isinstance(expr, bool):
        raise ValueError(f"size expression {expr!r} is not an integer, a dim or [op, a, b]")
    if isinstance(expr, int):
        return expr
    if isinstance(expr, str):
        if expr not in dims:
            raise ValueError(f"size expression names {expr!r}, which is not a run-time dim ({', '.join(dims) or 'none'})")
        return int(dims[expr])
    if isinstance(expr, list) and len(expr) == 3 and expr[0] in _OPS:
        return int(_OPS[expr[0]](evaluate(expr[1], dims), evaluate(expr[2], dims)))
    raise ValueError(f"size expression {expr!r} is not an integer, a dim or [op, a, b]")


def shape_at(tensor: dict, dims: Mapping[str, int]) -> list:
    """A program tensor's shape at ``dims`` (its fixed shape when it has no expressions)."""
    exprs = tensor.get("shape_expr")
    return list(tensor["shape"]) if not exprs else [evaluate(e, dims) for e in exprs]
