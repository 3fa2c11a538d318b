"""A model's shape read back where the entries read are static.

TVM's ONNX importer reads a tensor's shape as a tensor (``shape_of`` then ``shape_to_tensor``) to
wrap a ``Gather``'s negative indices (``where(i < 0, i + shape[axis], i)``). At fixed sizes that
folds away; at run-time dims the shape tensor is not a constant, so the model gains int64 kernels
that read it (which WGSL cannot bind: a storage buffer holds 16- and 32-bit values) for an entry
that is known anyway (a channel count). :func:`fold_static_shape_entries` replaces each ``take`` of
such a shape tensor at constant indices whose entries are all static by the constant, and folds
what then reads only constants.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax, tirx
from tvm.ir import GenericConst


def _static_entries(shape_values, indices, wrap: bool) -> "np.ndarray | None":
    """The entries of ``shape_values`` at the int array ``indices`` (negative ones wrapped where
    ``wrap``, as ``take(mode="wrap")`` and ONNX read them), or None when one is not a constant or
    an index lies outside without ``wrap``."""
    n = len(shape_values)
    picked = []
    for i in np.asarray(indices).reshape(-1):
        if not wrap and not 0 <= int(i) < n:
            return None
        value = shape_values[int(i) % n]
        if not isinstance(value, tirx.IntImm):
            return None
        picked.append(int(value))
    return np.array(picked, np.int64).reshape(np.asarray(indices).shape)


def fold_static_shape_entries(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with ``take(shape_to_tensor(shape), constant indices)`` of static entries made
    constants in ``main``, then TVM's constant folding (module docstring); ``mod`` itself when
    there is none."""
    to_tensor, take = tvm.ir.Op.get("relax.shape_to_tensor"), tvm.ir.Op.get("relax.take")

    @relax.expr_functor.mutator
    class _Fold(relax.PyExprMutator):
        def __init__(self, module):
            super().__init__(module)
            self.shapes = {}
            self.folded = 0

        def visit_var_binding_(self, binding):
            value = binding.value
            if isinstance(value, relax.Call) and value.op.same_as(to_tensor):
                ty = value.args[0].ty
                if isinstance(ty, relax.ShapeType) and ty.values is not None:
                    self.shapes[binding.var] = list(ty.values)
            elif isinstance(value, relax.Call) and value.op.same_as(take) and isinstance(value.args[1], GenericConst):
                data = value.args[0]
                values = self.shapes.get(data) if isinstance(data, relax.Var) else None
                axis = value.attrs.axis
                if values is not None and (axis is None or int(axis) == 0):
                    entries = _static_entries(values, value.args[1].value.numpy(), str(value.attrs.mode) == "wrap")
                    if entries is not None:
                        self.folded += 1
                        self.builder_.emit_normalized(relax.VarBinding(binding.var, relax.const(entries, "int64")))
                        return
            super().visit_var_binding_(binding)

    main = mod["main"]
    folder = _Fold(mod)
    body = folder.visit_expr(main.body)
    if not folder.folded:
        return mod
    out = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    out["main"] = relax.Function(main.params, body, None, main.is_pure, main.attrs, main.span)
    return relax.transform.FoldConstant()(relax.transform.DeadCodeElimination()(relax.transform.Normalize()(out)))
