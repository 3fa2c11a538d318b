"""FoldSizeRatios: the ratio of two sizes that are multiples of one run-time dim, as a constant.

A resize computes its sampling step as ``float(in) / float(out)``. When both sizes are multiples of
the same run-time dim (an FPN's 2x upsampling over a stepped dim: ``in = 4 * H_div32``, ``out = 8 *
H_div32``), TVM 0.27's ``StmtSimplify`` rewrites ``(x * 4.0) / (x * 8.0)`` with an integer
constant of float type and fails (``IntImm supports only int or uint or bool type, but float32 was
supplied``), after common subexpressions have been hoisted into lets, so the whole build fails.
This pass folds such a quotient to the float constant it always equals (``0.5``) before lowering:
the same value the division gives at every size, and nothing left for the simplifier to trip on.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.sym import Analyzer


def _integer_ratio(analyzer: Analyzer, a, b):
    """``k`` with ``a == k * b`` for every value of the dims (a positive integer), else None."""
    k = analyzer.simplify(tirx.floordiv(a, b))
    if isinstance(k, tirx.IntImm) and int(k) > 0 and analyzer.can_prove_equal(a, b * k):
        return int(k)
    return None


def _fold(node):
    if "float" not in str(node.ty.dtype) or not (isinstance(node.a, tirx.Cast) and isinstance(node.b, tirx.Cast)):
        return node
    a, b = node.a.value, node.b.value
    if "int" not in str(a.ty.dtype) or "int" not in str(b.ty.dtype) or isinstance(a, tirx.IntImm) or isinstance(b, tirx.IntImm):
        return node
    analyzer = Analyzer()
    up = _integer_ratio(analyzer, a, b)
    if up is not None:
        return tirx.const(float(up), node.ty.dtype)
    down = _integer_ratio(analyzer, b, a)
    if down is not None:
        return tirx.const(1.0 / down, node.ty.dtype)
    return node


def FoldSizeRatios() -> tvm.transform.Pass:
    """The pass (module docstring)."""

    def transform(func: tirx.PrimFunc, _mod, _ctx) -> tirx.PrimFunc:
        return tvm_ffi.structural_map(func, [(tirx.Div, _fold)])

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="relax_vk.FoldSizeRatios")
