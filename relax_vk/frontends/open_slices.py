"""Slices of a run-time axis that run to its end, given their exact length.

``x[:, :, x.shape[2] // 2:]`` (PyTorch), ONNX ``Slice`` with a start computed from ``Shape`` and an
open end (``INT64_MAX``): the importers keep the open end as it is written. TVM's ONNX converter
then declares the slice in bounds (``assume_inbound``), and its length is ``INT64_MAX - H // 2``:
a kernel whose extent passes int64 ("Literal value 36893488147419103228 exceeds range of int64").
TVM's PyTorch converter clamps instead, to ``min(INT64_MAX, s) - min(s // 2, s)``, whose
``if_then_else`` no later pass can type. Over the dims' declared ranges both are ``H - H // 2``.

:func:`exact_open_slices` rewrites every ``strided_slice`` of ``main`` whose axes it can prove in
bounds at every size the ranges allow (stride 1, ``0 <= begin <= end``, an end at or past every
size of the axis taken as the axis's size) into the same slice with those bounds,
``assume_inbound``, and simplifies the sizes of shapes over the ranges (a reshape of such a slice,
``Flatten`` after ``x[:, :, 1:]``: ``(min(2^30, H) * 4 - min(1, H) * 4) * W // 4`` is ``(H - 1) *
W``, which TVM could not bound in the fused kernel). A slice it cannot prove so is left as the
importer wrote it.
"""

from __future__ import annotations

import tvm
from tvm import relax, tirx
from tvm.sym import Analyzer

from ..codegen.run_time_shapes import substitute
from ..core.dims import bounded_analyzer, dim_ranges, size_cases


def exact_open_slices(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with the open-ended slices of run-time axes given their exact bounds (module
    docstring); ``mod`` itself when ``main`` has no run-time dims."""
    main = mod["main"]
    ranges = dim_ranges(main)
    if not ranges:
        return mod
    analyzer = bounded_analyzer([v for p in main.params for axis in getattr(getattr(p.ty, "shape", None), "values", None) or ()
                                 for v in tirx.analysis.undefined_vars(axis)], ranges)  # fmt: skip

    def holds(condition) -> bool:
        """``condition`` proved by the analyzer, or true at every size of the dims it reads (TVM's
        analyzer cannot prove ``H // 2 <= H``; at most ``core.dims.MOST_SIZE_CASES`` sizes are tried)."""
        if analyzer.can_prove(condition):
            return True
        _, cases = size_cases([condition], ranges)
        if not cases or not tirx.analysis.undefined_vars(condition):
            return False
        plain = Analyzer()
        for case in cases:
            value = plain.simplify(substitute(condition, case))
            if not (isinstance(value, tirx.IntImm) and int(value)):
                return False
        return True

    def exact(call: relax.Call):
        """The slice's ``(begin, end)`` lists, proved in bounds; None when a bound is not provable."""
        shape = getattr(call.args[0].ty, "shape", None)
        values = getattr(shape, "values", None)
        if values is None:
            return None
        if not all(isinstance(a, relax.Tuple) for a in call.args[1:]):
            return None
        axes, begins, ends = (list(call.args[i].fields) for i in range(1, 4))
        strides = list(call.args[4].fields) if len(call.args) > 4 else [tirx.IntImm("int64", 1)] * len(axes)
        if not all(isinstance(s, tirx.IntImm) and int(s) == 1 for s in strides):
            return None
        out_begin, out_end, changed = [], [], False
        for axis, begin, end in zip(axes, begins, ends):
            extent = values[int(axis) % len(values)]
            if isinstance(extent, tirx.IntImm):  # (a static axis: its bounds clamped as the slice would, numpy's rule)
                if not (isinstance(begin, tirx.IntImm) and isinstance(end, tirx.IntImm)):
                    return None
                n = int(extent)
                b, e = (min(max(int(v) + n if int(v) < 0 else int(v), 0), n) for v in (begin, end))
                out_begin.append(tirx.const(b, "int64"))
                out_end.append(tirx.const(max(b, e), "int64"))
                continue
            dtype = str(extent.ty.dtype)
            begin = begin if str(begin.ty.dtype) == dtype else tirx.Cast(dtype, begin)
            if str(end.ty.dtype) != dtype:
                end = tirx.Cast(dtype, end)
            if not end.same_as(extent) and analyzer.can_prove(end >= extent):  # (open: at or past every size of the axis)
                end, changed = extent, True
            if not all(holds(c) for c in (0 <= begin, begin <= end, end <= extent)):
                return None
            out_begin.append(analyzer.simplify(begin))
            out_end.append(analyzer.simplify(end))
        return (out_begin, out_end) if changed or not bool(call.attrs.assume_inbound) else None

    @relax.expr_functor.mutator
    class _Exact(relax.PyExprMutator):
        def visit_shape_expr_(self, shape):  # (a reshape to the importer's sizes of such a slice: the same sizes, simplified)
            values = [analyzer.simplify(v) for v in shape.values]
            return shape if all(a.same_as(b) for a, b in zip(values, shape.values)) else relax.ShapeExpr(values)

        def visit_call_(self, call):
            call = super().visit_call_(call)
            if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.strided_slice"):
                return call
            bounds = exact(call)
            if bounds is None:
                return call
            axes = list(call.args[1].fields)
            return relax.op.strided_slice(call.args[0], axes, bounds[0], bounds[1], [1] * len(axes), assume_inbound=True)

    out = mod.clone()
    func = _Exact(out).visit_expr(main)
    # (the declared result type follows the body's: an output's length is the slice's new one)
    out["main"] = relax.Function(func.params, func.body, None, func.is_pure, func.attrs, func.span)
    return relax.transform.Normalize()(out)
