"""Make type inference of ops kept through scoping honour the decided output VDevice.

The scope passes carry each call's decided output VDevice in ``Call.ty_args`` (the RFC's design).
Upstream conv2d inference honours it, but the pool ops return the input's VDevice (upstream
defect: a pool whose input is a texture and whose output should be a buffer gets a texture and a
spurious copy). :func:`honour_ty_args` wraps an op's ``FInferType``: when ``ty_args`` holds one
tensor type with a static shape and a VDevice, that type *is* the result. Calls without such
``ty_args`` are inferred exactly as before.

Trusting ``ty_args`` is sound because only ``DefineVDevice`` writes them on regular ops, from the
type the op's own inference produced, with the VDevice replaced. It is also what keeps the
pipeline linear in practice: conv2d's inference re-derives NCHW4c layouts at about 1 ms per call,
and ``RealizeVDevice`` re-normalizes every binding.
"""

from __future__ import annotations

from typing import Set

import tvm
from tvm import relax

_WRAPPED: Set[str] = set()


def honours_ty_args(op_name: str) -> bool:
    """Whether calls of ``op_name`` take their output type from ``ty_args``."""
    return op_name in _WRAPPED


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
        if len(call.ty_args) == 1:
            wanted = call.ty_args[0]
            if isinstance(wanted, relax.TensorType) and wanted.vdevice is not None and wanted.shape is not None:
                return wanted
        return original(call, ctx)

    tvm.ir.register_op_attr(op_name, "FInferType", infer, level=20)
    _WRAPPED.add(op_name)
