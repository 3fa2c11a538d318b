"""OpenCL lowering of the TIR math intrinsics TVM leaves to its C default.

TVM 0.27 registers ``opencl.FLowerIntrinsic`` for ``exp``, ``tanh``, ``pow`` and the like, but not
for ``tan``, ``asin``, ``acos``, ``atan``, ``atan2``, ``asinh``, ``acosh``, ``atanh``, ``log1p``,
``hypot``, ``copysign``, ``ldexp`` and ``nextafter``: those fall back to ``default.FLowerIntrinsic``,
which names C's float variants (``acosf``, ``atanhf``), and OpenCL C has none of them -- the program
fails to build ("implicit declaration of function 'acosf'").

OpenCL C has every one of these as an overloaded built-in (OpenCL C 6.15.2, float/half/double,
scalar and vector) with the spec's ULP bounds, so the rule here is TVM's own ``Direct`` dispatch:
``call_pure_extern`` of the built-in's plain name. It is registered at import for every ``tirx``
op that has a default lowering, no OpenCL one, and a name among OpenCL C's math built-ins (so an
op TVM adds later is covered when OpenCL C has it). Vulkan builds lower under an OpenCL target
too (:func:`relax_vk.core.target.lowering_target`), so the WGSL emitter sees the same plain names
(:mod:`relax_vk.codegen.wgsl.helpers` translates them).

``tanh`` gets one more rule: exactly +-1 where float32's tanh rounds to it (:func:`_saturating_tanh`).
"""

from __future__ import annotations

from typing import List

import tvm
from tvm import tirx

#: OpenCL C's math built-in functions (OpenCL C specification, "Math Functions")
OPENCL_MATH_BUILTINS = frozenset(
    """acos acosh acospi asin asinh asinpi atan atan2 atanh atanpi atan2pi cbrt ceil copysign cos cosh
    cospi erfc erf exp exp2 exp10 expm1 fabs fdim floor fma fmax fmin fmod fract frexp hypot ilogb ldexp
    lgamma log log2 log10 log1p logb mad maxmag minmag modf nan nextafter pow pown powr remainder remquo
    rint rootn round rsqrt sin sincos sinh sinpi sqrt tan tanh tanpi tgamma trunc""".split()
)

_PRIORITY = 20  # above TVM's own registrations (level 10), should it add some of these later


def _has_attr(op: tvm.ir.Op, key: str) -> bool:
    try:
        return op.get_attr(key) is not None
    except tvm.error.TVMError:  # the attribute is registered for no op at all
        return False


def _direct(call: tirx.Call) -> tirx.PrimExpr:
    """``tirx.acos(x)`` -> ``call_pure_extern("acos", x)``: OpenCL C's overloaded built-in."""
    return tirx.call_pure_extern(call.ty.dtype, call.op.name.split(".", 1)[1], *call.args)


def register_opencl_math() -> List[str]:
    """Register the direct OpenCL lowering for every ``tirx`` math op that would otherwise get C's
    float-suffixed name (module docstring); returns the op names registered (idempotent)."""
    done = []
    for name in sorted(str(n) for n in tvm.ir.Op.list_op_names()):
        prefix, _, base = name.partition(".")
        if prefix != "tirx" or base not in OPENCL_MATH_BUILTINS:
            continue
        op = tvm.ir.Op.get(name)
        if not _has_attr(op, "default.FLowerIntrinsic"):
            continue
        if _has_attr(op, "opencl.FLowerIntrinsic") and name not in _REGISTERED:
            continue  # TVM's own OpenCL rule
        if name not in _REGISTERED:
            tirx.op.register_intrin_lowering(name, "opencl", f=_direct, level=_PRIORITY)
            _REGISTERED.add(name)
        done.append(name)
    return done


#: beyond it float32's tanh rounds to +-1 (1 - tanh(9.1) = 2.5e-8, under half an ulp of 1)
TANH_SATURATES = 9.1


def _const(value: float, dtype) -> tirx.PrimExpr:
    dtype = tvm.DataType(str(dtype))
    scalar = tirx.FloatImm(str(tvm.DataType(f"float{dtype.bits}")), value)
    return scalar if dtype.lanes == 1 else tirx.Broadcast(scalar, dtype.lanes)


def _saturating_tanh(call: tirx.Call) -> tirx.PrimExpr:
    """``tanh(x)``, exactly +-1 beyond :data:`TANH_SATURATES`: a driver's tanh may be an ulp short of
    1 there (pocl: -0.99999994 at -100), which ``1 + tanh(x)`` (GELU's tanh form) turns into a
    relative error that grows with ``|x|`` (GELU(-1e4) = -3e-4 instead of 0)."""
    x = call.args[0]
    dtype = call.ty.dtype
    inner = tirx.call_pure_extern(dtype, "tanh", x)
    limit = _const(TANH_SATURATES, dtype)
    return tirx.Select(x >= limit, _const(1.0, dtype), tirx.Select(x <= -limit, _const(-1.0, dtype), inner))


_REGISTERED: set = set()
REGISTERED_OPS = register_opencl_math()
tirx.op.register_intrin_lowering("tirx.tanh", "opencl", f=_saturating_tanh, level=_PRIORITY)
