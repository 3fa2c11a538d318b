"""CheckStaticShapes: a model whose tensor shapes depend on its input *values* is refused by name.

Requires: runs after :class:`~relax_vk.passes.layout.fold_small_constants.FoldSmallConstants`
(which folds ``nonzero`` of a constant and binds the sizes it fixes).

Guarantees: nothing changes; a ``match_cast`` in ``main`` that defines a symbolic size no
parameter defines (what TVM's importers write after ``nonzero`` and ONNX ``Compress``/``NonZero``
with a condition given at run time) raises :class:`~relax_vk.core.errors.UnsupportedError` naming
the op that computes it, the variable and the model op (``relax_vk.model_ops``). relax_vk's
runtimes run a fixed sequence of kernels on buffers sized at build time; such a model used to fail
later in lowering or export with an error about a packed call or an int64 buffer.
"""

from __future__ import annotations

from typing import Set

import tvm
from tvm import relax, tirx

from ...core.errors import UnsupportedError
from ...core.provenance import model_op_names


def _shape_vars(ty) -> Set[tirx.Var]:
    found: Set[tirx.Var] = set()
    shapes = [ty.shape] if isinstance(ty, relax.TensorType) and ty.shape is not None else []
    if isinstance(ty, relax.TupleType):
        return set().union(*(_shape_vars(f) for f in ty.fields)) if ty.fields else found
    for shape in shapes:
        for dim in getattr(shape, "values", []):
            found.update(tirx.analysis.undefined_vars(dim))
    return found


def _check(func: relax.Function) -> None:
    defined: Set[tirx.Var] = set().union(*(_shape_vars(p.ty) for p in func.params)) if func.params else set()
    made_by = model_op_names(func)
    values = {}
    for block in getattr(func.body, "blocks", []):
        for b in block.bindings:
            values[b.var] = b.value
            if not isinstance(b, relax.MatchCast):
                continue
            new = _shape_vars(b.ty) - defined
            if new:
                value = b.value
                while isinstance(value, relax.Var) and value in values:  # (the call the cast reads)
                    value = values[value]
                op = value.op.name if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) else type(value).__name__
                source = made_by.get(b.var.name) or next((made_by[v.name] for v, x in values.items() if x.same_as(value) and v.name in made_by), None)
                raise UnsupportedError(
                    f"{op} (computing {b.var.name}{f', model op {source}' if source else ''}): its shape "
                    f"({', '.join(sorted(v.name for v in new))}) depends on the input's values (ONNX NonZero, Compress by a "
                    "run-time condition); relax_vk runs static shapes only: make the condition a constant"
                )
            defined |= _shape_vars(b.ty)


def CheckStaticShapes() -> tvm.transform.Pass:
    """Refuse ``main`` when a tensor's shape depends on input values (module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        for gvar, func in mod.functions_items():
            if isinstance(func, relax.Function) and gvar.name_hint == "main":
                _check(func)
        return mod

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.CheckStaticShapes")
