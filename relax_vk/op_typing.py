"""Make type inference of ops kept through scoping honour the decided output VDevice.

The scope passes carry each call's decided output VDevice in ``Call.ty_args`` (the RFC's design).
Upstream conv2d inference honours it, but the pool ops return the input's VDevice (upstream
defect: a pool whose input is a texture and whose output should be a buffer gets a texture and a
spurious copy). :func:`honour_ty_args` wraps an op's ``FInferType`` so that, when ``ty_args``
holds one tensor type with a VDevice, the inferred type takes that VDevice. Calls without
``ty_args`` are inferred exactly as before.
"""

from __future__ import annotations

from typing import Set

import tvm
from tvm import relax

_WRAPPED: Set[str] = set()


def honour_ty_args(op_name: str) -> None:
    """Wrap ``op_name``'s ``FInferType`` (idempotent)."""
    if op_name in _WRAPPED:
        return
    try:
        op = tvm.ir.Op.get(op_name)
    except Exception:  # not a Relax op (e.g. a PrimFunc name): nothing to wrap
        return
    original = op.get_attr("FInferType")
    if original is None:
        return

    def infer(call, ctx):
        ty = original(call, ctx)
        if len(call.ty_args) == 1 and isinstance(ty, relax.TensorType):
            wanted = call.ty_args[0]
            if isinstance(wanted, relax.TensorType) and wanted.vdevice is not None:
                return relax.TensorType(ty.shape, ty.dtype, wanted.vdevice)
        return ty

    tvm.ir.register_op_attr(op_name, "FInferType", infer, level=20)
    _WRAPPED.add(op_name)
