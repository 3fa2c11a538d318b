"""The RFC's stages composed into pipelines.

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
and passes it composes, so one pipeline never sees two targets.
"""

from __future__ import annotations

from typing import List, Optional

import tvm
from tvm import relax

from .codegen import tir_pipeline as _tir_pipeline  # noqa: F401  (registers the "relax_vk.texture" TIR pipeline)
from .core import target as _target
from .core.options import ScopeOptions
from .core.registry import OpRegistry
from .passes import (
    ChooseMemoryKind,
    CollectConsumerScopeInfo,
    CollectProducerScopeInfo,
    ConvertToPackedLayout,
    DefineVDevice,
    DeriveIdentifiers,
    EdgeDtypes,
    FoldScopeCopies,
    FoldSmallConstants,
    IsolateBroadcastReductions,
    LegalizeWithScopes,
    PartialLegalize,
    PlanTextureStorage,
    RecordVDevices,
    RemoveRedundantAssignments,
    RewriteBufferReshapes,
    ShortenKernelNames,
    SpecializeKernelScopes,
    SplitLargeWeights,
)


def _layout_stage(tgt: Optional[tvm.target.Target]) -> tvm.transform.Pass:
    per_target = [EdgeDtypes(tgt.kind.name), SplitLargeWeights(_target.target_limits(tgt).max_buffer_bytes)] if tgt is not None else []
    return tvm.transform.Sequential(
        [
            DeriveIdentifiers(),
            *per_target,
            relax.transform.DecomposeOpsForInference(),
            relax.transform.Normalize(),
            # the tuple an inference batch norm leaves ((y, mean, var), then [0]) read through
            relax.transform.CanonicalizeBindings(),
            FoldSmallConstants(),
            ConvertToPackedLayout(),
            relax.transform.Normalize(),
            # drop what packing left unused, e.g. the unpacked pool output that only fed the
            # zeros_like standing in for max_pool2d_with_indices' unused indices
            relax.transform.DeadCodeElimination(),
        ],
        name="relax_vk.layout_stage",
    )


def layout_stage(target: "tvm.target.Target | str | None" = None) -> tvm.transform.Pass:
    """Stage 1: names made valid identifiers, then (when a target is given) inputs and outputs of
    dtypes its API cannot hold converted at the edges and constant weights too large for one of
    its buffer bindings split, inference decompositions with their
    constant parts folded (numpy), then packed layouts through the network; constant weights are
    packed (and padded) at compile time."""
    return _layout_stage(_target.resolve(target) if target is not None else None)


def _scope_stage(tgt: tvm.target.Target, registry: Optional[OpRegistry], options: Optional[ScopeOptions]) -> tvm.transform.Pass:
    return tvm.transform.Sequential(
        [
            ChooseMemoryKind(tgt, options),
            PartialLegalize(registry),
            CollectConsumerScopeInfo(tgt, registry, options),
            CollectProducerScopeInfo(tgt, registry, options),
            DefineVDevice(tgt, registry, options),
            relax.transform.RealizeVDevice(),
            RemoveRedundantAssignments(),
        ],
        name="relax_vk.scope_stage",
    )


def _scope_pipeline(tgt: tvm.target.Target, registry: Optional[OpRegistry], options: Optional[ScopeOptions]) -> tvm.transform.Pass:
    return tvm.transform.Sequential([_layout_stage(tgt), _scope_stage(tgt, registry, options)], name="relax_vk.scope_pipeline")


def _lowering_stage(tgt: tvm.target.Target, schedule: bool = True) -> tvm.transform.Pass:
    from .schedules import schedule_passes

    passes = [
        LegalizeWithScopes(),
        relax.transform.AnnotateTIROpPattern(),
        IsolateBroadcastReductions(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
        relax.transform.DeadCodeElimination(),
        FoldScopeCopies(),
        RemoveRedundantAssignments(),
        relax.transform.DeadCodeElimination(),
        SpecializeKernelScopes(),
        ShortenKernelNames(),
        relax.transform.Normalize(),
    ]

    @tvm.transform.module_pass(opt_level=0, name="relax_vk.lowering_stage")
    def _lower(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        with tgt:
            return tvm.transform.Sequential(passes + (schedule_passes() if schedule else []))(mod)

    return _lower


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
            finalize.append(PlanTextureStorage())
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
    """Stage 5 on a scoped module: legalize keeping VDevices, fuse, fold copies into kernels,
    specialize kernels per call site, schedule. The result still has readable Relax and TIR."""
    return _lowering_stage(_target.resolve(target))


def finalize_stage(target: "tvm.target.Target | str | None" = None) -> List[tvm.transform.Pass]:
    """What follows :func:`lowering_stage`: TVM's GPU dataflow lowering and finalisation (memory
    planning, VM lowering), with ``RewriteDataflowReshape`` replaced by
    :func:`~relax_vk.passes.RewriteBufferReshapes` (a reshape *view* of a texture is wrong) and
    :func:`~relax_vk.passes.PlanTextureStorage` after ``LowerRuntimeBuiltin`` (texture tensors in
    image storages of exactly their bytes, shared where lifetimes allow), then
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
    stages = [_scope_pipeline(tgt, registry, options), _lowering_stage(tgt)]
    tail = tvm.transform.Sequential(_finalize_stage(tgt))

    @tvm.transform.module_pass(opt_level=0, name="relax_vk.pipeline")
    def _pipeline(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        for stage in stages:
            mod = stage(mod)
        with tgt:
            return tail(mod)

    return _pipeline
