"""NameKernelsForApi: kernels lowered under another API's target are named for their own API.

Requires: a fused module (after ``FuseTIR``) lowered under a target of kind ``lowered_as`` for an
``api`` of another kind (relax_vk's Vulkan build lowers under an OpenCL-kind target,
:func:`relax_vk.core.target.lowering_target`).

Guarantees: TVM's legalizers name a kernel after its op and the kind of its VDevice's target
(``relu_opencl``; ``FuseOps`` keeps the part: ``fused_conv2d_NCHWc_OIHWo_opencl_relu``). Every
PrimFunc name part equal to ``lowered_as`` (a whole ``_``-separated part) becomes ``api``
(``fused_conv2d_NCHWc_OIHWo_vulkan_relu``), and every call of it calls the new name, so the
shaders, artifacts, profiles and plans of a Vulkan build never say ``opencl``. Names stay
distinct (a clash keeps the old name). Tuning records are keyed by workload and configuration,
never by kernel name, so they are unaffected. Other functions are untouched.
"""

from __future__ import annotations

from typing import Dict

import tvm
from tvm import tirx

from .shorten_kernel_names import rename_functions


def api_name(name: str, api: str, lowered_as: str) -> str:
    """``name`` with every ``_``-separated part ``lowered_as`` replaced by ``api``."""
    return "_".join(api if part == lowered_as else part for part in name.split("_"))


def NameKernelsForApi(api: str, lowered_as: str) -> tvm.transform.Pass:
    """Rename kernels lowered under ``lowered_as`` for ``api`` (module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        taken = {gv.name_hint for gv in mod.get_global_vars()}
        names: Dict[tvm.ir.GlobalVar, str] = {}
        for gvar, func in mod.functions_items():
            if isinstance(func, tirx.PrimFunc):
                name = api_name(gvar.name_hint, api, lowered_as)
                if name != gvar.name_hint and name not in taken:
                    taken.add(name)
                    names[gvar] = name
        return rename_functions(mod, names)

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.NameKernelsForApi")
