"""relax_vk's passes, one per module; each returns a ``tvm.transform.Pass``."""

from .collect_consumer_scope_info import CollectConsumerScopeInfo
from .collect_producer_scope_info import CollectProducerScopeInfo
from .convert_layout import ConvertToPackedLayout
from .define_vdevice import DefineVDevice
from .fold_scope_copies import FoldScopeCopies
from .fold_small_constants import FoldSmallConstants
from .partial_legalize import PartialLegalize
from .raise_prebuilt_binary import RaisePrebuiltBinary
from .remove_redundant_assignments import RemoveRedundantAssignments
from .retarget_vdevices import RetargetVDevices
from .rewrite_buffer_reshapes import RewriteBufferReshapes
from .specialize_kernel_scopes import SpecializeKernelScopes

__all__ = [
    "FoldSmallConstants",
    "ConvertToPackedLayout",
    "PartialLegalize",
    "RaisePrebuiltBinary",
    "CollectConsumerScopeInfo",
    "CollectProducerScopeInfo",
    "DefineVDevice",
    "RemoveRedundantAssignments",
    "RetargetVDevices",
    "RewriteBufferReshapes",
    "FoldScopeCopies",
    "SpecializeKernelScopes",
]
