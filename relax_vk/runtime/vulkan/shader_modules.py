"""Shader modules with or without wgpu's runtime checks.

wgpu translates every WGSL shader to SPIR-V with *bounds checks*: each buffer index and texture
coordinate is clamped (or the access skipped) before it reaches the driver, and each loop gets a
counter that ends it after 2^64 iterations (``ForceLoopBounding``). relax_vk's kernels do not need
them: every buffer and texel access of a scheduled kernel lies inside its tensor by construction
(TIR's bound guards are in the shader itself, and the runtime binds every tensor at its full
size), and every loop has a bounded trip count. wgpu-native exposes
``wgpuDeviceCreateShaderModuleTrusted(device, descriptor, runtimeChecks)`` for such shaders;
wgpu-py does not wrap it, so :func:`create_shader_module` calls it through wgpu-py's own cffi
bindings and wraps the handle in wgpu-py's ``GPUShaderModule`` (its lifetime and release are then
wgpu-py's as for any module).

``checks``: ``"bounds"`` (wgpu's default: bounds checks and loop bounding), ``"loops"`` (loop
bounding only) or ``"none"``. Anything but ``"bounds"`` needs wgpu-py's wgpu-native backend with the
trusted entry point; without it :class:`UnsupportedError` says so.
"""

from __future__ import annotations

from ...core.errors import UnsupportedError

CHECKS = ("bounds", "loops", "none")


def create_shader_module(device, source: str, checks: str = "bounds", label: str = ""):
    """A WGSL shader module of ``device`` (a wgpu-py ``GPUDevice``) with the given runtime checks."""
    if checks not in CHECKS:
        raise ValueError(f"shader checks must be one of {', '.join(CHECKS)}, not {checks!r}")
    if checks == "bounds":
        return device.create_shader_module(code=source, label=label)
    try:
        from wgpu.backends.wgpu_native import _api
    except ImportError as err:  # pragma: no cover - another wgpu backend
        raise UnsupportedError(f"shader checks {checks!r} need wgpu's wgpu-native backend ({err})") from None
    ffi, lib = _api.ffi, _api.lib
    if not hasattr(lib, "wgpuDeviceCreateShaderModuleTrusted"):
        raise UnsupportedError(f"shader checks {checks!r}: this wgpu-native has no wgpuDeviceCreateShaderModuleTrusted")
    code = _api.new_struct_p("WGPUShaderSourceWGSL *", code=_api.to_c_string_view(source))
    code[0].chain.next = ffi.NULL
    code[0].chain.sType = lib.WGPUSType_ShaderSourceWGSL
    chain = ffi.cast("WGPUChainedStruct *", code)  # (``code`` stays referenced until the call returns)
    descriptor = _api.new_struct_p("WGPUShaderModuleDescriptor *", nextInChain=chain, label=_api.to_c_string_view(label))
    flags = lib.WGPUShaderRuntimeChecks_ForceLoopBounding if checks == "loops" else lib.WGPUShaderRuntimeChecks_None
    handle = _api.libf.wgpuDeviceCreateShaderModuleTrusted(device._internal, descriptor, flags)
    if handle == ffi.NULL:
        raise RuntimeError("shader module creation failed")
    return _api.GPUShaderModule(label, handle, device)
