"""The storages TVM's Relax VM allocates for a compiled program.

:func:`vm_storages` reads the ``R.vm.alloc_storage`` calls of a module after the whole pipeline
(``relax_vk.get_pipeline(target)(mod)``: what ``tvm.compile`` hands to its VM codegen) and, for
each, the tensors allocated from it. A texture-scoped storage is one image: TVM's OpenCL runtime
flattens its shape with its scope into ``(width, height, layers)`` RGBA texels
(:meth:`relax_vk.core.scope.MemoryScope.image_extents`). Tools and tests compare these with
relax_vk's own runtime (:meth:`relax_vk.compiler.CompiledModule.artifact`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import tvm
from tvm import relax

from ..core.scope import scope_from_name, static_shape
from ..storage.lifetimes import image_bytes


@dataclass
class VMStorage:
    """One ``alloc_storage``: device index, scope, dtype hint, shape, bytes, image (textures) and
    the ``(shape, dtype)`` of every tensor allocated from it."""

    function: str
    name: str
    device: int
    scope: str
    dtype: str
    shape: Tuple[int, ...]
    bytes: int
    image: Optional[Tuple[int, int, int]] = None
    tensors: List[Tuple[Tuple[int, ...], str]] = field(default_factory=list)

    @property
    def is_texture(self) -> bool:
        return self.image is not None


def _storage(function: str, var: relax.Var, call: relax.Call) -> Optional[VMStorage]:
    shape_expr, device, dtype, scope = call.args
    shape = static_shape(shape_expr.values) if isinstance(shape_expr, relax.ShapeExpr) else None
    if shape is None:
        return None
    dtype_name, scope_name = str(dtype.value), str(scope.value)
    if "texture" in scope_name:
        image = scope_from_name(scope_name).image_extents(shape).as_tuple()
        return VMStorage(function, str(var.name), int(device.value), scope_name, dtype_name, shape, image_bytes(image, dtype_name), image)
    return VMStorage(function, str(var.name), int(device.value), scope_name, dtype_name, shape,
                     math.prod(shape) * tvm.DataType(dtype_name).bits // 8)  # fmt: skip


def vm_storages(mod: tvm.IRModule) -> List[VMStorage]:
    """Every static ``R.vm.alloc_storage`` of ``mod``'s Relax functions, in program order; the
    functions :class:`~relax_vk.passes.HoistImageStorage` adds are copies of another's storages
    (``F__images`` / ``F__with_images``) and are skipped."""
    from ..passes.lower.hoist_image_storage import IMAGES_OF

    out: List[VMStorage] = []
    for gv, func in mod.functions_items():
        if not isinstance(func, relax.Function) or (func.attrs is not None and IMAGES_OF in func.attrs):
            continue
        by_var = {}

        def visit(expr, name=str(gv.name_hint)):
            if isinstance(expr, relax.VarBinding) and isinstance(expr.value, relax.Call) and isinstance(expr.value.op, tvm.ir.Op):
                op = str(expr.value.op.name)
                if op == "relax.vm.alloc_storage":
                    storage = _storage(name, expr.var, expr.value)
                    if storage is not None:
                        by_var[expr.var] = storage
                        out.append(storage)
                elif op == "relax.vm.alloc_tensor" and expr.value.args[0] in by_var:
                    _, _, shape, dtype, _ = expr.value.args
                    by_var[expr.value.args[0]].tensors.append((static_shape(shape.values), str(dtype.value)))

        _walk(func.body, visit)
    return out


def _walk(expr, visit) -> None:
    """Visit every binding of ``expr``'s binding blocks, nested ones (``if`` branches) included."""
    if isinstance(expr, relax.SeqExpr):
        for block in expr.blocks:
            for binding in block.bindings:
                visit(binding)
                _walk(binding.value, visit)
        _walk(expr.body, visit)
    elif isinstance(expr, relax.If):
        _walk(expr.true_branch, visit)
        _walk(expr.false_branch, visit)
