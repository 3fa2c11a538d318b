"""OpenCL helpers that need only pyopencl (not TVM): device discovery and a real compiler check."""

from .compiler import OpenCLBuildError, OpenCLUnavailable, build_program, find_device, kernel_names

__all__ = ["OpenCLBuildError", "OpenCLUnavailable", "build_program", "find_device", "kernel_names"]
