"""NarrowIndices: int64 index arithmetic becomes int32 *before* TVM lowers its integer intrinsics,
in every Vulkan kernel and in every OpenCL kernel of a run-time size.

Requires: finalized device ``PrimFunc``s (after ``SplitHostDevice``), each carrying its ``target``.

Guarantees: in every kernel :func:`narrowed` selects, index expressions, loop and thread variables,
integer size parameters and the ``Bind``/``Let`` variables they flow through are ``int32`` (TVM's
``ForceNarrowIndexToInt32``); data stays as it is (an int64 *data* buffer is still refused by the
WGSL emitter). An OpenCL kernel it narrows carries :data:`NARROWED_ATTR`, and the exporter passes
its size arguments as 32-bit integers (it reads each kernel's parameter types). OpenCL kernels of a
static size are untouched: TVM narrows what it can prove fits, and keeps ``long`` where it cannot.
A kernel TVM's pass cannot narrow (an index constant past ``int32``) is left as it is: the WGSL
emitter then computes its int64 in i32 as before and refuses, naming the kernel, any constant that
does not fit; nothing is truncated. The exporter refuses a tensor of 2**31 elements or more in
Vulkan programs and in OpenCL programs with run-time dims (at the dims' bounds).

Why, on Vulkan: WGSL has no 64-bit integers, so :mod:`relax_vk.codegen.wgsl` computes int64
indices in ``i32`` (every index of a tensor under 2**31 elements fits). That is exact for ``+ - *``
(the i32 ring wraps like int64 modulo 2**32 and the final index fits) but not for the divisions
``LowerIntrin`` writes for ``floordiv``/``floormod``: for an int64 numerator whose lower bound it
knows, e.g. ``int64(table[i])`` with a bound of ``-2**31``, it writes
``truncdiv(a + 288 * 7456541, 288) - 7456541``, whose offset (2147483808) is right in int64 and
wraps in i32 -- a wrong quotient. The emitter refused such constants (fuzz seed 60605: a token
gather read through another gather's table, fused with a concat and a layout transform); lowered
from int32, the same ``floordiv`` is written with i32's sign-bit correction instead, which is
exact for every int32 numerator.

Why, on OpenCL: a kernel of a run-time size takes its sizes as ``long`` parameters, and TVM cannot
bound a symbolic size, so all its index arithmetic stayed 64-bit; GPUs compute 64-bit integer
products and divisions in several 32-bit instructions (NVIDIA's OpenCL ran PP-OCR's recognizer and
detector 1.5-1.8x slower with run-time dims than fixed to the size, Vulkan's i32 ones 1.0-1.1x).
"""

from __future__ import annotations

import tvm
from tvm import tirx

from ..core.ir_utils import run_time_size


#: set on the OpenCL kernels :class:`NarrowIndices` narrowed
NARROWED_ATTR = "relax_vk.narrowed_indices"


def _api(func: tirx.PrimFunc):
    from ..core.target import target_api

    attrs = func.attrs if func.attrs is not None else {}
    target = attrs["target"] if "target" in attrs else tvm.target.Target.current(allow_none=True)
    return target_api(target) if target is not None else None


def _for_vulkan(func: tirx.PrimFunc) -> bool:
    return _api(func) == "vulkan"


def narrowed(func: tirx.PrimFunc) -> bool:
    """Whether :class:`NarrowIndices` narrows ``func``: a Vulkan kernel, or an OpenCL kernel of a
    run-time size."""
    api = _api(func)
    return api == "vulkan" or (api == "opencl" and run_time_size(func))


def _was_narrowed(func: tirx.PrimFunc) -> bool:
    return _for_vulkan(func) or (func.attrs is not None and NARROWED_ATTR in func.attrs)


def _on_kernels(select, rewrite, name: str, keep_on: tuple = (), mark: bool = False) -> tvm.transform.Pass:
    """A module pass applying ``rewrite`` (a pass over a one-function module) to each kernel
    ``select`` accepts; a kernel it raises one of ``keep_on`` on is left as it is; with ``mark``,
    the OpenCL kernels it rewrote get :data:`NARROWED_ATTR`."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        updates = {}
        for gv, func in mod.functions.items():
            if not isinstance(func, tirx.PrimFunc) or not select(func):
                continue
            try:
                new = rewrite(tvm.IRModule({gv: func}))[gv]
            except keep_on:
                continue
            if mark and not _for_vulkan(new):
                new = new.with_attr(NARROWED_ATTR, True)
            if not new.same_as(func):
                updates[gv] = new
        if not updates:
            return mod
        out = mod.clone()
        for gv, func in updates.items():
            out.update_func(gv, func)
        return out

    return tvm.transform.module_pass(transform, opt_level=0, name=name)


def _int32_extreme(imm):
    """int64's lowest and highest values (a max or min reduction's start, an argmax's) as int32's."""
    if str(imm.ty.dtype) == "int64" and int(imm.value) in (-(2**63), 2**63 - 1):
        return tirx.const(-(2**31) if int(imm.value) < 0 else 2**31 - 1, "int64")
    return imm


def Int64ExtremesAsInt32() -> tvm.transform.Pass:
    """int64's lowest and highest constants in a Vulkan kernel become int32's (still typed int64):
    a Vulkan kernel holds int64 values in 32 bits (inputs outside int32 are refused at the edge), so
    a max, min, argmax or argmin that starts from int64's extreme computes the same from int32's.
    Without it NarrowIndices refused those constants and the WGSL emitter could not print them (an
    int64 ReduceMax failed to build on Vulkan). Other kernels are left as they are."""
    import tvm_ffi
    from tvm.ir.prim import expr as E

    def transform(func: tirx.PrimFunc, _mod, _ctx) -> tirx.PrimFunc:
        return tvm_ffi.structural_map(func, [(E.IntImm, _int32_extreme)]) if _for_vulkan(func) else func

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="relax_vk.Int64ExtremesAsInt32")


def _int32_division(node):
    """An int64 division or remainder as the int32 one, cast back to int64."""
    if str(node.ty.dtype) != "int64":
        return node
    a, b = (tirx.Cast("int32", v) for v in (node.a, node.b))
    return tirx.Cast("int64", type(node)(a, b))


def Int64DivisionsAsInt32() -> tvm.transform.Pass:
    """Every int64 ``floordiv``/``floormod``/``div``/``mod`` left in a Vulkan kernel after
    :class:`NarrowIndices` (a division of int64 *data*: ``x.long() % 3``) becomes the int32 one.
    A Vulkan kernel holds int64 values in 32 bits (inputs outside int32 are refused at the edge), so
    the quotient is the same; left int64, ``LowerIntrin`` wrote the division with an offset past
    int32 (2147483649), which the WGSL emitter refused: a PyTorch ``(x.long() % 3).prod(2)`` did not
    build for Vulkan. Other kernels are left as they are."""
    import tvm_ffi
    from tvm.ir.prim import expr as E

    divisions = [(kind, _int32_division) for kind in (E.FloorDiv, E.FloorMod, E.Div, E.Mod)]

    def transform(func: tirx.PrimFunc, _mod, _ctx) -> tirx.PrimFunc:
        return tvm_ffi.structural_map(func, divisions) if _for_vulkan(func) else func

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="relax_vk.Int64DivisionsAsInt32")


def NarrowIndices() -> tvm.transform.Pass:
    """The pass (module docstring). A kernel TVM's narrowing refuses (its check of an index
    constant past int32: ``InternalError``) is left as it is."""
    return _on_kernels(narrowed, tirx.transform.ForceNarrowIndexToInt32(), "relax_vk.NarrowIndices", keep_on=(tvm.error.InternalError,), mark=True)


def NameNarrowedSubexpressions() -> tvm.transform.Pass:
    """TVM's ``CommonSubexprElim`` again on the kernels :class:`NarrowIndices` narrowed, between
    the device finalisation's ``StmtSimplify`` and ``LowerIntrin`` (float bindings put back:
    :mod:`relax_vk.codegen.float_bindings`).

    Why: on int32 indices TVM 0.27's ``StmtSimplify`` writes every ``Bind``'s value where its
    variable is read, the folded grid's block index (``floormod(block_linear, ...)``,
    :mod:`relax_vk.codegen.launch_grid`) included, and ``LowerIntrin`` then expands each copy of
    each ``floordiv``/``floormod`` into its sign-corrected form: a 4-bit GEMV of a decoder grew from
    26 KB of TIR to 253 KB, its WGSL to 282 KB, and a Qwen3-0.6B program took 84 s to load on an
    H200 (8.5 s before its GEMVs were unrolled). Naming the repeated subexpressions before
    ``LowerIntrin`` writes each once. Kernels left with int64 indices (which the simplifier leaves
    bound) are untouched."""
    from .float_bindings import InlineFloatBindings

    name = tvm.transform.Sequential([tirx.transform.CommonSubexprElim(), InlineFloatBindings()])
    return _on_kernels(_was_narrowed, name, "relax_vk.NameNarrowedSubexpressions")
