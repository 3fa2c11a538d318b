"""RoundBufferStorage: byte storages sized in whole pages, so TVM's pooled allocator reuses them.

TVM's OpenCL allocator (``OpenCLPooledAllocator`` in ``opencl_device_api.cc``) takes a storage's
buffer from its pool by the page-rounded size (``Alloc``: ``(nbytes + 4095) / 4096 * 4096``), but
returns a ``"global"`` storage of the Relax VM to the pool under its exact byte count
(``Alloc(shape, scope)`` records ``GetMemObjectSize``, ``Free`` keys by it). A storage whose bytes
are not a multiple of the page is therefore never handed out again: every call of ``main``
allocates it anew and the pool keeps the old one (``docs/tvm_runtime.md``: seen on pocl as one
buffer created and none freed per call). Sized in whole pages, the storage comes back from the pool
on the next call. The allocator rounds every allocation to a page anyway, so this holds no more
device memory than before.

Runs after :class:`~relax_vk.passes.PlanTextureStorage` (relax_vk's finalize stage). Requires:
``R.vm.alloc_storage`` (after ``LowerRuntimeBuiltin``). Guarantees: every static ``"global"``
(or unscoped) ``alloc_storage`` of a device other than the host gets a shape of
``ceil(bytes / PAGE) * PAGE`` elements of its dtype's bytes; texture storages, dynamic shapes and
host storages are unchanged.
"""

from __future__ import annotations

import math
from typing import Optional

import tvm
import tvm.relax.op.vm as vm_op
from tvm import relax

from ...core.scope import static_shape
from .plan_texture_storage import _ALLOC_STORAGE, _op_name

#: TVM's ``PooledAllocator::kDefaultPageSize``
PAGE = 4096


def _rounded(call: relax.Call) -> Optional[relax.Call]:
    """``call`` (an ``alloc_storage``) in whole pages; None when it is not a device byte storage or already is."""
    shape, device, dtype, scope = call.args
    dims = static_shape(shape.values) if isinstance(shape, relax.ShapeExpr) else None
    element = tvm.DataType(str(getattr(dtype, "value", "uint8"))).bits // 8
    host = not isinstance(device, tvm.tirx.IntImm) or int(device.value) < 0
    if dims is None or len(dims) != 1 or element <= 0 or host or str(getattr(scope, "value", "")) not in ("", "global"):
        return None
    nbytes = dims[0] * element
    rounded = math.ceil(nbytes / PAGE) * PAGE
    if rounded == nbytes or rounded % element:
        return None
    return vm_op.alloc_storage(relax.ShapeExpr([rounded // element]), device, dtype, scope)


def _round(expr):
    if isinstance(expr, relax.SeqExpr):
        blocks = []
        for block in expr.blocks:
            out = []
            for b in block.bindings:
                new = _rounded(b.value) if isinstance(b, relax.VarBinding) and _op_name(b.value) == _ALLOC_STORAGE else None
                if new is not None:
                    b = relax.VarBinding(b.var, new)
                elif isinstance(b, relax.VarBinding) and isinstance(b.value, relax.If):
                    b = relax.VarBinding(b.var, relax.If(b.value.cond, _round(b.value.true_branch), _round(b.value.false_branch)))
                out.append(b)
            blocks.append(relax.BindingBlock(out))
        return relax.SeqExpr(blocks, expr.body)
    return expr


def RoundBufferStorage() -> tvm.transform.Pass:
    """Byte storages of whole pages (module docstring)."""

    def transform(func: relax.Function, mod: tvm.IRModule, _ctx) -> relax.Function:
        body = _round(func.body)
        if body.same_as(func.body):
            return func
        return relax.BlockBuilder().normalize(
            relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs, func.span)
        )

    return relax.transform.function_pass(transform, opt_level=0, name="relax_vk.RoundBufferStorage")
