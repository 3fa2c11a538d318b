"""relax_vk's passes, one per module, grouped by the RFC stage they implement; each returns a
``tvm.transform.Pass`` (compose them with ``tvm.transform.Sequential`` or use the stages of
:mod:`relax_vk.pipeline`).

* :mod:`.layout` -- stage 1: identifiers, packed layouts (NCHW -> NCHW4c) and compile-time constant
  packing;
* :mod:`.scope` -- stages 2-4: partial legalization, consumer/producer scope analysis,
  ``DefineVDevice``, redundant-assignment removal (``RealizeVDevice`` is TVM's);
* :mod:`.lower` -- stage 5: scope-keeping legalization and the fix-ups that keep decided scopes
  through fusion, copy folding, per-call-site kernels and TVM's finalisation.
"""

from .layout import BoolArithmetic, StepQuotients, ConvertToPackedLayout, DeriveIdentifiers, EdgeDtypes, CheckStaticShapes, FoldSmallConstants, NaNSelfComparisons, NarrowInt64Constants, RecordIndexRanges, SplitLargeWeights, SplitWideConcats
from .lower import (
    FoldScopeCopies,
    HoistImageStorage,
    IsolateBroadcastReductions,
    IsolateComputedSizes,
    FuseGathers,
    LegalizeWithScopes,
    NameKernelsForApi,
    PlaceBufferStorage,
    PlanTextureStorage,
    RecordVDevices,
    RetargetVDevices,
    RoundBufferStorage,
    RewriteBufferReshapes,
    ShortenKernelNames,
    SpecializeKernelScopes,
    SplitWideKernels,
)
from .scope import (
    ChooseConvAlgorithm,
    ChooseMemoryKind,
    CollectConsumerScopeInfo,
    CollectProducerScopeInfo,
    DefineVDevice,
    PartialLegalize,
    QuantizedWeightTexels,
    RemoveRedundantAssignments,
)

__all__ = [
    # stage 1
    "DeriveIdentifiers",
    "EdgeDtypes",
    "SplitLargeWeights",
    "SplitWideConcats",
    "FoldSmallConstants",
    "RecordIndexRanges",
    "NarrowInt64Constants",
    "NaNSelfComparisons",
    "BoolArithmetic",
    "StepQuotients",
    "CheckStaticShapes",
    "ConvertToPackedLayout",
    # stages 2-4
    "PartialLegalize",
    "CollectConsumerScopeInfo",
    "CollectProducerScopeInfo",
    "ChooseMemoryKind",
    "ChooseConvAlgorithm",
    "QuantizedWeightTexels",
    "DefineVDevice",
    "RemoveRedundantAssignments",
    # stage 5
    "LegalizeWithScopes",
    "IsolateBroadcastReductions",
    "IsolateComputedSizes",
    "FuseGathers",
    "FoldScopeCopies",
    "SpecializeKernelScopes",
    "SplitWideKernels",
    "ShortenKernelNames",
    "NameKernelsForApi",
    "RetargetVDevices",
    "RewriteBufferReshapes",
    "PlanTextureStorage",
    "PlaceBufferStorage",
    "HoistImageStorage",
    "RoundBufferStorage",
    "RecordVDevices",
]
