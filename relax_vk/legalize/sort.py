"""``relax.topk``, ``relax.sort`` and ``relax.argsort``, which TVM 0.27 has no legalizer for.

Like the scans (:mod:`.scan`), TVM lowers them only through ``DispatchSortScan``, outside any
pipeline relax_vk runs: ONNX ``TopK`` reached VM code generation and failed ("CodeGenVM cannot
emit this Relax operator directly"). Here they are two reductions along the axis, with no data-
dependent control flow: each element's rank (how many elements come before it in the order:
larger ones first for a descending order, equal ones by index, so the order is stable), then
output ``j`` gathers the element of rank ``j`` (``n`` times the work of a sorting network along
an axis of ``n`` elements; the axes these ops see in models are short). An axis of run-time length
is taken as it is: ``sort`` and ``argsort`` give that many outputs, ``topk`` its ``k`` (ONNX and
PyTorch require ``k`` to be at most the axis's length; outputs past a shorter axis would read 0).
"""

from __future__ import annotations

from typing import List

from tvm import relax, te, tirx


def _rank(x: te.Tensor, axis: int, descending: bool) -> te.Tensor:
    ndim = len(x.shape)

    def value(*idx):
        i = te.reduce_axis((0, x.shape[axis]), name="i")
        k = idx[axis]
        other = x[tuple(i if d == axis else idx[d] for d in range(ndim))]
        mine = x[idx]
        before = (other > mine) if descending else (other < mine)
        before = tirx.Or(before, tirx.And(other == mine, i < k))
        return te.sum(tirx.Select(before, tirx.const(1, "int32"), tirx.const(0, "int32")), axis=i)

    return te.compute(x.shape, value, name="rank")


def sorted_compute(x: te.Tensor, axis: int, k, descending: bool, index_dtype: str) -> List[te.Tensor]:
    """``[values, indices]`` of the first ``k`` elements of ``x`` along ``axis`` in the order
    (descending or ascending; equal elements by index)."""
    ndim = len(x.shape)
    axis = int(axis) % ndim
    rank = _rank(x, axis, descending)
    shape = [k if d == axis else x.shape[d] for d in range(ndim)]

    def pick(what):
        def value(*idx):
            i = te.reduce_axis((0, x.shape[axis]), name="i")
            at = tuple(i if d == axis else idx[d] for d in range(ndim))
            hit = rank[at] == idx[axis]
            if what == "values":
                return te.sum(tirx.Select(hit, x[at], tirx.const(0, x.dtype)), axis=i)
            return te.sum(tirx.Select(hit, i.var.astype(index_dtype), tirx.const(0, index_dtype)), axis=i)

        return value

    values = te.compute(shape, pick("values"), name="sorted_values")
    indices = te.compute(shape, pick("indices"), name="sorted_indices")
    return [values, indices]


def _axis_length(call: relax.Call, axis: int):
    """The length of ``call``'s input along ``axis``: an int, or the run-time dim's expression."""
    n = call.args[0].ty.shape.values[int(axis) % call.args[0].ty.ndim]
    return int(n) if isinstance(n, tirx.IntImm) else n


def legalize_topk(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    a = call.attrs
    n = _axis_length(call, a.axis)
    k = n if int(a.k) < 1 else (min(int(a.k), n) if isinstance(n, int) else int(a.k))
    both = bb.call_te(sorted_compute, call.args[0], int(a.axis), k, bool(a.largest), str(a.dtype), primfunc_name_hint="topk")
    ret = str(a.ret_type)
    if ret == "values":
        return relax.TupleGetItem(both, 0)
    if ret == "indices":
        return relax.TupleGetItem(both, 1)
    return both


def legalize_sort(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    a = call.attrs
    both = bb.call_te(sorted_compute, call.args[0], int(a.axis), _axis_length(call, a.axis), bool(a.descending), "int32", primfunc_name_hint="sort")
    return relax.TupleGetItem(both, 0)


def legalize_argsort(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    a = call.attrs
    both = bb.call_te(sorted_compute, call.args[0], int(a.axis), _axis_length(call, a.axis), bool(a.descending), str(a.dtype), primfunc_name_hint="argsort")
    return relax.TupleGetItem(both, 1)
