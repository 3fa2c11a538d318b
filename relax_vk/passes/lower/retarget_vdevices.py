"""``RetargetVDevices``: move every VDevice of one target kind to another target, keeping its
memory scope and id.

Contract: requires a module whose VDevices are in ``global_infos["vdevice"]`` (what
``DefineVDevice`` guarantees). Guarantees the same module, tensor for tensor and scope for scope,
with each VDevice of ``from_kind`` replaced by one on ``target``, everywhere a VDevice can appear:
``global_infos``, parameter and binding types, constants, ``ty_args`` (call_tir's ``out_ty`` and the
ops kept for scoping) and ``to_vdevice``'s destination. (TVM's ``UpdateVDevice`` misses ``ty_args``
and leaves the module inconsistent.) relax_vk's Vulkan build uses it between the scope stages and
lowering: the plan is made for the Vulkan target, the kernels are lowered under
:func:`relax_vk.core.target.lowering_target` (TVM's texture lowering is keyed to OpenCL-kind targets).
"""

from __future__ import annotations

from typing import Dict, Tuple

import tvm
from tvm import relax
from tvm.ir.expr import GenericConst


def _key(vdev) -> Tuple[str, int, str]:
    return (vdev.target.kind.name, int(vdev.vdevice_id), str(vdev.memory_scope))


@relax.expr_functor.mutator
class _Retargeter(relax.PyExprMutator):
    def __init__(self, mod, table: Dict[Tuple[str, int, str], relax.VDevice]):
        super().__init__(mod)
        self.table = table

    def retype(self, ty):
        if isinstance(ty, relax.TensorType) and ty.vdevice is not None and ty.vdevice.target is not None:
            new = self.table.get(_key(ty.vdevice))
            return relax.TensorType(ty.shape, ty.dtype, new) if new is not None else ty
        if isinstance(ty, relax.TupleType):
            return relax.TupleType([self.retype(f) for f in ty.fields])
        return ty

    def visit_var_def_(self, var):
        ty = self.retype(var.ty)
        return var if ty.same_as(var.ty) else relax.Var(var.name, ty)

    def operand(self, expr):
        if isinstance(expr, GenericConst):
            ty = self.retype(expr.ty)
            return expr if ty.same_as(expr.ty) else GenericConst(expr.value, ty)
        return self.visit_expr(expr)

    def visit_tuple_(self, tup):
        return relax.Tuple([self.operand(f) for f in tup.fields])

    def visit_call_(self, call):
        args = [self.operand(a) for a in call.args]
        ty_args = [self.retype(t) for t in call.ty_args]
        attrs = call.attrs
        if isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.to_vdevice":
            new = self.table.get(_key(attrs.dst_vdevice))
            if new is not None:
                return relax.op.to_vdevice(args[0], new)
        return relax.Call(self.visit_expr(call.op), args, attrs, ty_args)


def RetargetVDevices(from_kind: str, target: tvm.target.Target) -> tvm.transform.Pass:
    """See the module docstring."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        vdevices = list(mod.global_infos["vdevice"]) if "vdevice" in mod.global_infos else []
        table = {}
        moved = []
        for vdev in vdevices:
            if vdev.target is not None and vdev.target.kind.name == from_kind:
                new = relax.VDevice(target, int(vdev.vdevice_id), str(vdev.memory_scope))
                table[_key(vdev)] = new
                moved.append(new)
            else:
                moved.append(vdev)
        if not table:
            return mod
        out = mod.clone()
        out.update_global_info("vdevice", moved)
        mutator = _Retargeter(out, table)
        for gvar, func in mod.functions_items():
            if isinstance(func, relax.Function):
                out[gvar] = mutator.visit_expr(func)
        return relax.transform.Normalize()(out)

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.RetargetVDevices")
