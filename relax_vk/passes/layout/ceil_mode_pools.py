"""Ceil-mode max pools over a run-time size, as floor-mode pools with more end padding.

TVM writes the output size of a ceil-mode pool over a run-time size as a condition
(``if_then_else``: PyTorch drops a last window that would start in the end padding), which no
pass or runtime here computes (:func:`relax_vk.core.dims.refuse_conditional_sizes` refuses it).
With ``K`` the dilated kernel, ``s`` the stride and ``e`` the end padding, the ceil-mode size is
``ceil((H + b + e - K) / s) + 1`` and that last window can only start in the end padding when
``e + s > K``; otherwise the pool equals a floor-mode pool whose end padding is ``e + s - 1``
(a max pool's padding never wins). SqueezeNet's and GoogLeNet's pools (``K = 3``, ``s = 2``,
no padding) are such. Requires nothing; guarantees that each such ``relax.nn.max_pool2d`` has
``ceil_mode`` off and a size without conditions; every other pool is left as it is.
"""

from __future__ import annotations

import tvm
from tvm import relax, tirx


def _rewritable(call: relax.Call) -> bool:
    a = call.attrs
    if not bool(a.ceil_mode) or str(a.layout) != "NCHW":
        return False
    shape = getattr(getattr(call.args[0].ty, "shape", None), "values", None)
    if shape is None or len(shape) != 4 or all(isinstance(d, tirx.IntImm) for d in shape[2:]):
        return False  # (a static size: TVM folds the condition)
    pads = [int(p) for p in a.padding]
    for axis in range(2):
        kernel = (int(a.pool_size[axis]) - 1) * int(a.dilation[axis]) + 1
        if pads[2 + axis] + int(a.strides[axis]) > kernel:
            return False
    return True


@relax.expr_functor.mutator
class _Rewriter(relax.PyExprMutator):
    def visit_call_(self, call: relax.Call) -> relax.Expr:
        call = super().visit_call_(call)
        if getattr(call.op, "name", "") != "relax.nn.max_pool2d" or not _rewritable(call):
            return call
        a = call.attrs
        pads = [int(p) for p in a.padding]
        padding = [pads[0], pads[1], pads[2] + int(a.strides[0]) - 1, pads[3] + int(a.strides[1]) - 1]
        return relax.op.nn.max_pool2d(call.args[0], a.pool_size, a.strides, padding, a.dilation, False, bool(a.count_include_pad),
                                      str(a.layout), str(a.out_layout))  # fmt: skip


def ceil_mode_pools_as_padding(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with the module docstring's rewrite in every Relax function."""
    out = mod
    for gvar, func in mod.functions_items():
        if isinstance(func, relax.Function):
            new = _Rewriter().visit_expr(func)
            if not new.same_as(func):
                out = tvm.IRModule(dict(out.functions_items()), attrs=out.attrs) if out is mod else out
                out[gvar] = new
    return out
