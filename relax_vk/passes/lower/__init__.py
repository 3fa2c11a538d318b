"""Stage 5 (lowering a scoped module): legalization that keeps every decided VDevice, fusion
guards for broadcast reductions and for kernels of computed size arguments, fused Vulkan kernels cut to the tensors a shader may bind, gathers on buffers fused as injective ops, copy folding, per-call-site kernel specialization, bounded kernel names, the Vulkan retargeting of VDevices and
Vulkan kernel names, the reshape rewrite that only views buffers, the image storages of texture
tensors under TVM's VM (allocated once per VM through a function of their own), byte storages on a
``"global"`` VDevice and in whole pages (reused by TVM's pooled allocator), and the VDevice table an executable carries."""

from .fold_scope_copies import FoldScopeCopies
from .fuse_gathers import FuseGathers
from .hoist_image_storage import HoistImageStorage
from .isolate_broadcast_reductions import IsolateBroadcastReductions
from .isolate_computed_sizes import IsolateComputedSizes
from .legalize_with_scopes import LegalizeWithScopes, ScopeLostError
from .name_kernels_for_api import NameKernelsForApi
from .place_buffer_storage import PlaceBufferStorage
from .plan_texture_storage import PlanTextureStorage
from .record_vdevices import RecordVDevices
from .round_buffer_storage import RoundBufferStorage
from .retarget_vdevices import RetargetVDevices
from .shorten_kernel_names import ShortenKernelNames
from .rewrite_buffer_reshapes import RewriteBufferReshapes
from .specialize_kernel_scopes import SpecializeKernelScopes
from .split_wide_kernels import SplitWideKernels

__all__ = [
    "LegalizeWithScopes",
    "ScopeLostError",
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
