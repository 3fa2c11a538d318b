"""OpenCL helpers that need only pyopencl (not TVM): device discovery and a real compiler check."""

from .compiler import (
    OpenCLBuildError,
    OpenCLUnavailable,
    all_devices,
    build_program,
    describe,
    device_works,
    find_device,
    kernel_names,
)

__all__ = [
    "OpenCLBuildError",
    "OpenCLUnavailable",
    "all_devices",
    "build_program",
    "describe",
    "device_works",
    "find_device",
    "kernel_names",
]
