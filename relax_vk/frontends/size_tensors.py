"""Kernels that compute from run-time sizes: the dims they read are scalar arguments.

``e.select(1, e.shape[1] - 1)`` (PyTorch) and ONNX ``Gather`` at ``Shape(e)[1] - 1`` index a
tensor at a size's expression, ``T - 1``. TVM's converters take an index tensor there and failed
("value has to be scalar or Tensor", "'dtype' object has no attribute 'dtype'"). A 0-d tensor
holding the expression, computed by a one-thread kernel from the dims it takes as scalar
arguments, is such an index (:func:`size_tensor`, :func:`take_at_size`). An elementwise op of a
tensor and sizes (``x / x.shape[1]``, ``x.clamp(0, x.shape[2] - 1)``) is one kernel the same way
(:func:`sized_elementwise`).
"""

from __future__ import annotations


def _scalar_dims(shape, sizes) -> list:
    """The dims ``sizes`` read that a kernel over a tensor of ``shape`` takes as scalar arguments:
    all but those that are an axis of their own (TVM binds a variable from a buffer's shape only
    there; ``s`` in an axis ``s + 3`` is an argument)."""
    from tvm import tirx

    named = {d.name for d in shape if isinstance(d, tirx.Var)}
    dims: list = []
    for size in sizes:
        dims += [v for v in tirx.analysis.undefined_vars(size) if v.name not in named and all(v.name != d.name for d in dims)]
    return dims


def _as(dtype: str, value):
    from tvm import tirx

    return tirx.Cast(dtype, value) if str(value.ty.dtype) != dtype else value


def _kernel(tensors):
    """The PrimFunc of ``tensors`` with no ``global_symbol`` of its own: ``create_prim_func``
    names it ``main``, which clashed with the Relax ``main`` where nothing renamed it (the CPU
    reference's llvm build: "duplicate global symbol: main" for a model with roll over a run-time
    dim)."""
    from tvm import te

    return te.create_prim_func(tensors).without_attr("global_symbol")


def size_tensor(bb, value, dtype: str = "int64"):
    """A 0-d ``dtype`` tensor holding the integer expression ``value`` of run-time dims (a
    kernel of its own, the dims its scalar arguments)."""
    from tvm import relax, te

    dims = _scalar_dims((), [value])
    out = te.compute((), lambda: _as(dtype, value), name="size")
    kernel = bb.add_func(_kernel([*dims, out]), "size_value")
    return bb.emit(relax.call_tir(kernel, relax.Tuple(dims), relax.TensorType((), dtype)))


def sized_elementwise(bb, tensor, sizes, compute):
    """One elementwise kernel ``compute(x, *sizes)`` over ``tensor``, the run-time ``sizes`` cast to
    its dtype and computed from the dims it takes as scalar arguments."""
    from tvm import relax, te

    dtype = str(tensor.ty.dtype)
    shape = list(tensor.ty.shape.values)
    data = te.placeholder(shape, dtype, name="x")
    dims = _scalar_dims(shape, sizes)
    values = [_as(dtype, size) for size in sizes]
    out = te.compute(shape, lambda *i: compute(data(*i), *values), name="with_size")
    kernel = bb.add_func(_kernel([data, *dims, out]), "with_size")
    return bb.emit(relax.call_tir(kernel, relax.Tuple([tensor, *dims]), relax.TensorType(shape, dtype)))


def take_at_size(bb, data, index, axis: int):
    """``data`` at the run-time ``index`` (an expression of the dims; negative counts from the
    end, as PyTorch and ONNX read it) along ``axis``, which it removes."""
    from tvm import relax

    return relax.op.take(data, size_tensor(bb, index), axis=axis, mode="wrap")
