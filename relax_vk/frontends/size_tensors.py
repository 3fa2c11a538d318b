"""Tensors of run-time sizes: what an index computed from a size needs to be on the device.

``e.select(1, e.shape[1] - 1)`` (PyTorch) and ONNX ``Gather`` at ``Shape(e)[1] - 1`` index a
tensor at a size's expression, ``T - 1``. TVM's converters take an index tensor there and failed
("value has to be scalar or Tensor", "'dtype' object has no attribute 'dtype'"). A 0-d tensor
holding the expression, computed by a one-thread kernel from the dims it takes as scalar
arguments, is such an index (:func:`size_tensor`, :func:`take_at_size`).
"""

from __future__ import annotations


def size_tensor(bb, value, dtype: str = "int64"):
    """A 0-d ``dtype`` tensor holding the integer expression ``value`` of run-time dims (a
    kernel of its own, the dims its scalar arguments)."""
    from tvm import relax, te, tirx

    dims = list(tirx.analysis.undefined_vars(value))
    out = te.compute((), lambda: tirx.Cast(dtype, value) if str(value.ty.dtype) != dtype else value, name="size")
    kernel = bb.add_func(te.create_prim_func([*dims, out]), "size_value")
    return bb.emit(relax.call_tir(kernel, relax.Tuple(dims), relax.TensorType((), dtype)))


def take_at_size(bb, data, index, axis: int):
    """``data`` at the run-time ``index`` (an expression of the dims; negative counts from the
    end, as PyTorch and ONNX read it) along ``axis``, which it removes."""
    from tvm import relax

    return relax.op.take(data, size_tensor(bb, index), axis=axis, mode="wrap")
