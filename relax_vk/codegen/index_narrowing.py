"""NarrowVulkanIndices: a Vulkan kernel's int64 index arithmetic becomes int32 *before* TVM
lowers its integer intrinsics.

Requires: finalized device ``PrimFunc``s (after ``SplitHostDevice``), each carrying its ``target``.

Guarantees: in every kernel whose target's API is Vulkan
(:func:`~relax_vk.core.target.target_api`), index expressions, loop and thread variables and the
``Bind``/``Let`` variables they flow through are ``int32`` (TVM's ``ForceNarrowIndexToInt32``); data
stays as it is (an int64 *data* buffer is still refused by the WGSL emitter). Kernels for OpenCL are
untouched (OpenCL C has a native ``long``). A kernel TVM's pass cannot narrow (an index constant
past ``int32``) is left as it is: the WGSL emitter then computes its int64 in i32 as before and
refuses, naming the kernel, any constant that does not fit; nothing is truncated.

Why: WGSL has no 64-bit integers, so :mod:`relax_vk.codegen.wgsl` computes int64 indices in
``i32`` (every index of a tensor under 2**31 elements fits). That is exact for ``+ - *`` (the
i32 ring wraps like int64 modulo 2**32 and the final index fits) but not for the divisions
``LowerIntrin`` writes for ``floordiv``/``floormod``: for an int64 numerator whose lower bound it
knows, e.g. ``int64(table[i])`` with a bound of ``-2**31``, it writes
``truncdiv(a + 288 * 7456541, 288) - 7456541``, whose offset (2147483808) is right in int64 and
wraps in i32 -- a wrong quotient. The emitter refused such constants (fuzz seed 60605: a token
gather read through another gather's table, fused with a concat and a layout transform); lowered
from int32, the same ``floordiv`` is written with i32's sign-bit correction instead, which is
exact for every int32 numerator.
"""

from __future__ import annotations

import tvm
from tvm import tirx


def _for_vulkan(func: tirx.PrimFunc) -> bool:
    from ..core.target import target_api

    attrs = func.attrs if func.attrs is not None else {}
    target = attrs["target"] if "target" in attrs else tvm.target.Target.current(allow_none=True)
    return target is not None and target_api(target) == "vulkan"


def _on_vulkan_kernels(rewrite, name: str, keep_on: tuple = ()) -> tvm.transform.Pass:
    """A module pass applying ``rewrite`` (a pass over a one-function module) to each Vulkan
    kernel; a kernel it raises one of ``keep_on`` on is left as it is."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        updates = {}
        for gv, func in mod.functions.items():
            if not isinstance(func, tirx.PrimFunc) or not _for_vulkan(func):
                continue
            try:
                new = rewrite(tvm.IRModule({gv: func}))[gv]
            except keep_on:
                continue
            if not new.same_as(func):
                updates[gv] = new
        if not updates:
            return mod
        out = mod.clone()
        for gv, func in updates.items():
            out.update_func(gv, func)
        return out

    return tvm.transform.module_pass(transform, opt_level=0, name=name)


def NarrowVulkanIndices() -> tvm.transform.Pass:
    """The pass (module docstring). A kernel TVM's narrowing refuses (its check of an index
    constant past int32: ``InternalError``) is left as it is."""
    return _on_vulkan_kernels(tirx.transform.ForceNarrowIndexToInt32(), "relax_vk.NarrowVulkanIndices", keep_on=(tvm.error.InternalError,))


def NameVulkanSubexpressions() -> tvm.transform.Pass:
    """TVM's ``CommonSubexprElim`` again on Vulkan kernels, between the device finalisation's
    ``StmtSimplify`` and ``LowerIntrin`` (float bindings put back:
    :mod:`relax_vk.codegen.float_bindings`).

    Why: on int32 indices TVM 0.27's ``StmtSimplify`` writes every ``Bind``'s value where its
    variable is read, the folded grid's block index (``floormod(block_linear, ...)``,
    :mod:`relax_vk.codegen.launch_grid`) included, and ``LowerIntrin`` then expands each copy of
    each ``floordiv``/``floormod`` into its sign-corrected form: a 4-bit GEMV of a decoder grew from
    26 KB of TIR to 253 KB, its WGSL to 282 KB, and a Qwen3-0.6B program took 84 s to load on an
    H200 (8.5 s before its GEMVs were unrolled). Naming the repeated subexpressions before
    ``LowerIntrin`` writes each once. OpenCL kernels (int64 indices, which the simplifier leaves
    bound) are untouched."""
    from .float_bindings import InlineFloatBindings

    name = tvm.transform.Sequential([tirx.transform.CommonSubexprElim(), InlineFloatBindings()])
    return _on_vulkan_kernels(name, "relax_vk.NameVulkanSubexpressions")
