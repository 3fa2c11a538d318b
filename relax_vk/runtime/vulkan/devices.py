"""Vulkan adapter discovery and selection through ``wgpu`` (``--device lavapipe | gpu | N``).

Only adapters on wgpu's Vulkan backend are listed: relax_vk's Vulkan runtime is Vulkan, not
whatever else wgpu could fall back to (OpenGL, Metal). Needs only ``wgpu`` (never TVM).
"""

from __future__ import annotations

import os
from typing import List, Optional

from ...core.errors import RelaxVKError
from ...core.limits import from_wgpu_adapter

LIMIT_KEYS = (
    "max-texture-dimension-2d",
    "max-texture-array-layers",
    "max-compute-invocations-per-workgroup",
    "max-compute-workgroup-size-x",
    "max-compute-workgroup-size-y",
    "max-compute-workgroup-size-z",
    "max-compute-workgroups-per-dimension",
    "max-compute-workgroup-storage-size",
    "max-storage-buffers-per-shader-stage",
    "max-storage-textures-per-shader-stage",
    "max-sampled-textures-per-shader-stage",
    "max-storage-buffer-binding-size",
    "max-buffer-size",
)


class VulkanUnavailable(RelaxVKError, RuntimeError):
    """No usable Vulkan adapter (or wgpu is not installed)."""


_INSTANCE_CONFIGURED = False


def _wgpu():
    """wgpu, its instance configured once (before any adapter exists) to report timestamp queries
    in nanoseconds on every adapter (wgpu-native otherwise returns raw ticks)."""
    global _INSTANCE_CONFIGURED
    # wgpu-native prints a warning about XDG_RUNTIME_DIR on headless machines; it is harmless.
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    try:
        import wgpu
    except ImportError as err:
        raise VulkanUnavailable(
            "the Vulkan runtime needs the 'wgpu' package: pip install 'relax_vk[vulkan]' "
            "(and a Vulkan driver: Debian 'mesa-vulkan-drivers libvulkan1' gives lavapipe on a CPU)"
        ) from err
    if not _INSTANCE_CONFIGURED:
        _INSTANCE_CONFIGURED = True
        try:
            from wgpu.backends.wgpu_native import extras

            extras.set_instance_extras(flags=["Default", "AutomaticTimestampNormalization"])
        except (ImportError, AttributeError, KeyError, RuntimeError, ValueError):
            pass  # an instance made before (or a wgpu without the flag): timestamps stay in device ticks
    return wgpu


def vulkan_adapters() -> list:
    """wgpu's adapters on the Vulkan backend, in enumeration order."""
    wgpu = _wgpu()
    try:
        adapters = wgpu.gpu.enumerate_adapters_sync()
    except Exception as err:  # wgpu-native without a loader raises on enumeration
        raise VulkanUnavailable(f"wgpu cannot enumerate adapters: {err}") from err
    return [a for a in adapters if str(a.info.get("backend_type", "")).lower() == "vulkan"]


def describe_adapter(adapter) -> str:
    info = adapter.info
    return f"{info.get('device', '?')} ({info.get('adapter_type', '?')}, Vulkan)"


def is_cpu(adapter) -> bool:
    return str(adapter.info.get("adapter_type", "")).lower() == "cpu"


def list_adapters() -> List[dict]:
    """Every Vulkan adapter with its texture and compute limits."""
    rows = []
    for i, a in enumerate(vulkan_adapters()):
        limits = a.limits
        rows.append(
            {
                "index": str(i),
                "device": str(a.info.get("device", "")),
                "description": str(a.info.get("description", "")),
                "type": str(a.info.get("adapter_type", "")),
                "texture2d_max": int(limits["max-texture-dimension-2d"]),
                "texture_max_array_layers": int(limits["max-texture-array-layers"]),
                "timestamp_query": "timestamp-query" in a.features,
                # rgba16float is a core storage format of WebGPU: every adapter stores half texels
                "fp16": {"half_images": True, "half_arithmetic": "shader-f16" in a.features},
                # every Vulkan adapter wgpu exposes has what relax_vk needs (core WebGPU: rgba32float
                # storage textures, 2D arrays); a plan's sizes are checked against its limits at load
                "usable": True,
                "problem": "",
                "limits": from_wgpu_adapter(a).to_json(),
            }
        )
    return rows


def select_adapter(spec: Optional[str] = None):
    """An adapter for ``spec``: ``None`` (a GPU if there is one, else a CPU adapter such as
    lavapipe), ``"lavapipe"``/``"cpu"``, ``"gpu"``, or an index from :func:`list_adapters`."""
    adapters = vulkan_adapters()
    if not adapters:
        raise VulkanUnavailable(
            "no Vulkan adapter found (install a Vulkan driver: Debian 'mesa-vulkan-drivers libvulkan1' gives lavapipe)"
        )
    gpus = [a for a in adapters if not is_cpu(a)]
    cpus = [a for a in adapters if is_cpu(a)]
    if spec is None:
        return (gpus or cpus)[0]
    if spec in ("lavapipe", "cpu", "pocl"):
        if not cpus:
            raise VulkanUnavailable("no CPU Vulkan adapter (lavapipe); `relax-vk devices` lists the adapters")
        return cpus[0]
    if spec == "gpu":
        if not gpus:
            raise VulkanUnavailable("no GPU Vulkan adapter; `relax-vk devices` lists the adapters")
        return gpus[0]
    if spec.isdigit() and int(spec) < len(adapters):
        return adapters[int(spec)]
    raise ValueError(f"unknown Vulkan device {spec!r}: use 'lavapipe', 'gpu' or an index from `relax-vk devices`")
