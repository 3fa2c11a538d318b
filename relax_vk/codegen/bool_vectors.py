"""LowerBoolVectorCasts: casts of boolean vectors become selects, so true is 1 in every lane.

Requires: vectorized device TIR (after ``VectorizeLoop``).

Guarantees: every ``Cast`` of a ``boolxN`` value to another type is replaced by
``Select(value, Broadcast(1), Broadcast(0))`` of the target type; nothing else changes.

Why: TVM 0.27's OpenCL codegen prints a vector cast of a comparison as
``convert_int4(a < b)``, and an OpenCL vector comparison is ``-1`` (all bits set) where true, so
the cast yields ``-1``, not ``1``: ``where(x < t, ...)`` in a vectorized kernel, lowered by TVM to
``0 < (int)(x < t)``, took the false side in every lane (found on pocl when the one-kernel softmax
vectorized a consumer's ``where``). A vector ``select`` reads the comparison's sign bit, which is
what OpenCL defines; WGSL's ``select`` takes the booleans as they are.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir.prim import expr as E


def _select(cast: E.Cast):
    source = cast.value.ty.dtype
    if source.lanes <= 1 or not str(source).startswith("bool"):
        return cast
    target = cast.ty.dtype
    if str(target).startswith("bool"):
        return cast
    element = str(target).split("x")[0]
    lanes = int(source.lanes)
    one, zero = tirx.Broadcast(tirx.const(1, element), lanes), tirx.Broadcast(tirx.const(0, element), lanes)
    return tirx.Select(cast.value, one, zero)


def LowerBoolVectorCasts() -> tvm.transform.Pass:
    """The pass (module docstring)."""

    def transform(func: tirx.PrimFunc, _mod, _ctx) -> tirx.PrimFunc:
        return tvm_ffi.structural_map(func, [(E.Cast, _select)])

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="relax_vk.LowerBoolVectorCasts")
