"""ONNX ``Expand`` to a constant shape of a tensor with run-time dims.

TVM's converter reads every input dim as a number when the target shape is a constant
(``dim.value``), so it fails on a run-time dim (an ``AttributeError`` at import): what
``torch.onnx`` writes for ``x[:, :1].expand(-1, C, -1, -1)`` over a map of run-time height and
width. Here the target is aligned with the input from the right, as ONNX's multidirectional
broadcasting aligns them, and each output dim is

* the input's, where the target says 1 (or -1, which TVM also reads as "keep"): a run-time dim
  stays one;
* the target's otherwise (an input dim of 1 broadcast; a run-time input dim must then be 1 or the
  target's at run time, which ONNX requires of the model);
* refused, naming the node's dims, where a static input dim is neither 1 nor the target's.

A target that is not a constant, or an input of static shape, stays with TVM's converter.
"""

from __future__ import annotations

from .errors import onnx_node


def convert_expand(bb, inputs, attrs):
    from tvm import relax, tirx
    from tvm.ir import GenericConst

    from ..core.errors import UnsupportedError

    data, shape = inputs
    if not isinstance(shape, GenericConst) or not isinstance(data.ty, relax.TensorType) or data.ty.shape is None:
        return None
    dims = list(data.ty.shape.values)
    if all(isinstance(d, tirx.IntImm) for d in dims):
        return None
    target = [int(v) for v in shape.value.numpy().reshape(-1)]
    rank = max(len(dims), len(target))
    dims = [tirx.IntImm("int64", 1)] * (rank - len(dims)) + dims
    target = [1] * (rank - len(target)) + target
    out = []
    for d, t in zip(dims, target):
        if t in (1, -1):
            out.append(d)
        elif isinstance(d, tirx.IntImm) and int(d) not in (1, t):
            raise UnsupportedError(f"{onnx_node(attrs, 'Expand')}: cannot broadcast {list(data.ty.shape.values)} to {target}")
        else:
            out.append(tirx.IntImm("int64", t))
    return relax.op.broadcast_to(data, relax.ShapeExpr(out))
