"""The OpenCL runtime (pyopencl, never TVM): device discovery (:mod:`.devices`), the real-compiler
check (:mod:`.compiler`, ``clBuildProgram``) and the session that runs artifacts (:mod:`.session`)."""

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
