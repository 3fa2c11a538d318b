"""``relax.cumsum`` / ``relax.cumprod``, which TVM 0.27 has no legalizer for.

TVM lowers them only through ``DispatchSortScan`` (CUDA-style scan kernels, a serial CPU loop),
outside any pipeline relax_vk runs; left alone they reach VM code generation and fail ("CodeGenVM
cannot emit this Relax operator directly"; TVM's own llvm build fails the same way). ONNX
``CumSum`` and PyTorch's ``cumsum`` import to them. Here each output element is a reduction over
the scanned axis with the elements past it masked to the reducer's identity:
``y[..., i, ...] = sum_k (k <= i ? x[..., k, ...] : 0)`` (``k < i`` when exclusive). That is
``n`` times the work of a sequential scan along an axis of ``n`` elements, and a plain reduction
kernel every schedule rule handles.
"""

from __future__ import annotations

from typing import Optional

from tvm import relax, te, tirx


def scan_compute(x: te.Tensor, axis: Optional[int], exclusive: bool, dtype: Optional[str], product: bool) -> te.Tensor:
    """Inclusive (or exclusive) cumulative sum or product of ``x`` along ``axis`` (None: of the
    flattened ``x``, as numpy)."""
    from tvm import topi

    if axis is None:
        x = topi.reshape(x, [int(_numel(x))])
        axis = 0
    ndim = len(x.shape)
    axis = int(axis) % ndim
    out_dtype = str(dtype) if dtype else str(x.dtype)
    extent = x.shape[axis]
    if product:
        reducer = te.comm_reducer(lambda a, b: a * b, lambda t: tirx.const(1, t), name="product")
        identity = tirx.const(1, out_dtype)
    else:
        reducer = te.sum
        identity = tirx.const(0, out_dtype)

    def value(*idx):
        k = te.reduce_axis((0, extent), name="k")
        i = idx[axis]
        inside = k < i if exclusive else k <= i
        term = x[tuple(k if d == axis else idx[d] for d in range(ndim))].astype(out_dtype)
        return reducer(tirx.Select(inside, term, identity), axis=k)

    return te.compute(x.shape, value, name="cumprod" if product else "cumsum")


def _numel(x: te.Tensor) -> int:
    n = 1
    for d in x.shape:
        n *= int(d)
    return n


def _legalizer(product: bool):
    def legalize(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        a = call.attrs
        axis = None if a.axis is None else int(a.axis)
        dtype = str(a.dtype) if a.dtype is not None and str(a.dtype) else None
        exclusive = bool(a.exclusive) if a.exclusive is not None else False
        name = "cumprod" if product else "cumsum"
        return bb.call_te(scan_compute, call.args[0], axis, exclusive, dtype, product, primfunc_name_hint=name)

    return legalize


legalize_cumsum = _legalizer(product=False)
legalize_cumprod = _legalizer(product=True)
