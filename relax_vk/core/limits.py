"""Device limits as data: every limit a plan or a kernel depends on, in one record.

:class:`DeviceLimits` is carried by the target (:mod:`relax_vk.core.target`); the scope stage reads
the image limits, the layout stage the buffer limits (weights too large for one binding are split),
the codegen the workgroup limit (grids are folded), and the build the memory limit (a model that
cannot fit is refused, naming the tensor). Limits come from, in order: the user's explicit values,
a local device (:func:`of_device`: what the native library read), a :data:`PRESETS` entry, or
the defaults (:data:`DEFAULT`; :data:`VULKAN_DEFAULT` for Vulkan targets). Every preset says where its numbers come from.

Invariants (checked at construction): every limit is a positive integer; ``max_buffer_bytes <=
max_alloc_bytes <= memory_bytes``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from typing import Dict

from .scope import TextureLimits

GiB, MiB = 1 << 30, 1 << 20


@dataclass(frozen=True)
class DeviceLimits:
    """The limits of one GPU (and API) that relax_vk plans and compiles against.

    image_width / image_height / image_layers: largest 2-D image array (texels, layers);
    max_buffer_bytes: largest buffer one kernel binding can address (Vulkan
        ``maxStorageBufferRange``; OpenCL has no separate binding limit: its largest allocation);
    max_alloc_bytes: largest single allocation (``CL_DEVICE_MAX_MEM_ALLOC_SIZE``,
        ``maxMemoryAllocationSize``);
    max_workgroups: workgroups per grid dimension (``maxComputeWorkGroupCount``);
    max_workgroup_size: invocations per workgroup; max_shared_bytes: workgroup (local) memory;
    memory_bytes: device memory a model's tensors may take in total;
    source: where the numbers come from.
    """

    image_width: int = 16384
    image_height: int = 16384
    image_layers: int = 2048
    max_buffer_bytes: int = 2 * GiB - 1
    max_alloc_bytes: int = 2 * GiB - 1
    max_workgroups: int = 65535
    max_workgroup_size: int = 256
    max_shared_bytes: int = 16384
    memory_bytes: int = 4 * GiB
    source: str = "relax_vk defaults (Adreno-class images, Vulkan's guaranteed workgroup count)"

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name == "source":
                continue
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"device limit {f.name} must be a positive integer, got {value!r}")
        if not self.max_buffer_bytes <= self.max_alloc_bytes <= self.memory_bytes:
            raise ValueError(
                f"device limits must satisfy max_buffer_bytes ({self.max_buffer_bytes}) <= max_alloc_bytes "
                f"({self.max_alloc_bytes}) <= memory_bytes ({self.memory_bytes})"
            )

    @property
    def textures(self) -> TextureLimits:
        """The image limits as the scope model sees them (one spatial bound: the smaller side)."""
        return TextureLimits(min(self.image_width, self.image_height), self.image_layers)

    def with_overrides(self, **values) -> "DeviceLimits":
        """These limits with the given fields replaced (None values are ignored). Limits the
        caller did not give follow the ones given, so the invariant holds: a smaller allocation
        limit lowers the buffer limit, a larger buffer limit raises the allocation and memory ones."""
        values = {k: v for k, v in values.items() if v is not None}
        if not values:
            return self
        merged = {**asdict(self), **values}
        if "max_alloc_bytes" in values and "max_buffer_bytes" not in values:
            merged["max_buffer_bytes"] = min(merged["max_buffer_bytes"], merged["max_alloc_bytes"])
        if "max_alloc_bytes" not in values:
            merged["max_alloc_bytes"] = max(merged["max_alloc_bytes"], merged["max_buffer_bytes"])
        if "memory_bytes" not in values:
            merged["memory_bytes"] = max(merged["memory_bytes"], merged["max_alloc_bytes"])
        return DeviceLimits(**merged)

    def to_json(self) -> dict:
        return asdict(self)


DEFAULT = DeviceLimits()

#: a Vulkan target's defaults: :data:`DEFAULT` with the storage binding every Vulkan device
#: guarantees (``maxStorageBufferRange`` >= 2^27) and WebGPU's default ``maxStorageBufferBindingSize``
#: (2^27), so a model built without a device's limits loads on any (lavapipe's binding is 2^27 too):
#: larger weights are split. OpenCL has no binding limit; its allocation limit stays the default.
VULKAN_DEFAULT = DEFAULT.with_overrides(
    max_buffer_bytes=128 * MiB,
    source="relax_vk defaults for Vulkan (Adreno-class images, Vulkan's guaranteed workgroup count and 2^27-byte "
    "storage binding)",
)

#: tensors one Vulkan kernel binds at most, in and out (passes.lower.split_wide_kernels,
#: passes.layout.split_wide_concats): under lavapipe's 32 storage buffers a shader stage with room to
#: spare, and above what any conv, matmul or norm kernel with its fused elementwise tail binds (at
#: most a dozen)
VULKAN_KERNEL_TENSORS = 24

#: Limits of the GPUs relax_vk serves. Each entry names its sources; where the vendor driver and
#: Mesa differ, the smaller (portable) value is used; what no source gave is marked "assumed".
PRESETS: Dict[str, DeviceLimits] = {
    "adreno6xx": DeviceLimits(
        16384, 16384, 2048, max_buffer_bytes=128 * MiB, max_alloc_bytes=1 * GiB, max_workgroups=65535,
        max_workgroup_size=1024, max_shared_bytes=32768, memory_bytes=3 * GiB,
        source="Adreno 630-660: images, layers, shared memory from Mesa turnip (tu_device.cc, freedreno_devices.py) and "
        "Qualcomm OpenCL clinfo dumps; storage range 2^27 = turnip's MAX_STORAGE_BUFFER_RANGE matching the Qualcomm driver; "
        "1 GiB CL_DEVICE_MAX_MEM_ALLOC_SIZE from a Qualcomm clinfo; work-group size 1024 = turnip's per-dimension size; "
        "memory 3 GiB assumed",
    ),
    "adreno7xx": DeviceLimits(
        16384, 16384, 2048, max_buffer_bytes=128 * MiB, max_alloc_bytes=1 * GiB, max_workgroups=65535,
        max_workgroup_size=1024, max_shared_bytes=32768, memory_bytes=4 * GiB,
        source="Adreno 725-750: Mesa turnip gives 7xx the 6xx limits (16384 images, 2048 layers, 2^27 storage range, "
        "65535 groups, 32 KiB shared); Qualcomm clinfo shows 2048 layers; allocation 1 GiB and memory 4 GiB assumed",
    ),
    "mali_valhall": DeviceLimits(
        16383, 16383, 2048, max_buffer_bytes=1 * GiB, max_alloc_bytes=1 * GiB, max_workgroups=65535,
        max_workgroup_size=1024, max_shared_bytes=32768, memory_bytes=4 * GiB,
        source="Mali G77-G710: 16383 images and 1 GiB maxBufferSize from Mesa panvk (arch <= 10; Arm's driver reports "
        "65536); 2048 layers and 1024 work-items from Arm OpenCL (G610; Vulkan reports 4096 layers); 65535 groups and "
        "32 KiB shared from panvk; memory 4 GiB assumed",
    ),
    "apple": DeviceLimits(
        16384, 16384, 2048, max_buffer_bytes=1 * GiB, max_alloc_bytes=1 * GiB, max_workgroups=65535,
        max_workgroup_size=1024, max_shared_bytes=32768, memory_bytes=4 * GiB,
        source="Apple A14/M1 class through MoltenVK (MVKDevice.mm): 16384 images, 2048 layers, 1024 threads, 32 KiB "
        "threadgroup memory; MoltenVK reports 2^30 groups per dimension (65535 kept, Vulkan's portable minimum); "
        "maxBufferLength not found: 1 GiB assumed; memory 4 GiB assumed",
    ),
    "nvidia": DeviceLimits(
        32768, 32768, 2048, max_buffer_bytes=4 * GiB - 1, max_alloc_bytes=4 * GiB - 1, max_workgroups=65535,
        max_workgroup_size=1024, max_shared_bytes=49152, memory_bytes=64 * GiB,
        source="NVIDIA Ampere/Hopper: 32768 images, 2048 layers, 49152 shared bytes from OpenCL clinfo and CUDA "
        "deviceQuery; maxStorageBufferRange 0xffffffff from vulkaninfo; 65535 groups in y and z (x allows 2^31-1); "
        "1024 invocations; memory 64 GiB assumed (an 80 GB H100 has more)",
    ),
    "pocl": DeviceLimits(
        8192, 8192, 2048, max_buffer_bytes=2 * GiB, max_alloc_bytes=2 * GiB, max_workgroups=65535,
        max_workgroup_size=4096, max_shared_bytes=1 * MiB, memory_bytes=4 * GiB,
        source="Debian pocl 3 on a CPU, read with relax-vk devices: 8192 images (pocl's default), 2048 layers, "
        "2 GiB CL_DEVICE_MAX_MEM_ALLOC_SIZE, 4096 work-items, 1 MiB local memory; memory 4 GiB assumed",
    ),
    "lavapipe": DeviceLimits(
        16384, 16384, 2048, max_buffer_bytes=128 * MiB, max_alloc_bytes=2 * GiB - 1, max_workgroups=65535,
        max_workgroup_size=1024, max_shared_bytes=32768, memory_bytes=4 * GiB,
        source="Mesa lavapipe through wgpu, read with relax-vk devices: 16384 images, 2048 layers, 128 MiB "
        "storage binding (llvmpipe's LP_MAX_TGSI_SHADER_BUFFER_SIZE = 2^27), 65535 groups, 1024 invocations, "
        "32 KiB shared; memory 4 GiB assumed",
    ),
}


def preset(name: str) -> DeviceLimits:
    """The :data:`PRESETS` entry ``name`` (an error lists the known ones)."""
    try:
        return PRESETS[name]
    except KeyError:
        from .errors import UnsupportedError

        raise UnsupportedError(f"unknown device preset {name!r}; known: {', '.join(sorted(PRESETS))}") from None


def device_slug(name: str) -> str:
    """A device name as tuning databases key it (``NVIDIA H100 80GB HBM3`` ->
    ``nvidia-h100-80gb-hbm3``)."""
    return re.sub(r"[^a-z0-9]+", "-", str(name).lower()).strip("-") or "unknown"


def device_name(device) -> str:
    """The name of a local device (a :class:`relax_vk.runtime.Device`: what tuning databases are keyed by)."""
    return str(device.name).strip()


def of_device(device) -> DeviceLimits:
    """The limits of a local device (a :class:`relax_vk.runtime.Device`, whose limits the native
    library read from the OpenCL device or the Vulkan adapter)."""
    limits = getattr(device, "limits", None)
    if not isinstance(limits, DeviceLimits):
        raise TypeError(f"not a device with limits (relax_vk.runtime.select_device): {type(device).__name__}")
    return limits
