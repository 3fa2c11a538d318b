"""The pipelines: ``scope_pipeline`` (stages 1-4: layouts and memory scopes) and ``get_pipeline``
(everything ``tvm.compile`` needs as its ``relax_pipeline``)."""

from __future__ import annotations

from typing import List, Optional

import tvm
from tvm import relax

from . import target as _target
from .options import ScopeOptions
from . import tir_pipeline as _tir_pipeline  # noqa: F401  (registers the "relax_vk.texture" TIR pipeline)
from .legalize import LegalizeWithScopes
from .passes import (
    CollectConsumerScopeInfo,
    CollectProducerScopeInfo,
    ConvertToPackedLayout,
    DefineVDevice,
    FoldScopeCopies,
    FoldSmallConstants,
    PartialLegalize,
    RemoveRedundantAssignments,
    RewriteBufferReshapes,
    SpecializeKernelScopes,
)
from .registry import OpRegistry


def layout_stage() -> tvm.transform.Pass:
    """Stage 1: inference decompositions, their constant parts folded (numpy), then packed
    layouts through the network; constant weights are packed (and padded) at compile time."""
    return tvm.transform.Sequential(
        [
            relax.transform.DecomposeOpsForInference(),
            relax.transform.Normalize(),
            FoldSmallConstants(),
            ConvertToPackedLayout(),
            relax.transform.Normalize(),
            # drop what packing left unused, e.g. the unpacked pool output that only fed the
            # zeros_like standing in for max_pool2d_with_indices' unused indices
            relax.transform.DeadCodeElimination(),
        ],
        name="relax_vk.layout_stage",
    )


def scope_stage(
    target: "tvm.target.Target | str | None" = None,
    registry: Optional[OpRegistry] = None,
    options: Optional[ScopeOptions] = None,
) -> tvm.transform.Pass:
    """Stages 2-4 on an already packed module: partial legalization, scope assignment, realization."""
    tgt = _target.resolve(target)
    return tvm.transform.Sequential(
        [
            PartialLegalize(registry),
            CollectConsumerScopeInfo(tgt, registry, options),
            CollectProducerScopeInfo(tgt, registry, options),
            DefineVDevice(tgt, registry, options),
            relax.transform.RealizeVDevice(),
            RemoveRedundantAssignments(),
        ],
        name="relax_vk.scope_stage",
    )


def scope_pipeline(
    target: "tvm.target.Target | str | None" = None,
    registry: Optional[OpRegistry] = None,
    options: Optional[ScopeOptions] = None,
) -> tvm.transform.Pass:
    """Stages 1-4 (layout, partial legalization, scope assignment, realization) as one
    ``Sequential``: the module it returns has every tensor's scope decided (``relax_vk.plan``)."""
    tgt = _target.resolve(target)
    return tvm.transform.Sequential([layout_stage(), scope_stage(tgt, registry, options)], name="relax_vk.scope_pipeline")


def lowering_stage(target: "tvm.target.Target | str | None" = None) -> tvm.transform.Pass:
    """Stage 5 on a scoped module: legalize keeping VDevices, fuse, fold copies into kernels,
    specialize kernels per call site, schedule. The result still has readable Relax and TIR."""
    from .schedule import schedule_passes

    tgt = _target.resolve(target)
    passes = [
        LegalizeWithScopes(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
        relax.transform.DeadCodeElimination(),
        FoldScopeCopies(),
        RemoveRedundantAssignments(),
        relax.transform.DeadCodeElimination(),
        SpecializeKernelScopes(),
        relax.transform.Normalize(),
    ]

    @tvm.transform.module_pass(opt_level=0, name="relax_vk.lowering_stage")
    def _lower(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        with tgt:
            return tvm.transform.Sequential(passes + schedule_passes())(mod)

    return _lower


def finalize_stage(target: "tvm.target.Target | str | None" = None) -> List[tvm.transform.Pass]:
    """What follows :func:`lowering_stage`: TVM's GPU dataflow lowering and finalisation (memory
    planning, VM lowering), with ``RewriteDataflowReshape`` replaced by
    :func:`~relax_vk.passes.RewriteBufferReshapes` (a reshape *view* of a texture is wrong)."""
    from tvm.relax.backend import gpu_generic

    tgt = _target.resolve(target)
    dataflow = [
        RewriteBufferReshapes() if p.info.name == "RewriteDataflowReshape" else p
        for p in gpu_generic.dataflow_lower_passes(tgt)
    ]
    return dataflow + list(gpu_generic.finalize_passes(tgt))


def get_pipeline(
    target: "tvm.target.Target | str | None" = None,
    registry: Optional[OpRegistry] = None,
    options: Optional[ScopeOptions] = None,
) -> tvm.transform.Pass:
    """The complete Relax pipeline, for ``tvm.compile(mod, target, relax_pipeline=...,
    tir_pipeline="relax_vk.texture")``: scope assignment, lowering, then TVM's GPU dataflow
    lowering and finalisation (memory planning, VM lowering)."""
    tgt = _target.resolve(target)
    tail = finalize_stage(tgt)

    @tvm.transform.module_pass(opt_level=0, name="relax_vk.pipeline")
    def _pipeline(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        mod = scope_pipeline(tgt, registry, options)(mod)
        mod = lowering_stage(tgt)(mod)
        with tgt:
            return tvm.transform.Sequential(tail)(mod)

    return _pipeline
