"""``relax_vk.build``: compile a Relax module with the full texture pipeline.

The result keeps what tools and tests need: the kernel source (OpenCL C, or WGSL shaders for
Vulkan), its kernel names, the final Relax module (VDevices on every tensor, scheduled and
scope-specialized PrimFuncs), the memory plan, the TVM executable, and the time spent per stage.

The executable (what TVM's VM runs: :mod:`relax_vk.tvm_runtime`) is made when first asked for.
:func:`build` runs TVM's pipelines once with a C-source host (the kernels and the host TIR the
``.rvk`` export reads come from that run) and never compiles host code with LLVM, which took a
fifth of a mobilenet_v2 build (1.6-1.8 s of 8.7 s, measured); ``executable`` compiles the lowered
module again with TVM's default host. The device code of both runs is the same (the artifacts
are byte for byte equal).

Vulkan: the scope plan is made for the Vulkan target (its texture limits), exactly as for OpenCL.
TVM's texture lowering (``TextureFlatten``, the adreno schedules) is keyed to OpenCL-kind
targets, so the kernels are lowered under :func:`relax_vk.core.target.lowering_target` (an OpenCL
target with the same limits); the finalized device TIR is then emitted as WGSL by
:mod:`relax_vk.codegen.wgsl` (``texture2d_load``/``texture2d_store`` become ``textureLoad``/``textureStore``
on 2D-array textures). TVM's own WGSL codegen cannot take these kernels (no texture intrinsics, no
``blockIdx.z``) and the wheel has no SPIR-V codegen; docs/vulkan.md has the evidence.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

import tvm
from tvm import relax
from tvm.ir.instrument import pass_instrument

from .analysis.memory_plan import MemoryPlan, plan
from .codegen.opencl import aligned_byte_loads, kernel_names, opencl_source
from .codegen.texture_origins import mark as mark_texture_origins
from .codegen.tir_pipeline import NAME as TIR_PIPELINE
from .core import provenance
from .core import target as _target
from .core.dims import bind_single_valued_dims, refuse_conditional_sizes, with_kernel_ranges
from .core.errors import UnsupportedError
from .core.options import ScopeOptions
from .core.registry import OpRegistry
from .passes.layout.ceil_mode_pools import ceil_mode_pools_as_padding
from .passes.lower.half_arithmetic import HalfArithmetic, HalfPolicy, HalfTexelOverflow, float_texel_functions
from .passes.scope.choose_memory_kind import decide as decide_memory_kind
from .pipeline import _finalize_stage, _lowering_stage, _scope_pipeline
from .schedules.tuning import private_pools


class UnsupportedTargetError(UnsupportedError):
    """The target kind cannot be built."""


@dataclass
class CompiledModule:
    """What :func:`build` produces."""

    target: tvm.target.Target
    scoped: tvm.IRModule  # after the scope stages (what the memory plan describes)
    lowered: tvm.IRModule  # after lowering: final Relax + scheduled, scope-specialized PrimFuncs
    opencl_source: str  # the OpenCL C TVM generated (for Vulkan builds: of the lowering target)
    kernels: List[str]
    host_tir: Optional[tvm.IRModule] = None  # host functions right after SplitHostDevice
    stage_seconds: Dict[str, float] = field(default_factory=dict)
    model: Dict[str, str] = field(default_factory=dict)  # where the model came from (for --check)
    device_tir: Optional[tvm.IRModule] = None  # finalized device kernels (what the codegen saw)
    shaders: Dict[str, object] = field(default_factory=dict)  # Vulkan: kernel -> relax_vk.codegen.wgsl.Shader
    memory_decision: Optional[object] = None  # which rule chose textures or buffers (choose_memory_kind)
    texel_dtype: str = "float32"  # what texture texels are stored as (ScopeOptions.precision)
    vm_module: Optional[tvm.IRModule] = None  # the Relax module the VM runs (relax_vk.tools.vm_memory reads it)
    # shape variants (relax_vk.codegen.shape_variants): ({dim: value}, the build fixed to them) each
    variants: List[Tuple[Dict[str, int], "CompiledModule"]] = field(default_factory=list)
    _executable: Optional[relax.VMExecutable] = field(default=None, repr=False)

    @property
    def executable(self) -> relax.VMExecutable:
        """TVM's VM executable of the lowered module (host code by TVM's default host target),
        compiled on first use (module docstring)."""
        if self._executable is None:
            self._executable = _finalize_and_compile(self.lowered, _target.lowering_target(self.target))
        return self._executable

    @property
    def backend(self) -> str:
        """``"opencl"`` or ``"vulkan"``."""
        return self.target.kind.name

    @property
    def source(self) -> str:
        """The kernel source the runtime loads: OpenCL C, or the WGSL shaders one after another."""
        if self.backend == "vulkan":
            return "".join(self.shaders[name].source for name in sorted(self.shaders))
        return self.opencl_source

    @property
    def main(self) -> relax.Function:
        """The final Relax ``main``, every tensor typed with its VDevice."""
        return self.lowered["main"]

    def plan(self) -> MemoryPlan:
        return plan(self.lowered, decision=self.memory_decision, texel=self.texel_dtype)

    def artifact(self, reuse: bool = True):
        """The portable program (:class:`relax_vk.serialization.artifact.Artifact`) of this module;
        :class:`~relax_vk.core.errors.LimitError` when it cannot fit the target's device limits.
        ``reuse``: intermediates share allocations where their lifetimes allow (:mod:`relax_vk.storage`).
        A build with shape variants carries each one's artifact inside it
        (:func:`relax_vk.serialization.artifact.with_variants`)."""
        generic = self._artifact(reuse)
        if not self.variants:
            return generic
        from .serialization.artifact import with_variants

        return with_variants(generic, [(dims, variant.artifact(reuse)) for dims, variant in self.variants])

    def _artifact(self, reuse: bool):
        from .codegen.export import export_program, kernel_params
        from .codegen.shared_kernels import same_kernels

        same = same_kernels(self.device_tir) if self.device_tir is not None else {}
        limits = _target.target_limits(self.target)
        private = private_pools(_target.target_device(self.target), _target.target_api(self.target))
        if self.backend == "vulkan":
            return export_program(self.lowered, self.host_tir, self.source, "vulkan", self.model, self.shaders, limits, reuse, self.texel_dtype,
                                  private, same)  # fmt: skip
        return export_program(self.lowered, self.host_tir, self.opencl_source, "opencl", self.model, limits=limits, reuse=reuse,
                              texel=self.texel_dtype, private=private, same=same, kernel_params=kernel_params(self.device_tir))  # fmt: skip


def export(compiled: CompiledModule, path: str) -> None:
    """Write ``compiled`` as one ``.rvk`` file (atomically; see :mod:`relax_vk.serialization.artifact`)."""
    compiled.artifact().write(path)


@pass_instrument
class _CaptureTIR:
    """Keeps the TIR module right after ``SplitHostDevice`` (host functions still have their buffer
    parameters and show each device kernel launch with its arguments and thread extents) and the
    device module after its finalisation (``LowerIntrin`` is the last device pass), and the Relax
    module TVM's VM codegen compiles (after ``AttachGlobalSymbol``, the last Relax pass)."""

    def __init__(self):
        self.module = None
        self.device = None
        self.vm_module = None

    def run_after_pass(self, mod, info):
        if info.name == "AttachGlobalSymbol":
            self.vm_module = mod
        elif info.name == "tirx.SplitHostDevice":
            self.module = mod
        elif info.name == "tirx.LowerIntrin" and _is_device_module(mod):
            self.device = mod


def _is_device_module(mod) -> bool:
    for _, func in mod.functions_items():
        target = func.attrs.get("target") if func.attrs is not None else None
        if target is not None and target.kind.name != "llvm" and int(func.attrs.get("calling_conv", 0)) == 2:
            return True
    return False


def build(
    mod: tvm.IRModule,
    target: "tvm.target.Target | str | None" = None,
    registry: Optional[OpRegistry] = None,
    options: Optional[ScopeOptions] = None,
    model: Optional[Dict[str, str]] = None,
    calibration: "Optional[Sequence[np.ndarray]] | bool" = True,
    specialize: Sequence[Mapping[str, int]] = (),
) -> CompiledModule:
    """Scope, lower and compile ``mod`` for an OpenCL or Vulkan target (see :class:`CompiledModule`
    and, for Vulkan, the module docstring). ``model`` records where the module came from (e.g.
    ``{"example": "rfc-conv2d"}``), so a runtime can rebuild a CPU reference for it.

    With ``ScopeOptions(arithmetic="fp16")`` kernels compute in half
    (:mod:`relax_vk.passes.lower.half_arithmetic`), but for ``options.fp32_ops`` and, when
    ``calibration`` is not False, the ops whose values overflow float16 on a CPU reference run of
    ``calibration`` (input arrays; True: seeded inputs) and their readers
    (:func:`relax_vk.analysis.fp16_range.overflowing_ops`).

    ``specialize``: for a model with run-time dims, sizes (``{dim: value}``, every dim given) to build
    fixed as well; the artifact carries those builds and a session runs one where a run's dims equal
    its sizes, the generic program elsewhere (:mod:`relax_vk.codegen.shape_variants`)."""
    if specialize:
        from .codegen.shape_variants import check_values, input_dims, specialize as fixed_to

        dims = input_dims(mod)
        sizes = [check_values(dims, values) for values in specialize]  # (every size checked before anything is built)
        compiled = build(mod, target, registry, options, model, calibration)
        compiled.variants = [(values, build(fixed_to(mod, values), target, registry, options, model, calibration)) for values in sizes]
        return compiled
    try:
        tgt = _target.resolve(target)
    except ValueError as err:
        raise UnsupportedTargetError(f"relax_vk.build: {err}") from None
    mod = ceil_mode_pools_as_padding(bind_single_valued_dims(mod))
    refuse_conditional_sizes(mod)
    seconds: Dict[str, float] = {}
    with provenance.tracking() as tracker:  # the model's ops, followed to the kernels
        t0 = time.perf_counter()
        scoped = _scope_pipeline(tgt, registry, options)(mod)
        seconds["scope"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        lowered = _lowering_stage(tgt)(scoped)  # (Vulkan: retargeted to the lowering target first)
        seconds["lowering"] = time.perf_counter() - t0
    lowered = provenance.attach(lowered, tracker)
    if options is not None and options.arithmetic == "fp16":
        t0 = time.perf_counter()
        lowered = HalfArithmetic(_half_policy(mod, options, calibration))(lowered)
        seconds["half arithmetic"] = time.perf_counter() - t0
    elif options is not None and options.precision == "fp16" and calibration is not False:
        t0 = time.perf_counter()  # (half texels alone: the overflowing kernels' textures keep float32 texels)
        lowered = HalfTexelOverflow(_half_policy(mod, options, calibration).overflow)(lowered)
        seconds["half texels"] = time.perf_counter() - t0
    compiled = compile_lowered(tgt, scoped, lowered, seconds, model, (options or ScopeOptions()).texel_dtype)
    compiled.memory_decision = decide_memory_kind(mod, tgt, options)
    return compiled


def _half_policy(mod: tvm.IRModule, options: ScopeOptions, calibration) -> HalfPolicy:
    """What :class:`HalfArithmetic` keeps in float32 for ``options`` and the calibration."""
    overflow = {}
    if calibration is not False:
        from .analysis.fp16_range import overflowing_ops

        overflow = overflowing_ops(mod, None if calibration is True else calibration)
    return HalfPolicy(accumulate="float16" if options.accumulate == "fp16" else "float32", fp32_ops=options.fp32_ops, overflow=overflow)


def _float_texel_kernels(lowered: tvm.IRModule, host_tir: Optional[tvm.IRModule]) -> set:
    """The device kernels of the PrimFuncs whose textures keep float32 texels
    (:func:`~relax_vk.passes.lower.half_arithmetic.float_texel_functions`)."""
    from .codegen.export import kernel_launches

    names = set()
    hosts = {g.name_hint: g for g in host_tir.get_global_vars()} if host_tir is not None else {}
    for func in float_texel_functions(lowered["main"]):
        if func in hosts:
            names.update(launch["kernel"] for launch in kernel_launches(host_tir[hosts[func]], func)[1])
    return names


def retarget_for_lowering(scoped: tvm.IRModule, tgt: tvm.target.Target) -> tvm.IRModule:
    """The scoped module with its VDevices on the lowering target (the same module for OpenCL):
    the first lowering stage alone (:func:`relax_vk.lowering_stage` runs it itself)."""
    from .pipeline import _stages

    named = [run for stage, run in _stages(tgt, None, None, ("lowering",)) if stage.name == "RetargetVDevices"]
    return named[0](scoped) if named else scoped


def _finalize_and_compile(lowered: tvm.IRModule, lower_tgt: tvm.target.Target, instruments: Sequence[object] = ()) -> relax.VMExecutable:
    """``tvm.compile`` of a lowered module with the finalisation stage and relax_vk's TIR pipeline,
    under the current pass context's settings plus ``instruments``."""
    tail = tvm.transform.Sequential(_finalize_stage(lower_tgt))
    lowered = with_kernel_ranges(lowered)  # (for the grid fold, kernels made after scheduling included)
    outer = tvm.transform.PassContext.current()
    with tvm.transform.PassContext(opt_level=outer.opt_level, config=dict(outer.config), instruments=list(outer.instruments) + list(instruments)):
        return tvm.compile(lowered, lower_tgt, relax_pipeline=tail, tir_pipeline=TIR_PIPELINE)


def compile_lowered(
    tgt: tvm.target.Target,
    scoped: tvm.IRModule,
    lowered: tvm.IRModule,
    seconds: Optional[Dict[str, float]] = None,
    model: Optional[Dict[str, str]] = None,
    texel_dtype: str = "float32",
) -> CompiledModule:
    """The code generation half of :func:`build`: TVM's finalisation and codegen of a lowered,
    scheduled module (OpenCL C; WGSL for a Vulkan ``tgt``). ``texel_dtype``: what textures are
    stored as (``"float16"``: half texels; the kernels compute in float32 either way)."""
    seconds = dict(seconds or {})
    lower_tgt = _target.lowering_target(tgt)
    t0 = time.perf_counter()
    capture = _CaptureTIR()
    # host code as C source, never compiled: the kernels and the captured TIR are what a build needs;
    # its activation textures are addressed at origins of shared images (TVM's VM, which compiles
    # `lowered` itself, lays each texture out in an image of its own)
    # (a folded rectangle may grow either way: the smaller of the image width and height bounds it)
    placed = mark_texture_origins(lowered, _target.target_limits(tgt).textures.spatial, tgt.kind.name)
    source_only = _finalize_and_compile(placed, tvm.target.Target(lower_tgt, host="c"), [capture])
    seconds["codegen"] = time.perf_counter() - t0
    source = opencl_source(source_only)
    if tgt.kind.name == "opencl":
        source = aligned_byte_loads(source)
    compiled = CompiledModule(
        tgt, scoped, lowered, source, kernel_names(source), capture.module, seconds, dict(model or {}), capture.device
    )
    if tgt.kind.name == "vulkan":
        from .codegen.wgsl import emit_module

        t0 = time.perf_counter()
        float_texels = _float_texel_kernels(lowered, capture.module) if texel_dtype == "float16" else set()
        compiled.shaders = emit_module(capture.device, texel_dtype == "float16", float_texels) if capture.device is not None else {}
        compiled.kernels = sorted(compiled.shaders)
        seconds["wgsl"] = time.perf_counter() - t0
    compiled.stage_seconds = seconds
    compiled.texel_dtype = texel_dtype
    compiled.vm_module = capture.vm_module
    return compiled
