"""The relax_vk runtime: run ``.rvk`` artifacts on OpenCL devices and Vulkan adapters.

It is the native library (``native/``, a plain C ABI that apps link as it is) bound through ctypes:
one runtime for Python, ``rvk-run`` and apps. Needs numpy and the library, never TVM or PyTorch, so
a model compiled on one machine runs on another::

    from relax_vk.runtime import load
    session = load("model.rvk", device="gpu")       # OpenCL: "pocl", "gpu", "P:D"
                                                    # Vulkan: "lavapipe", "gpu", "N"
    outputs = session.run([x])                      # numpy in, numpy out
    session.time([x])                               # wall-clock ms
    load("model.rvk", device="gpu", profile=True).run([x])  # then .last_profile: per-step ms

The artifact's target picks the API.
"""

from __future__ import annotations

from typing import Optional

from ..serialization.artifact import Artifact
from .devices import Device, list_devices, select_device
from .errors import (
    BuildError,
    DeviceLimitError,
    DeviceRuntimeError,
    DeviceUnavailable,
    LibraryUnavailable,
    OpenCLBuildError,
    OpenCLUnavailable,
    ShaderError,
    VulkanUnavailable,
)
from .session import Session, validate

__all__ = [
    "BuildError",
    "Device",
    "DeviceLimitError",
    "DeviceRuntimeError",
    "DeviceUnavailable",
    "LibraryUnavailable",
    "OpenCLBuildError",
    "OpenCLUnavailable",
    "Session",
    "ShaderError",
    "VulkanUnavailable",
    "list_devices",
    "load",
    "select_device",
    "validate",
]


def load(artifact: "str | bytes | Artifact", device: "str | Device | None" = None, profile: bool = False,
         shader_checks: Optional[str] = None) -> Session:  # fmt: skip
    """A :class:`Session` for ``artifact`` (a path, the file's bytes or an
    :class:`~relax_vk.serialization.artifact.Artifact`) on ``device`` (a spec such as ``"gpu"``,
    ``"pocl"``, ``"lavapipe"``, or a :class:`Device`; None: a GPU if one works, else the CPU
    device). ``profile=True`` records per-step device times on every run (slower runs; off by
    default). ``shader_checks`` (Vulkan only): wgpu's runtime checks in the shaders, ``"bounds"``
    (the default), ``"loops"`` or ``"none"``."""
    return Session(artifact, device, profile=profile, shader_checks=shader_checks)
