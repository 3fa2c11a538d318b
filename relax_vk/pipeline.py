"""The RFC's stages composed into pipelines, from one ordered list of named stages.

:data:`STAGES` names every step (its RFC stage number, a name, its group) and makes its passes for
a resolved target, registry and options; :func:`stages` resolves them. Every function below is
built from that list, and so are ``relax-vk show`` (the module after each layout and scope stage),
``relax-vk plan`` and ``relax-vk build`` (:func:`scope_pipeline`, :func:`lowering_stage`) and the
walkthrough notebook, so the stages a tool shows are the stages a build runs.

==============  ==============================  ==============================================
function        stages                          passes (``relax_vk.passes`` unless TVM's)
==============  ==============================  ==============================================
layout_stage    1 convert layout                ``passes.layout``
scope_stage     2-4 scope assignment            ``passes.scope`` + TVM's ``RealizeVDevice``
scope_pipeline  1-4                             the two above
lowering_stage  5 lowering + scheduling         ``passes.lower``, TVM's fusion, ``schedules``
finalize_stage  after 5                         TVM's GPU dataflow lowering and finalisation
get_pipeline    everything ``tvm.compile`` runs  all of the above
==============  ==============================  ==============================================

Every public function resolves its ``target`` argument once (a ``Target``, ``"opencl"`` /
``"vulkan"``, or None for the current target) and hands the resolved target down to the stages
and passes it composes, so one pipeline never sees two targets (the lowering group runs under
that target's :func:`~relax_vk.core.target.lowering_target`, an OpenCL-kind target with the same
limits for Vulkan, to which ``RetargetVDevices`` moves the scoped module first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import tvm
from tvm import relax

from .codegen import tir_pipeline as _tir_pipeline  # noqa: F401  (registers the "relax_vk.texture" TIR pipeline)
from .core import target as _target
from .core.options import ScopeOptions
from .core.registry import OpRegistry
from .passes import (
    ChooseConvAlgorithm,
    QuantizedWeightTexels,
    ChooseMemoryKind,
    CollectConsumerScopeInfo,
    CollectProducerScopeInfo,
    ConvertToPackedLayout,
    DefineVDevice,
    DeriveIdentifiers,
    EdgeDtypes,
    FoldScopeCopies,
    FoldSmallConstants,
    RecordIndexRanges,
    NarrowInt64Constants,
    NaNSelfComparisons,
    BoolArithmetic,
    StepQuotients,
    CheckStaticShapes,
    HoistImageStorage,
    IsolateBroadcastReductions,
    IsolateComputedSizes,
    SplitWideKernels,
    LegalizeWithScopes,
    NameKernelsForApi,
    PartialLegalize,
    PlaceBufferStorage,
    PlanTextureStorage,
    RecordVDevices,
    RemoveRedundantAssignments,
    RetargetVDevices,
    RoundBufferStorage,
    RewriteBufferReshapes,
    FuseGathers,
    ShortenKernelNames,
    SpecializeKernelScopes,
    SplitLargeWeights,
    SplitWideConcats,
)


@dataclass(frozen=True)
class Stage:
    """One named step of the pipeline: the RFC stage it belongs to (``number``), its ``group``
    (``"layout"``, ``"scope"``, ``"lowering"``) and how to make its passes for a resolved target,
    registry and options. :data:`STAGES` lists them in the order they run; every pipeline of this
    module and every tool (``relax-vk show``, ``plan``, ``build``, the walkthrough notebook) is
    made from that list, so none can drift from another."""

    number: int
    name: str
    group: str
    passes: Callable[["_Context"], List[tvm.transform.Pass]]


@dataclass(frozen=True)
class _Context:
    target: Optional[tvm.target.Target]  # None: the layout group without a target (no edge dtypes, no weight splits)
    registry: Optional[OpRegistry]
    options: Optional[ScopeOptions]
    schedule: bool = True


def _convert_layout(c: _Context) -> List[tvm.transform.Pass]:
    tgt = c.target
    edges = [EdgeDtypes(tgt.kind.name)] if tgt is not None else []
    int64_constants = [NarrowInt64Constants(tgt.kind.name)] if tgt is not None else []
    # after the folding: the weights importers wrap (Gemm's transB, Linear's permute_dims, an
    # astype) are constants by then, which is what the split needs
    split = [SplitLargeWeights(_target.target_limits(tgt).max_buffer_bytes)] if tgt is not None else []
    # (a Vulkan shader binds few tensors: a concat of dozens of them becomes one of concats)
    split += [SplitWideConcats()] if tgt is not None and tgt.kind.name == "vulkan" else []
    return [
        DeriveIdentifiers(),
        NaNSelfComparisons(),
        BoolArithmetic(),
        *edges,
        relax.transform.DecomposeOpsForInference(),
        relax.transform.Normalize(),
        # the tuple an inference batch norm leaves ((y, mean, var), then [0]) read through
        relax.transform.CanonicalizeBindings(),
        StepQuotients(),
        FoldSmallConstants(),
        RecordIndexRanges(),
        *int64_constants,
        *split,
        ConvertToPackedLayout(),
        relax.transform.Normalize(),
        # drop what packing left unused, e.g. the unpacked pool output that only fed the
        # zeros_like standing in for max_pool2d_with_indices' unused indices
        relax.transform.DeadCodeElimination(),
        # (after the folding, which makes a constant condition's nonzero static, and the
        # elimination, which drops an unused one)
        CheckStaticShapes(),
    ]


def _schedule(c: _Context) -> List[tvm.transform.Pass]:
    from .schedules import schedule_passes

    return schedule_passes() if c.schedule else []


def _api_kernel_names(c: _Context) -> List[tvm.transform.Pass]:
    lowered_as = _target.lowering_target(c.target).kind.name
    return [NameKernelsForApi(c.target.kind.name, lowered_as)] if lowered_as != c.target.kind.name else []


STAGES: Tuple[Stage, ...] = (
    Stage(1, "convert layout", "layout", _convert_layout),
    Stage(2, "ChooseMemoryKind", "scope", lambda c: [ChooseMemoryKind(c.target, c.options)]),
    Stage(2, "ChooseConvAlgorithm", "scope", lambda c: [ChooseConvAlgorithm(c.target, c.options)]),
    Stage(2, "QuantizedWeightTexels", "scope", lambda c: [QuantizedWeightTexels(c.target, c.options)]),
    Stage(2, "PartialLegalize", "scope", lambda c: [PartialLegalize(c.registry)]),
    Stage(3, "CollectConsumerScopeInfo", "scope", lambda c: [CollectConsumerScopeInfo(c.target, c.registry, c.options)]),
    Stage(3, "CollectProducerScopeInfo", "scope", lambda c: [CollectProducerScopeInfo(c.target, c.registry, c.options)]),
    Stage(3, "DefineVDevice", "scope", lambda c: [DefineVDevice(c.target, c.registry, c.options)]),
    Stage(4, "RealizeVDevice", "scope", lambda c: [relax.transform.RealizeVDevice()]),
    Stage(4, "RemoveRedundantAssignments", "scope", lambda c: [RemoveRedundantAssignments()]),
    # stage 5 runs under the lowering target (core.target.lowering_target: OpenCL-kind for Vulkan too)
    Stage(5, "RetargetVDevices", "lowering", lambda c: [RetargetVDevices(c.target.kind.name, _target.lowering_target(c.target))]
          if not _target.lowering_target(c.target).same_as(c.target) else []),  # fmt: skip
    Stage(5, "LegalizeWithScopes", "lowering", lambda c: [LegalizeWithScopes()]),
    Stage(5, "fuse", "lowering", lambda c: [
        relax.transform.AnnotateTIROpPattern(),
        FuseGathers(),
        IsolateBroadcastReductions(),
        IsolateComputedSizes(),
        relax.transform.FuseOps(),
        *([SplitWideKernels()] if c.target.kind.name == "vulkan" else []),
        relax.transform.FuseTIR(),
        relax.transform.DeadCodeElimination(),
    ]),  # fmt: skip
    Stage(5, "FoldScopeCopies", "lowering", lambda c: [FoldScopeCopies(), RemoveRedundantAssignments(), relax.transform.DeadCodeElimination()]),
    Stage(5, "SpecializeKernelScopes", "lowering", lambda c: [SpecializeKernelScopes()]),
    Stage(5, "kernel names", "lowering", lambda c: _api_kernel_names(c) + [ShortenKernelNames(), relax.transform.Normalize()]),
    Stage(5, "schedule", "lowering", _schedule),
)
GROUPS = ("layout", "scope", "lowering")


def stages(
    target: "tvm.target.Target | str | None" = None,
    registry: Optional[OpRegistry] = None,
    options: Optional[ScopeOptions] = None,
    groups: Sequence[str] = ("layout", "scope"),
    schedule: bool = True,
) -> List[Tuple[Stage, tvm.transform.Pass]]:
    """The :data:`STAGES` of ``groups``, in order, each with its pass for ``target`` (resolved once
    here), ``registry`` and ``options`` (stages with nothing to do for them left out): what
    ``relax-vk show`` prints the module after, and what :func:`scope_pipeline`
    (``groups=("layout", "scope")``), :func:`lowering_stage` and :func:`get_pipeline` run. A
    lowering stage's pass runs under the lowering target. ``schedule=False``: the lowering group
    without scheduling (the tuner sets each kernel's configuration first)."""
    return _stages(_target.resolve(target), registry, options, groups, schedule)


def _stages(tgt, registry, options, groups, schedule=True) -> List[Tuple[Stage, tvm.transform.Pass]]:
    unknown = set(groups) - set(GROUPS)
    if unknown:
        raise ValueError(f"unknown pipeline groups {sorted(unknown)}; known: {', '.join(GROUPS)}")
    ctx = _Context(tgt, registry, options, schedule)
    out = []
    for stage in STAGES:
        passes = stage.passes(ctx) if stage.group in groups else []
        if passes:  # (a stage with nothing to do for this target is left out, e.g. RetargetVDevices on OpenCL)
            seq = tvm.transform.Sequential(passes, name=f"relax_vk.{stage.name.replace(' ', '_')}")
            out.append((stage, _under(_target.lowering_target(tgt), seq, stage.name) if stage.group == "lowering" else seq))
    return out


def _under(tgt: tvm.target.Target, inner: tvm.transform.Pass, name: str) -> tvm.transform.Pass:
    """``inner`` run with ``tgt`` as the current target (TVM's legalizers and schedules read it)."""

    @tvm.transform.module_pass(opt_level=0, name=f"relax_vk.{name.replace(' ', '_')}")
    def _run(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        with tgt:
            return inner(mod)

    return _run


def _sequence(named: List[Tuple[Stage, tvm.transform.Pass]], name: str) -> tvm.transform.Pass:
    return tvm.transform.Sequential([p for _, p in named], name=name)


def _layout_stage(tgt: Optional[tvm.target.Target]) -> tvm.transform.Pass:
    return tvm.transform.Sequential(_convert_layout(_Context(tgt, None, None)), name="relax_vk.layout_stage")


def layout_stage(target: "tvm.target.Target | str | None" = None) -> tvm.transform.Pass:
    """Stage 1: names made valid identifiers, then (when a target is given) inputs and outputs of
    dtypes its API cannot hold converted at the edges, inference decompositions with their
    constant parts folded (numpy), (when a target is given) constant weights too large for one of
    its buffer bindings split, then packed layouts through the network; constant weights are
    packed (and padded) at compile time."""
    return _layout_stage(_target.resolve(target) if target is not None else None)


def _scope_stage(tgt: tvm.target.Target, registry: Optional[OpRegistry], options: Optional[ScopeOptions]) -> tvm.transform.Pass:
    return _sequence(_stages(tgt, registry, options, ("scope",)), "relax_vk.scope_stage")


def _scope_pipeline(tgt: tvm.target.Target, registry: Optional[OpRegistry], options: Optional[ScopeOptions]) -> tvm.transform.Pass:
    return _sequence(_stages(tgt, registry, options, ("layout", "scope")), "relax_vk.scope_pipeline")


def _lowering_stage(tgt: tvm.target.Target, schedule: bool = True) -> tvm.transform.Pass:
    """Stage 5 for the scoped module of target ``tgt`` (OpenCL or Vulkan: Vulkan's VDevices are
    moved to the lowering target first, and its kernels named for Vulkan)."""
    return _sequence(_stages(tgt, None, None, ("lowering",), schedule), "relax_vk.lowering_stage")


def _finalize_stage(tgt: tvm.target.Target) -> List[tvm.transform.Pass]:
    from tvm.relax.backend import gpu_generic

    dataflow = [
        RewriteBufferReshapes() if p.info.name == "RewriteDataflowReshape" else p
        for p in gpu_generic.dataflow_lower_passes(tgt)
    ]
    finalize = []
    for p in gpu_generic.finalize_passes(tgt):
        finalize.append(p)
        if p.info.name == "LowerRuntimeBuiltin":
            finalize += [PlanTextureStorage(), PlaceBufferStorage(), RoundBufferStorage(), HoistImageStorage()]
    return dataflow + finalize + [RecordVDevices()]


def scope_stage(
    target: "tvm.target.Target | str | None" = None,
    registry: Optional[OpRegistry] = None,
    options: Optional[ScopeOptions] = None,
) -> tvm.transform.Pass:
    """Stages 2-4 on an already packed module: partial legalization, scope assignment, realization."""
    return _scope_stage(_target.resolve(target), registry, options)


def scope_pipeline(
    target: "tvm.target.Target | str | None" = None,
    registry: Optional[OpRegistry] = None,
    options: Optional[ScopeOptions] = None,
) -> tvm.transform.Pass:
    """Stages 1-4 (layout, partial legalization, scope assignment, realization) as one
    ``Sequential``: the module it returns has every tensor's scope decided (``relax_vk.plan``)."""
    return _scope_pipeline(_target.resolve(target), registry, options)


def lowering_stage(target: "tvm.target.Target | str | None" = None) -> tvm.transform.Pass:
    """Stage 5 on a module scoped for ``target``: (Vulkan: VDevices moved to the lowering target)
    legalize keeping VDevices, fuse, fold copies into kernels, specialize kernels per call site,
    name them (for their API, bounded), schedule. The result still has readable Relax and TIR."""
    return _lowering_stage(_target.resolve(target))


def finalize_stage(target: "tvm.target.Target | str | None" = None) -> List[tvm.transform.Pass]:
    """What follows :func:`lowering_stage`: TVM's GPU dataflow lowering and finalisation (memory
    planning, VM lowering), with ``RewriteDataflowReshape`` replaced by
    :func:`~relax_vk.passes.RewriteBufferReshapes` (a reshape *view* of a texture is wrong) and
    :func:`~relax_vk.passes.PlanTextureStorage` after ``LowerRuntimeBuiltin`` (texture tensors in
    image storages of exactly their bytes, shared where lifetimes allow) and
    :func:`~relax_vk.passes.HoistImageStorage` (``main__images`` / ``main__with_images``: images
    allocated once per VM by ``load_vm``), with :func:`~relax_vk.passes.PlaceBufferStorage` and
    :func:`~relax_vk.passes.RoundBufferStorage` between them (byte storages on a ``"global"`` VDevice
    and in whole pages, so TVM's pooled OpenCL allocator serves and reuses them), then
    :func:`~relax_vk.passes.RecordVDevices` (the executable's VDevice table, for ``load_vm``)."""
    return _finalize_stage(_target.resolve(target))


def get_pipeline(
    target: "tvm.target.Target | str | None" = None,
    registry: Optional[OpRegistry] = None,
    options: Optional[ScopeOptions] = None,
) -> tvm.transform.Pass:
    """The complete Relax pipeline, for ``tvm.compile(mod, target, relax_pipeline=...,
    tir_pipeline="relax_vk.texture")``: scope assignment, lowering, then TVM's GPU dataflow
    lowering and finalisation (memory planning, VM lowering). The target is resolved once, here."""
    tgt = _target.resolve(target)
    named = _stages(tgt, registry, options, GROUPS)
    lower_tgt = _target.lowering_target(tgt)
    tail = tvm.transform.Sequential(_finalize_stage(lower_tgt))

    @tvm.transform.module_pass(opt_level=0, name="relax_vk.pipeline")
    def _pipeline(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        for _, stage in named:
            mod = stage(mod)
        with lower_tgt:
            return tail(mod)

    return _pipeline
