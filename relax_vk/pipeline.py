"""``get_pipeline``: the scope stages as one composable ``Sequential``."""

from __future__ import annotations

from typing import Optional

import tvm
from tvm import relax

from . import target as _target
from .options import ScopeOptions
from .passes import (
    CollectConsumerScopeInfo,
    CollectProducerScopeInfo,
    ConvertToPackedLayout,
    DefineVDevice,
    FoldSmallConstants,
    PartialLegalize,
    RemoveRedundantAssignments,
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


def get_pipeline(
    target: "tvm.target.Target | str | None" = None,
    registry: Optional[OpRegistry] = None,
    options: Optional[ScopeOptions] = None,
) -> tvm.transform.Pass:
    """All scope stages (layout, partial legalization, scope assignment, realization) as one
    ``Sequential``. Usable as a pass: ``relax_vk.get_pipeline(target)(mod)``."""
    tgt = _target.resolve(target)
    return tvm.transform.Sequential([layout_stage(), scope_stage(tgt, registry, options)], name="relax_vk.pipeline")
