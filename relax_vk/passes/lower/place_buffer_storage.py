"""PlaceBufferStorage: byte storages allocated through a ``"global"`` VDevice, never a texture one.

TVM's ``StaticPlanBlockMemory`` pools its storage tokens by storage scope and dtype only, and on
relax_vk's targets a texture tensor's token has the scope ``"global"`` (``DeviceScopeCompatibility``),
so a buffer tensor can reuse a token first made for a texture tensor; the storage keeps the device
index of the tensor it was made for: the texture VDevice. :class:`~relax_vk.passes.PlanTextureStorage`
then moves the texture tensors into image storages and leaves the byte storage, with that device
index, to the buffers (``docs/tvm_runtime.md``: mobilenet_v2's ``(1, 1280)`` pooled features, an
8 KiB storage on the ``global.texture`` VDevice).

:func:`relax_vk.load_vm` gives texture VDevices TVM's naive allocator (``relax_vk.tvm_runtime``'s
docstring: it must never pool an image where a buffer could be handed it). TVM's OpenCL allocator
takes a ``"global"`` storage's buffer from the pooled instance but frees it into the instance that
allocated it, the naive one, whose pool nothing allocates from: such a storage was a new buffer on
every call, none released until the VM went. Through the ``"global"`` VDevice of the same device it
comes from and goes back to the pooled allocator, which hands it to the next call
(:class:`~relax_vk.passes.RoundBufferStorage` makes its size reusable).

Runs after :class:`~relax_vk.passes.PlanTextureStorage` (relax_vk's finalize stage).

Requires: ``R.vm.alloc_storage`` (after ``LowerRuntimeBuiltin``), VDevices in the module's
``global_infos``.

Guarantees: every ``alloc_storage`` of scope ``"global"`` (or unscoped) whose device index names a
VDevice of another memory scope (a texture) names instead a ``"global"`` VDevice of the same target
kind and ``vdevice_id`` (the first such, else one appended to the module's VDevices: existing
indices do not change). The storage's shape, dtype and scope, its tensors (and the scopes they are
viewed in) and every texture-scoped storage are unchanged, so texture VDevices allocate images only.
"""

from __future__ import annotations

from typing import List, Optional

import tvm
import tvm.relax.op.vm as vm_op
from tvm import relax

from .plan_texture_storage import _ALLOC_STORAGE, _global_twin, _op_name, vdevices


def _is_buffer_scope(scope) -> bool:
    return str(getattr(scope, "value", "")) in ("", "global")


def misplaced_buffer_storages(mod: tvm.IRModule) -> List[relax.Call]:
    """The byte (``"global"`` or unscoped) ``alloc_storage`` calls of ``mod``'s Relax functions whose
    device is a VDevice of another scope (what this pass moves)."""
    devices = vdevices(mod)
    out: List[relax.Call] = []

    def visit(expr):
        if isinstance(expr, relax.Call) and _op_name(expr) == _ALLOC_STORAGE:
            index = _device_index(expr, devices)
            if index is not None and str(devices[index].memory_scope) != "global" and _is_buffer_scope(expr.args[3]):
                out.append(expr)

    for _, func in mod.functions_items():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func.body, visit)
    return out


def _device_index(call: relax.Call, devices) -> Optional[int]:
    device = call.args[1]
    if not isinstance(device, tvm.tirx.IntImm):
        return None
    index = int(device.value)
    return index if 0 <= index < len(devices) else None


class _Placer:
    """The ``"global"`` twin of each VDevice, appending one to the module's VDevices where none exists."""

    def __init__(self, devices: List[relax.VDevice]) -> None:
        self.devices = list(devices)
        self.added = False

    def twin(self, index: int) -> int:
        found = _global_twin(self.devices, index)
        if found is None:
            dev = self.devices[index]
            self.devices.append(relax.VDevice(dev.target, int(dev.vdevice_id), "global"))
            self.added, found = True, len(self.devices) - 1
        return found

    def place(self, call: relax.Call) -> Optional[relax.Call]:
        index = _device_index(call, self.devices)
        shape, _, dtype, scope = call.args
        if index is None or str(self.devices[index].memory_scope) == "global" or not _is_buffer_scope(scope):
            return None
        return vm_op.alloc_storage(shape, self.twin(index), dtype, scope)

    def rewrite(self, expr):
        if not isinstance(expr, relax.SeqExpr):
            return expr
        blocks, changed = [], False
        for block in expr.blocks:
            out = []
            for b in block.bindings:
                if isinstance(b, relax.VarBinding) and _op_name(b.value) == _ALLOC_STORAGE:
                    new = self.place(b.value)
                    if new is not None:
                        b, changed = relax.VarBinding(b.var, new), True
                elif isinstance(b, relax.VarBinding) and isinstance(b.value, relax.If):
                    then, other = self.rewrite(b.value.true_branch), self.rewrite(b.value.false_branch)
                    if not (then.same_as(b.value.true_branch) and other.same_as(b.value.false_branch)):
                        b, changed = relax.VarBinding(b.var, relax.If(b.value.cond, then, other)), True
                out.append(b)
            blocks.append(relax.BindingBlock(out) if not isinstance(block, relax.DataflowBlock) else relax.DataflowBlock(out))
        return relax.SeqExpr(blocks, expr.body) if changed else expr


def PlaceBufferStorage() -> tvm.transform.Pass:
    """Byte storages on ``"global"`` VDevices (module docstring)."""

    @tvm.transform.module_pass(opt_level=0, name="relax_vk.PlaceBufferStorage")
    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        devices = vdevices(mod)
        if not devices or all(str(d.memory_scope) == "global" for d in devices):
            return mod
        placer = _Placer(devices)
        updates = {}
        for gv, func in mod.functions_items():
            if not isinstance(func, relax.Function):
                continue
            body = placer.rewrite(func.body)
            if not body.same_as(func.body):
                updates[gv] = relax.BlockBuilder().normalize(
                    relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs, func.span)
                )
        if not updates:
            return mod
        mod = mod.clone()
        for gv, func in updates.items():
            mod[gv] = func
        if placer.added:
            mod.update_global_info("vdevice", placer.devices)
        return mod

    return transform
