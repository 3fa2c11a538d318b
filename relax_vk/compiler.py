"""``relax_vk.build``: compile a Relax module with the full texture pipeline.

The result keeps what tools and tests need: the OpenCL source, its kernel names, the final Relax
module (VDevices on every tensor, scheduled and scope-specialized PrimFuncs), the memory plan,
the TVM executable, and the time spent per stage.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import tvm
from tvm import relax
from tvm.ir.instrument import pass_instrument

from . import target as _target
from .opencl.compiler import kernel_names
from .options import ScopeOptions
from .pipeline import finalize_stage, lowering_stage, scope_pipeline
from .memory_plan import MemoryPlan, plan
from .registry import OpRegistry
from .tir_pipeline import NAME as TIR_PIPELINE


class UnsupportedTargetError(ValueError):
    """The target kind cannot be built (yet)."""


@dataclass
class CompiledModule:
    """What :func:`build` produces."""

    target: tvm.target.Target
    scoped: tvm.IRModule  # after the scope stages (what the memory plan describes)
    lowered: tvm.IRModule  # after lowering: final Relax + scheduled, scope-specialized PrimFuncs
    executable: relax.VMExecutable
    opencl_source: str
    kernels: List[str]
    host_tir: Optional[tvm.IRModule] = None  # host functions right after SplitHostDevice
    stage_seconds: Dict[str, float] = field(default_factory=dict)
    model: Dict[str, str] = field(default_factory=dict)  # where the model came from (for --check)

    @property
    def main(self) -> relax.Function:
        """The final Relax ``main``, every tensor typed with its VDevice."""
        return self.lowered["main"]

    def plan(self) -> MemoryPlan:
        return plan(self.lowered)

    def artifact(self):
        """The portable program (:class:`relax_vk.artifact.Artifact`) of this module."""
        from .lowered_program import export_program

        return export_program(self.lowered, self.host_tir, self.opencl_source, self.target.kind.name, self.model)


def export(compiled: CompiledModule, path: str) -> None:
    """Write ``compiled`` as one ``.rvk`` file (atomically; see :mod:`relax_vk.artifact`)."""
    compiled.artifact().write(path)


@pass_instrument
class _CaptureHostTIR:
    """Keeps the TIR module right after ``SplitHostDevice``: host functions still have their buffer
    parameters and show each device kernel launch with its arguments and thread extents."""

    def __init__(self):
        self.module = None

    def run_after_pass(self, mod, info):
        if info.name == "tirx.SplitHostDevice":
            self.module = mod


def _opencl_module(module):
    if module.kind == "opencl":
        return module
    for child in module.imports:
        found = _opencl_module(child)
        if found is not None:
            return found
    return None


def build(
    mod: tvm.IRModule,
    target: "tvm.target.Target | str | None" = None,
    registry: Optional[OpRegistry] = None,
    options: Optional[ScopeOptions] = None,
    model: Optional[Dict[str, str]] = None,
) -> CompiledModule:
    """Scope, lower and compile ``mod`` for an OpenCL target (see :class:`CompiledModule`).
    ``model`` records where the module came from (e.g. ``{"example": "rfc-conv2d"}``), so a
    runtime can rebuild a CPU reference for it."""
    tgt = _target.resolve(target)
    if tgt.kind.name == "vulkan":
        raise UnsupportedTargetError(
            "building for Vulkan needs relax_vk's Vulkan shader backend (the 'Vulkan textures' feature), "
            "which is not available yet; relax_vk.scope_pipeline(relax_vk.target.vulkan()) gives the scope plan"
        )
    seconds: Dict[str, float] = {}
    t0 = time.perf_counter()
    scoped = scope_pipeline(tgt, registry, options)(mod)
    seconds["scope"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    lowered = lowering_stage(tgt)(scoped)
    seconds["lowering"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    tail = tvm.transform.Sequential(finalize_stage(tgt))
    capture = _CaptureHostTIR()
    outer = tvm.transform.PassContext.current()
    with tvm.transform.PassContext(
        opt_level=outer.opt_level, config=dict(outer.config), instruments=list(outer.instruments) + [capture]
    ):
        executable = tvm.compile(lowered, tgt, relax_pipeline=tail, tir_pipeline=TIR_PIPELINE)
    seconds["codegen"] = time.perf_counter() - t0
    device_module = _opencl_module(executable.mod)
    source = str(device_module.inspect_source("cl")) if device_module is not None else ""
    return CompiledModule(tgt, scoped, lowered, executable, source, kernel_names(source), capture.module, seconds, dict(model or {}))
