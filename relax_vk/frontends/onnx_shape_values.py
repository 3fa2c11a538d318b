"""ONNX ops over shape values: a size computed from ``Shape`` reshaped to one element, and a
``Range`` up to such a size.

TVM's ONNX importer carries sizes computed at run time (``Shape -> Gather -> Mul``) as shape
values: a scalar is a ``PrimExpr`` (``B * 4``), a list a ``ShapeExpr``. Its ``Unsqueeze`` turns a
scalar into a one-element ``ShapeExpr``, but its ``Reshape`` takes only tensors ("Reshape expects
the input data to be a Tensor. However, the given input is ir.PrimType"). ``torch.onnx``'s dynamo
exporter writes ``Reshape(size, [1])`` or ``Reshape(size, [-1])`` where the TorchScript exporter
wrote ``Unsqueeze``: every ``view`` of a ``MultiheadAttention`` whose target names a run-time batch
times the heads. Here such a reshape gives the one-element ``ShapeExpr`` ``Unsqueeze`` gives (and a
reshape to ``[]`` the scalar itself), so the size keeps its expression and the ``Concat`` and
``Reshape`` that consume it keep the tensor's shape. Any other reshape of a shape value stays with
TVM's converter.

``Range(start, limit, delta)`` with integer constants ``start`` and ``delta > 0`` and ``limit`` a
size (``torch.arange(x.shape[1])``: positions of a run-time sequence length), or whole-number
float constants and the size cast to float (``torch.arange(T, dtype=torch.float32)``, a sinusoidal
position encoding's positions: float positions of the integer range): TVM's converter gives
its length a fresh variable, so adding the positions' embedding to the tokens' cannot be proven
the same shape (an import error). Here it is ``arange`` with the length ``ceil((limit - start) /
delta)`` as an expression of the size (``T`` for ``arange(T)``).
"""

from __future__ import annotations


def convert_reshape(bb, inputs, attrs):
    import tvm
    from tvm import relax
    from tvm.ir import GenericConst

    data, shape = inputs[0], inputs[1]
    if not tvm.ir.is_prim_expr(data) or not isinstance(shape, GenericConst):
        return None
    target = [int(v) for v in shape.value.numpy().reshape(-1)]
    if target in ([1], [-1]):
        return relax.ShapeExpr([data])
    if not target and shape.value.numpy().ndim == 1:  # (a shape of no dims: the scalar as it is)
        return data
    return None


def convert_range(bb, inputs, attrs):
    import tvm
    from tvm import relax, tirx
    from tvm.ir import GenericConst
    from tvm.sym import Analyzer

    start, limit, delta = inputs[:3]
    if not (isinstance(start, GenericConst) and isinstance(delta, GenericConst)) or isinstance(limit, GenericConst):
        return None
    s, d = start.value.numpy(), delta.value.numpy()
    if s.size != 1 or d.size != 1 or s.dtype.kind not in "iuf" or d.dtype.kind not in "iuf" or float(d.reshape(-1)[0]) <= 0:
        return None
    if not tvm.ir.is_prim_expr(limit):  # (TVM 0.27 carries a scalar shape value as the expression itself)
        return None
    end = limit
    if s.dtype.kind == "f" or d.dtype.kind == "f":  # (torch.arange(T, dtype=float32): whole-number start and step, the end a size cast)
        whole = all(float(v.reshape(-1)[0]).is_integer() for v in (s, d))
        if not (whole and isinstance(end, tirx.Cast) and str(end.value.ty.dtype).startswith(("int", "uint"))):
            return None
        end = end.value
    s, d = int(s.reshape(-1)[0]), int(d.reshape(-1)[0])
    end = tirx.Cast("int64", end) if str(end.ty) != "int64" else end
    count = tirx.floordiv(end - s + (d - 1), d)  # (a size is never negative: from start <= 0, no clamp at 0)
    count = Analyzer().simplify(count if s <= 0 else tirx.max(count, 0))
    dtype = str(start.value.numpy().dtype)
    positions = bb.normalize(relax.op.arange(0, count, 1, "int64"))
    if (s, d) != (0, 1):
        positions = bb.normalize(relax.op.add(relax.op.multiply(positions, relax.const(d, "int64")), relax.const(s, "int64")))
    return positions if dtype == "int64" else relax.op.astype(positions, dtype)


def convert_gather(bb, inputs, attrs):
    """``Gather`` of a tensor at one index computed from a run-time size (``Shape(e)[1] - 1``,
    torch.onnx's ``e.select(1, e.shape[1] - 1)``): a take at a size tensor
    (:mod:`relax_vk.frontends.size_tensors`); TVM's converter failed on a size as the index.
    None (TVM's converter) for any other gather."""
    import tvm
    from tvm import relax

    from .size_tensors import take_at_size

    data, index = inputs[0], inputs[1]
    size = tvm.ir.is_prim_expr(index) and not isinstance(index, tvm.tirx.IntImm) and not isinstance(getattr(index, "ty", None), relax.TensorType)
    if not size or not isinstance(getattr(data, "ty", None), relax.TensorType):
        return None
    axis = int(attrs.get("axis", 0)) % data.ty.ndim
    return take_at_size(bb, data, index, axis)


def convert_div(bb, inputs, attrs):
    """``Div`` of a size by a positive integer constant (``Shape(x)[2] - 1`` by 2: the dynamo exporter
    computes a strided conv's output size so), as floor division where the size is never negative
    over the dims' ranges: ONNX's integer ``Div`` truncates, and TVM imports it as ``truncdiv``,
    which it cannot prove equal to the conv's own ``floordiv`` size (an ``Add`` of the two lost its
    shape). The two agree on non-negative sizes. None (TVM's converter) otherwise."""
    import tvm
    from tvm import relax, tirx
    from tvm.ir import GenericConst

    from ..core.dims import bounded_analyzer
    from .onnx_slice import current_ranges

    a, b = inputs[0], inputs[1]
    if not tvm.ir.is_prim_expr(a) or isinstance(a, tirx.IntImm) or isinstance(getattr(a, "ty", None), relax.TensorType):
        return None
    if isinstance(b, GenericConst) and b.value.numpy().size == 1:
        b = int(b.value.numpy().reshape(-1)[0]) if b.value.numpy().dtype.kind in "iu" else None
    elif isinstance(b, tirx.IntImm):
        b = int(b)
    else:
        b = None
    if b is None or b < 1 or not str(a.ty.dtype).startswith("int"):
        return None
    ranges = current_ranges()
    variables = tirx.analysis.undefined_vars(a)
    if any(str(v.name) not in ranges for v in variables) or not bounded_analyzer(variables, ranges).can_prove(a >= 0):
        return None
    return tirx.floordiv(a, tirx.const(b, str(a.ty.dtype)))
