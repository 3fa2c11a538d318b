"""The runtime's errors: one class per failure the native library reports (its ``rvk_status``)."""

from __future__ import annotations

from ..core.errors import LimitError, RelaxVKError


class LibraryUnavailable(RelaxVKError, RuntimeError):
    """The native library is not built or installed (or not the ABI these bindings speak)."""


class DeviceUnavailable(RelaxVKError, RuntimeError):
    """No such device, no working OpenCL device or Vulkan adapter, or no OpenCL / wgpu-native library."""


class OpenCLUnavailable(DeviceUnavailable):
    """No usable OpenCL device (or no OpenCL library)."""


class VulkanUnavailable(DeviceUnavailable):
    """No usable Vulkan adapter (or no wgpu-native library)."""


class BuildError(RelaxVKError, RuntimeError):
    """The device's compiler rejected a kernel: the message holds its log (or wgpu's error) and the source."""


class OpenCLBuildError(BuildError):
    """clBuildProgram failed (the message holds the build log)."""


class ShaderError(BuildError):
    """wgpu rejected a WGSL shader (the message holds wgpu's error and the numbered source)."""


class DeviceLimitError(LimitError):
    """The device cannot hold or run the program (names the tensor or kernel and the limit)."""


class DeviceRuntimeError(RelaxVKError, RuntimeError):
    """The device API failed while running (the message names the OpenCL error or wgpu's message)."""

