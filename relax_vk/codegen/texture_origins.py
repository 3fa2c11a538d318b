"""PlaceTextures: activation textures read and written at an origin inside a shared image.

Images cannot alias (an OpenCL image without ``cl_khr_image2d_from_buffer``, a WebGPU texture),
so storage planning can only give a tensor a whole image; a downsampling CNN's tensors change
extents from layer to layer (56x56x16 texels, then 28x28x32) and whole-image sharing holds 1.3-2.6x
the live-tensor bound. With this pass the kernels of an exported program address each activation
texture at an *origin* inside a larger image, so that several tensors share one image side by
side (:mod:`relax_vk.storage.rectangles` places them):

* an activation texture (:data:`~relax_vk.core.scope.PLACED_SCOPES`: ``global.texture``, and
  ``global.texture-nhwc``, the token layouts' scope) whose logical image is ``(w, h, layers)``
  (:meth:`~relax_vk.core.scope.MemoryScope.image_extents`) is stored *folded*, its texels in order
  in a ``W``-wide rectangle of one layer (:func:`~relax_vk.core.scope.folded_width`: ``k`` rows a
  line or a row over ``m`` lines; :func:`~relax_vk.core.scope.placed_extents`; the texels' order
  is the same, so a copy to or from a buffer is unchanged), when such a rectangle fits the
  device's image limit;
* every ``texture2d_load`` / ``texture2d_store`` of such a parameter at ``(x, y, z)``, row ``r = z h
  + y``, becomes one at ``(x + (r % k) w + x0, r / k + y0, 0)`` (``W = k w``, ``k`` a power of two: a
  mask and a shift), or ``(x % W + x0, r m + x / W + y0, 0)`` (``W = w / m``). ``(x0, y0)`` is one
  integer kernel argument per parameter,
  ``y0 << 16 | x0``, bound in the host code to the marker ``rvk_texture_origin(parameter)``: the
  exporter turns it into a launch scalar ``{"index", "dtype", "origin": tensor}`` whose value the
  runtime reads off the tensor's ``origin`` in the program. A kernel takes at most
  :data:`~relax_vk.core.scope.MAX_ORIGINS` of them (the largest parameters first); a folded
  parameter past that is addressed at ``(0, 0)``, so the tensor it binds keeps an image of its own
  (:func:`relax_vk.storage.lifetimes.program_lifetimes`). The function records which parameters it
  folds (:data:`FOLDED_ATTR`), for the exporter.

Contract: runs on the functions that carry :data:`ATTR` (set by
:func:`mark` on the module the exporter compiles, never on the one TVM's VM runs, whose
runtime allocates each texture as TVM lays it out), between ``TextureFlatten`` and
``SplitHostDevice``, after loops are lowered (no blocks left). Padding is computed by the kernels
themselves (TVM's texture schedules guard every out-of-range read), so an origin never changes
what a read returns.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

import tvm
import tvm_ffi
from tvm import tirx
from tvm.tirx import stmt as S
from tvm.tirx.buffer import BufferType

from ..core.scope import MAX_ORIGINS, PLACED_SCOPE_NAMES, placed_extents, scope_from_name, static_shape

#: PrimFunc attribute: ``[spatial image limit, origins a kernel may take]`` (set by :func:`mark`)
ATTR = "relax_vk.texture_origins"
#: the host-side marker call whose value the exporter replaces with a tensor's origin
MARKER = "rvk_texture_origin"
#: PrimFunc attribute after the pass: ``[parameter index, folded width]`` of the parameters it stores folded
FOLDED_ATTR = "relax_vk.folded_textures"
#: an origin argument holds ``y0 << ORIGIN_SHIFT | x0`` (images are at most 65,535 texels wide)
ORIGIN_SHIFT = 16
ORIGIN_MASK = (1 << ORIGIN_SHIFT) - 1
_TEXTURE_CALLS = ("tirx.texture2d_load", "tirx.texture2d_store")


def _placed_params(func: tirx.PrimFunc, limit: int) -> Dict[object, Tuple[int, Tuple[int, int, int], int]]:
    """``param var -> (parameter index, (logical image width, height, folded width), texels)`` of
    the parameters stored folded."""
    out = {}
    for k, p in enumerate(func.params):
        ty = p.ty
        if not isinstance(ty, BufferType):
            continue
        shape = static_shape(ty.shape)
        name = str(ty.storage_scope) or "global"
        if shape is None or name not in PLACED_SCOPE_NAMES:
            continue
        scope = scope_from_name(name)
        folded = placed_extents(shape, str(ty.dtype), scope, limit)
        if folded is not None:
            ext = scope.image_extents(shape)
            out[p] = (k, (ext.width, ext.height, folded.width), folded.width * folded.height)
    return out


def mark(mod: tvm.IRModule, spatial_limit: int, api: str) -> tvm.IRModule:
    """``mod`` with :data:`ATTR` (``[spatial limit, origins a kernel may take]``) on every PrimFunc
    that has a ``global.texture`` parameter stored folded."""
    out = {}
    for gv, func in mod.functions_items():
        if isinstance(func, tirx.PrimFunc) and _placed_params(func, spatial_limit):
            out[gv] = func.with_attr(ATTR, [tirx.const(int(spatial_limit), "int32"), tirx.const(MAX_ORIGINS[api], "int32")])
    if not out:
        return mod
    functions = dict(mod.functions_items())
    functions.update(out)
    return tvm.IRModule(functions, attrs=mod.attrs, global_infos=dict(mod.global_infos.items()))


def _like(v, ref):
    """``v`` cast to ``ref``'s integer type where the two differ."""
    return v if str(v.ty.dtype) == str(ref.ty.dtype) else tirx.Cast(str(ref.ty.dtype), v)


def _place(func: tirx.PrimFunc) -> tirx.PrimFunc:
    limit, max_origins = (int(v) for v in func.attrs[ATTR])
    placed = _placed_params(func, limit)
    if not placed:
        return func
    # origins for the largest first, when a kernel may not take them all (a bias is never shared)
    ranked = sorted(placed.items(), key=lambda kv: (-kv[1][2], -kv[1][0]))
    origins: Dict[object, Tuple[object, Tuple[int, int, int]]] = {}
    binds: List[S.Stmt] = []
    for rank, (param, (k, fold, _)) in enumerate(ranked):
        if rank < max_origins:
            origin = tirx.Var(f"{param.name}_origin", "int32")
            binds.append(S.Bind(origin, tirx.call_extern("int32", MARKER, tirx.const(k, "int32"))))
        else:
            origin = None
        origins[param] = (origin, fold)

    alias = {}  # a buffer declared over another's data -> that buffer (``T.decl_buffer(data=x.data)``)

    def collect(decl):
        data = decl.data
        if isinstance(data, tvm.ir.expr.Call) and getattr(data.op, "name", "") == "tirx.buffer_data":
            alias[decl.buffer] = data.args[0]
        return decl

    tvm_ffi.structural_map(func.body, [(S.DeclBuffer, collect)])

    def root(buf):
        seen = set()
        while buf in alias and buf not in seen:
            seen.add(buf)
            buf = alias[buf]
        return buf

    def rewrite(call):
        if getattr(call.op, "name", "") not in _TEXTURE_CALLS:
            return call
        data = call.args[0]
        param = data.args[0] if isinstance(data, tvm.ir.expr.Call) and getattr(data.op, "name", "") == "tirx.buffer_data" else data
        if root(param) not in origins:
            return call
        origin, (width, height, folded) = origins[root(param)]
        x, y, z = call.args[1:4]
        dtype = str(y.ty.dtype)
        row = y + _like(z, y) * tirx.const(height, dtype)
        new_x, new_y = x, row
        if folded > width:  # k = W / w rows a line: ((r % k) w + x, r / k), k a power of two
            k = folded // width
            new_x = x + _like(tirx.bitwise_and(row, tirx.const(k - 1, dtype)) * tirx.const(width, dtype), x)
            new_y = tirx.shift_right(row, tirx.const(k.bit_length() - 1, dtype))
        elif folded < width:  # a row over m = w / W lines: (x % W, r m + x / W)
            wide = tirx.const(folded, str(x.ty.dtype))
            pow2 = folded & (folded - 1) == 0
            new_x = tirx.bitwise_and(x, tirx.const(folded - 1, str(x.ty.dtype))) if pow2 else tirx.truncmod(x, wide)
            line = tirx.shift_right(x, tirx.const(folded.bit_length() - 1, str(x.ty.dtype))) if pow2 else tirx.truncdiv(x, wide)
            new_y = row * tirx.const(width // folded, dtype) + _like(line, y)
        if origin is not None:  # (x0, y0) = (origin & 0xffff, origin >> 16)
            new_x = new_x + _like(tirx.bitwise_and(origin, tirx.const(ORIGIN_MASK, "int32")), x)
            new_y = new_y + _like(tirx.shift_right(origin, tirx.const(ORIGIN_SHIFT, "int32")), y)
        return tvm.ir.expr.Call(call.op, [call.args[0], new_x, new_y, tirx.const(0, str(z.ty.dtype)), *call.args[4:]], call.attrs, ret_ty=call.ty)

    body = tvm_ffi.structural_map(func.body, [(tvm.ir.expr.Call, rewrite)])
    folded = sorted((k, fold[2]) for k, fold, _ in placed.values())
    out = func.with_body(S.SeqStmt([*binds, body]) if binds else body).without_attr(ATTR)
    return out.with_attr(FOLDED_ATTR, [[tirx.const(k, "int32"), tirx.const(n, "int32")] for k, n in folded])


def PlaceTextures() -> tvm.transform.Pass:
    """The pass (module docstring); a function without :data:`ATTR` is left as it is."""

    def transform(func: tirx.PrimFunc, _mod, _ctx) -> tirx.PrimFunc:
        if func.attrs is None or ATTR not in func.attrs:
            return func
        return _place(func)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="relax_vk.PlaceTextures")
