"""ONNX ``Reshape`` of a shape value: a size computed from ``Shape`` reshaped to one element.

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
