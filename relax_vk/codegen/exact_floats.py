"""ExactFloatConstants: float32 constants reach the OpenCL C exactly.

TVM's OpenCL code generator prints a float constant with 7 significant digits
(``-3.402823e+38f``), which does not always round back to the same float: float32's lowest
value, the initial value of every max reduction, prints as a number above it. A softmax over a
row of that lowest value (the masked scores of a padded query, as transformers' masks write them)
then found its maximum above every score, summed ``exp()`` to zero and returned NaN; any constant
can move by an ulp the same way. The pass rewrites each float32 constant of an OpenCL kernel that
7 digits do not round-trip as a reinterpretation of its bits (a ``uint`` of value ``0xff7fffff``
read as a float in the source): the kernel computes with the model's own value. Vulkan kernels are left as they are (the
WGSL emitter prints 9 digits); so are constants that print exactly (most).
"""

from __future__ import annotations

import struct

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir.prim import expr as E

from .index_narrowing import _for_vulkan


def _float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def _exact_in_7_digits(value: float) -> bool:
    """Whether ``value`` as a float32, printed as TVM prints it (``%.6e``), reads back as itself
    (infinities and NaN print as names: they do)."""
    value = _float32(value)
    if value != value or value in (float("inf"), float("-inf")):
        return True
    return _float32(float(f"{value:.6e}")) == value


def _bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


def _exact(imm: E.FloatImm):
    if str(imm.ty.dtype) == "float32" and not _exact_in_7_digits(float(imm.value)):
        return tirx.reinterpret("float32", tirx.const(_bits(float(imm.value)), "uint32"))
    return imm


def ExactFloatConstants() -> tvm.transform.Pass:
    """The pass (module docstring)."""

    def transform(func: tirx.PrimFunc, _mod, _ctx) -> tirx.PrimFunc:
        if _for_vulkan(func):
            return func
        return tvm_ffi.structural_map(func, [(E.FloatImm, _exact)])

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="relax_vk.ExactFloatConstants")
