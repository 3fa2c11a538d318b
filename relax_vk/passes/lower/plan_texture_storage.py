"""PlanTextureStorage: every texture tensor of TVM's VM program lives in an image storage of the
right size, shared where lifetimes allow.

TVM's ``StaticPlanBlockMemory`` plans a texture tensor as a ``"global"`` byte storage of
``DeviceGetMemSize`` bytes times the element size again (4x too large for float32), and the
Relax VM then *views* that buffer as an image on every ``alloc_tensor``: TVM's OpenCL runtime makes
the view an image of the buffer where the driver has ``cl_khr_image2d_from_buffer``, and otherwise
creates (and frees) a fresh image for every view on every call.

This pass runs right after TVM's ``LowerRuntimeBuiltin`` (``relax_vk.pipeline``'s finalize stage)
and re-plans the texture tensors of each binding block with relax_vk's own storage planner
(:func:`relax_vk.storage.planner.best_grouping`, the one the own runtime's plan uses), per device
and texel dtype:

* each group becomes one ``R.vm.alloc_storage(R.shape(image shape), device, dtype, scope)``: a
  texture-scoped storage whose shape flattens (TVM's texture flattening of ``scope``) to the
  group's image ``(width, height, layers)``, so TVM's OpenCL allocator creates the image itself
  (``AllocDataSpace`` with a scope), of exactly ``width * height * layers * 4`` texels;
* its tensors are allocated from it through a ``"global"`` VDevice of the same device, so the VM
  hands the image to the kernels as it is (no view image, no ``image2d_from_buffer``); only where
  the module has no such VDevice does the view keep its texture scope (TVM then views as before);
* the storage is killed right after its last ``alloc_tensor`` (as ``KillAfterLastUse`` does); a
  byte storage left without tensors is dropped with its kill, and one that TVM shared between
  textures and buffers shrinks to the bytes its buffers need.

Requires: ``R.vm.alloc_storage`` / ``R.vm.alloc_tensor`` / ``R.vm.kill_object`` (after
``LowerRuntimeBuiltin``), VDevices in the module's ``global_infos``.

Guarantees: every ``alloc_tensor`` of a texture VDevice with a static packed shape, offset 0 and a
float32/float16 dtype, from a storage bound in the same block, is moved to an image storage whose
bytes equal its image's; a tensor's storage is never shared with a tensor live at the same time
(lifetime: its ``alloc_tensor`` to its last use, which must be a kernel call, a kill or a shape
check; a tensor used after its block, or in any other way (a tuple, a view: it may live on in
another value), is live to the end of the block). Buffers keep TVM's plan. Texture tensors allocated elsewhere are left as they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set, Tuple

import tvm
import tvm.relax.op.vm as vm_op
from tvm import relax

from ...core.scope import TEXTURE, TEXTURE_WEIGHT, scope_from_name, static_shape
from ...storage.lifetimes import Lifetime, image_bytes
from ...storage.planner import best_grouping

_ALLOC_STORAGE = "relax.vm.alloc_storage"
_ALLOC_TENSOR = "relax.vm.alloc_tensor"
_KILL = "relax.vm.kill_object"


def _op_name(expr) -> Optional[str]:
    if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
        return str(expr.op.name)
    return None


def _int(expr) -> Optional[int]:
    return int(expr.value) if isinstance(expr, tvm.tirx.IntImm) else None


def vdevices(mod: tvm.IRModule) -> List[relax.VDevice]:
    """The module's VDevices in index order (what ``runtime_device_index`` refers to)."""
    infos = mod.global_infos
    return list(infos["vdevice"]) if "vdevice" in infos else []


def image_storage_shape(image: Tuple[int, int, int], scope: str) -> Tuple[int, ...]:
    """A storage shape that TVM's texture flattening in ``scope`` maps to ``image``
    (``(width, height, layers)``): ``(height, width, 4)`` for ``global.texture-weight`` (one
    layer), ``(layers, height, width, 4)`` otherwise."""
    width, height, layers = image
    if scope == TEXTURE_WEIGHT.name:
        if layers != 1:
            raise ValueError(f"{scope} images have one layer, not {layers}")
        shape: Tuple[int, ...] = (height, width, 4)
    else:
        shape = (layers, height, width, 4)
    if scope_from_name(scope).image_extents(shape).as_tuple() != tuple(image):  # (the flattening's own check)
        raise ValueError(f"no {scope} shape flattens to image {image}")
    return shape


@dataclass
class _Texture:
    """One texture ``alloc_tensor`` of a block."""

    index: int  # binding index in the block
    var: relax.Var
    call: relax.Call
    device: int
    scope: str
    dtype: str
    image: Tuple[int, int, int]
    last: int = 0


def _global_twin(devices: Sequence[relax.VDevice], index: int) -> Optional[int]:
    """The index of a ``"global"`` VDevice on the same device as VDevice ``index``."""
    dev = devices[index]
    for i, other in enumerate(devices):
        if str(other.memory_scope) == "global" and int(other.vdevice_id) == int(dev.vdevice_id) and (
            other.target.kind.name == dev.target.kind.name
        ):
            return i
    return None


def _texture_alloc(binding, storages: Dict[relax.Var, int], devices) -> Optional[Tuple[int, str, str, Tuple[int, int, int]]]:
    """``(device, scope, dtype, image)`` of a texture ``alloc_tensor`` this pass can move."""
    call = binding.value
    if _op_name(call) != _ALLOC_TENSOR or not isinstance(binding, relax.VarBinding):
        return None
    storage, offset, shape, dtype, device = call.args
    index = _int(device)
    if storage not in storages or _int(offset) != 0 or index is None or not 0 <= index < len(devices):
        return None
    scope = str(devices[index].memory_scope)
    if "texture" not in scope or not isinstance(shape, relax.ShapeExpr):
        return None
    dims = static_shape(shape.values)
    dtype_name = str(getattr(dtype, "value", ""))
    if dims is None or dtype_name not in ("float32", "float16"):
        return None
    try:
        image = scope_from_name(scope).image_extents(dims).as_tuple()
    except ValueError:
        return None
    return index, scope, dtype_name, image


def _end_byte(call: relax.Call) -> Optional[int]:
    """The byte after the end of a buffer ``alloc_tensor``'s tensor in its storage (None: not static)."""
    _, offset, shape, dtype, _ = call.args
    dims = static_shape(shape.values) if isinstance(shape, relax.ShapeExpr) else None
    start = _int(offset)
    if dims is None or start is None:
        return None
    return start + math.prod(dims) * tvm.DataType(str(getattr(dtype, "value", ""))).bits // 8


def _uses(expr) -> Set[relax.Var]:
    return set(relax.analysis.free_vars(expr)) if isinstance(expr, relax.Expr) else set()


def _reads_only(value, mod: tvm.IRModule) -> bool:
    """Whether a binding's uses of tensors end with it: a kernel call (a PrimFunc of the module,
    which writes its outputs in place and returns nothing), a kill, or one of the VM's checks. Any
    other use (a tuple, a view, a call that may return what it took) may keep the tensor alive
    through another value."""
    if not isinstance(value, relax.Call):
        return False
    if isinstance(value.op, tvm.ir.GlobalVar):
        return isinstance(mod[value.op], tvm.tirx.PrimFunc)
    name = _op_name(value)
    if name == _KILL:
        return True
    return isinstance(value.op, relax.ExternFunc) and str(value.op.global_symbol) in _CHECKS


_CHECKS = ("vm.builtin.check_tensor_info", "vm.builtin.match_shape")


class _BlockPlanner:
    """Re-plans one binding block's texture tensors (module docstring)."""

    def __init__(self, block: relax.BindingBlock, used_after: Set[relax.Var], devices: Sequence[relax.VDevice], mod: tvm.IRModule):
        self.bindings = list(block.bindings)
        self.devices = devices
        self.storages = {b.var: i for i, b in enumerate(self.bindings) if _op_name(b.value) == _ALLOC_STORAGE}
        self.textures: List[_Texture] = []
        for i, b in enumerate(self.bindings):
            found = _texture_alloc(b, self.storages, devices)
            if found is not None:
                self.textures.append(_Texture(i, b.var, b.value, *found))
        end = len(self.bindings)
        uses = [(_uses(b.value), _reads_only(b.value, mod)) for b in self.bindings]
        for t in self.textures:
            # the last use; the end of the block when it is used later or may live on in another value
            t.last = t.index
            for i in range(t.index + 1, end):
                if t.var in uses[i][0]:
                    if not uses[i][1]:
                        t.last = end
                        break
                    t.last = i
            if t.var in used_after:
                t.last = end

    def groups(self) -> List[List[_Texture]]:
        """The tensors of each image storage (relax_vk's storage planner, per device and dtype)."""
        pools: Dict[Tuple[int, str], List[int]] = {}
        for k, t in enumerate(self.textures):
            pools.setdefault((t.device, t.dtype), []).append(k)
        out = []
        for (_, dtype), members in pools.items():
            lifetimes = [
                Lifetime(k, str(self.textures[k].var.name), self.textures[k].index, self.textures[k].last,
                         image_bytes(self.textures[k].image, dtype), self.textures[k].image, dtype)  # fmt: skip
                for k in members
            ]
            _, grouping = best_grouping(lifetimes)
            out += [sorted((self.textures[m.tensor] for m in g.members), key=lambda t: t.index) for g in grouping]
        return sorted(out, key=lambda g: g[0].index)

    def rewrite(self) -> Optional[relax.BindingBlock]:
        if not self.textures:
            return None
        before: Dict[int, List[relax.Binding]] = {}
        after: Dict[int, List[relax.Binding]] = {}
        replaced: Dict[int, relax.Binding] = {}
        for n, group in enumerate(self.groups()):
            image = tuple(max(t.image[i] for t in group) for i in range(3))
            scopes = {t.scope for t in group}
            scope = scopes.pop() if len(scopes) == 1 else TEXTURE.name
            first = group[0]
            storage = relax.Var(f"image_storage{n}", relax.ObjectType())
            alloc = vm_op.alloc_storage(
                relax.ShapeExpr(list(image_storage_shape(image, scope))), first.device, first.dtype, scope
            )
            before.setdefault(first.index, []).append(relax.VarBinding(storage, alloc))
            for t in group:
                view_device = _global_twin(self.devices, t.device)
                _, _, shape, dtype, device = t.call.args
                replaced[t.index] = relax.VarBinding(
                    t.var, vm_op.alloc_tensor(storage, 0, shape, dtype, device if view_device is None else view_device)
                )
            kill = vm_op.kill_object(storage)
            after.setdefault(group[-1].index, []).append(relax.VarBinding(relax.Var("_", relax.TupleType([])), kill))
        moved = {t.index for t in self.textures}
        left: Dict[relax.Var, List[Optional[int]]] = {}
        for i, b in enumerate(self.bindings):
            if i not in moved and _op_name(b.value) == _ALLOC_TENSOR:
                left.setdefault(b.value.args[0], []).append(_end_byte(b.value))
        emptied = {self.bindings[t.index].value.args[0] for t in self.textures}
        dropped = {v for v in emptied if v not in left}
        out: List[relax.Binding] = []
        for i, b in enumerate(self.bindings):
            out += before.get(i, [])
            if b.var in dropped or (_op_name(b.value) == _KILL and b.value.args[0] in dropped):
                continue
            if b.var in emptied and None not in left[b.var]:  # what TVM sized for textures too: its buffers' bytes
                size, device, dtype, scope = b.value.args
                b = relax.VarBinding(b.var, vm_op.alloc_storage(relax.ShapeExpr([max(left[b.var])]), device, dtype, scope))
            out.append(replaced.get(i, b))
            out += after.get(i, [])
        return relax.BindingBlock(out)


def _plan_function(func: relax.Function, devices, mod: tvm.IRModule) -> Optional[relax.Function]:
    body = func.body
    if not isinstance(body, relax.SeqExpr):
        return None
    blocks, changed = list(body.blocks), False
    for i, block in enumerate(blocks):
        used_after = _uses(body.body)
        for later in blocks[i + 1 :]:
            for b in later.bindings:
                used_after |= _uses(b.value)
        new = _BlockPlanner(block, used_after, devices, mod).rewrite()
        if new is not None:
            blocks[i], changed = new, True
    if not changed:
        return None
    return relax.Function(func.params, relax.SeqExpr(blocks, body.body), func.ret_ty, func.is_pure, func.attrs, func.span)


def PlanTextureStorage() -> tvm.transform.Pass:
    """Image storages of exactly their images' bytes for texture tensors (module docstring)."""

    def transform(func: relax.Function, mod: tvm.IRModule, _ctx) -> relax.Function:
        devices = vdevices(mod)
        new = _plan_function(func, devices, mod) if devices else None
        return func if new is None else relax.BlockBuilder().normalize(new)

    return relax.transform.function_pass(transform, opt_level=0, name="relax_vk.PlanTextureStorage")
