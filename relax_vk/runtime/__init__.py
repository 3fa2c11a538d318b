"""The relax_vk runtime: run ``.rvk`` artifacts on OpenCL devices (pyopencl) or Vulkan adapters
(wgpu), with real images for texture-scoped tensors.

Needs only numpy and pyopencl or wgpu (never TVM), so a model compiled on one machine runs on
another::

    from relax_vk.runtime import load
    session = load("model.rvk", device="gpu")       # OpenCL: "pocl", "gpu", "P:D"
                                                    # Vulkan: "lavapipe", "gpu", "N"
    outputs = session.run([x])                      # numpy in, numpy out
    print(session.last_profile)                     # per-step milliseconds
    load("model.rvk", device="pocl", native=True)   # the same through the native C runtime
    load("model.rvk", device="lavapipe", native=True)  # (Vulkan artifacts: through wgpu-native)

The artifact's target (``program["target"]``) picks the runtime.
"""

from __future__ import annotations

from typing import Optional

from ..serialization.artifact import Artifact
from .opencl.devices import list_devices, select_device
from .session import DeviceLimitError, Session

__all__ = [
    "DeviceLimitError",
    "OpenCLSession",
    "Session",
    "ShaderError",
    "VulkanSession",
    "list_adapters",
    "list_devices",
    "load",
    "select_adapter",
    "select_device",
]


def load(artifact, device=None, profile: bool = True, native: bool = False, shader_checks: Optional[str] = None) -> Session:
    """A session for an artifact (a path or an :class:`~relax_vk.serialization.artifact.Artifact`) on ``device``
    (a pyopencl device or wgpu adapter, or a spec string for :func:`select_device` /
    :func:`select_adapter`), on the runtime its target names. ``native=True``: the native runtime
    (the C library of ``native/``, :mod:`relax_vk.runtime.native`: OpenCL through the ICD loader,
    Vulkan through wgpu-native; ``device`` a spec string as above, or a pyopencl device), which reads
    and validates the artifact itself. ``shader_checks``
    (Vulkan only): wgpu's runtime checks in the shaders, ``"bounds"`` (the default), ``"loops"``
    or ``"none"`` (:mod:`relax_vk.runtime.vulkan.shader_modules`)."""
    if native:
        from .native import NativeSession

        return NativeSession(artifact, device, profile, shader_checks=shader_checks)
    if isinstance(artifact, str):
        artifact = Artifact.read(artifact)  # (validated as it is read)
    else:
        artifact.validate()
    if artifact.program.get("target") == "vulkan":
        from .vulkan.devices import select_adapter as select
        from .vulkan.session import VulkanSession as session_type
    else:
        from .opencl.session import OpenCLSession as session_type

        select = select_device
    if device is None or isinstance(device, str):
        device = select(device)
    if shader_checks is not None:
        if artifact.program.get("target") != "vulkan":
            raise ValueError("shader_checks applies to Vulkan artifacts only")
        return session_type(artifact, device, profile, shader_checks=shader_checks)
    return session_type(artifact, device, profile)


def __getattr__(name):  # the sessions import their GPU API lazily: a Vulkan user needs no pyopencl
    if name == "OpenCLSession":
        from .opencl.session import OpenCLSession

        return OpenCLSession
    if name in ("VulkanSession", "ShaderError"):
        from .vulkan import session

        return getattr(session, name)
    if name in ("list_adapters", "select_adapter"):
        from .vulkan import devices

        return getattr(devices, name)
    raise AttributeError(name)
