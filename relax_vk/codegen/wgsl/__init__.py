"""WGSL shaders for Vulkan from TVM device kernels (compile time; needs TVM)."""

from .emit import Shader, WGSLEmitError, emit_kernel, emit_module, wgsl_type

__all__ = ["Shader", "WGSLEmitError", "emit_kernel", "emit_module", "wgsl_type"]
