"""Stages 2-4 (the RFC's scope assignment): the memory-kind choice (measured cost or the RFC's
rule), the conv algorithm choice (Winograd or direct), int8 conv weights as signed normalized
texels, partial legalization with ``skip_ops``, the consumer
and producer scope analyses, ``DefineVDevice`` (``hint_on_device`` + ``ty_args``), and the
removal of the redundant assignments ``RealizeVDevice`` leaves.

``scope_graph`` is the shared visitor of the three scope passes; ``scope_info`` carries their
analyses between passes as fingerprinted function attributes."""

from .choose_conv_algorithm import ChooseConvAlgorithm
from .choose_memory_kind import ChooseMemoryKind
from .collect_consumer_scope_info import CollectConsumerScopeInfo
from .collect_producer_scope_info import CollectProducerScopeInfo
from .define_vdevice import DefineVDevice
from .partial_legalize import PartialLegalize
from .quantized_weight_texels import QuantizedWeightTexels
from .remove_redundant_assignments import RemoveRedundantAssignments

__all__ = [
    "ChooseMemoryKind",
    "ChooseConvAlgorithm",
    "QuantizedWeightTexels",
    "PartialLegalize",
    "CollectConsumerScopeInfo",
    "CollectProducerScopeInfo",
    "DefineVDevice",
    "RemoveRedundantAssignments",
]
