"""Compile OpenCL C with a real OpenCL compiler (``clBuildProgram`` through pyopencl).

``find_device`` picks a device whose compiler works: it builds a probe kernel on each candidate,
because an installed platform can be unusable (the pocl 3.0 bundled with pip's pyopencl cannot
target CPUs its LLVM does not know and fails every build with "unknown target CPU 'generic'";
Debian's ``pocl-opencl-icd`` works). Devices without image support are skipped when images are
required, since relax_vk's texture kernels read and write ``image2d_array_t``.
"""

from __future__ import annotations

import re
from typing import List

from ...core.errors import RelaxVKError

_PROBE = "__kernel void relax_vk_probe(__write_only image2d_array_t img) { write_imagef(img, (int4)(0, 0, 0, 0), (float4)(1.0f)); }"
_KERNEL_RE = re.compile(r"__kernel\s+void\s+(?:__attribute__\(\([^)]*\)\)\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*\(")


class OpenCLUnavailable(RelaxVKError, RuntimeError):
    """No usable OpenCL device (pyopencl missing, no platform, or no working compiler)."""


class OpenCLBuildError(RelaxVKError, RuntimeError):
    """``clBuildProgram`` rejected a program; the message holds the build log."""

    def __init__(self, device: str, log: str, source: str):
        super().__init__(f"OpenCL build failed on {device}:\n{log}")
        self.device = device
        self.log = log
        self.source = source


def kernel_names(source: str) -> List[str]:
    """Names of the ``__kernel`` functions in ``source`` (each once, in order of appearance;
    TVM's OpenCL codegen declares every kernel before defining it)."""
    return list(dict.fromkeys(_KERNEL_RE.findall(source)))


def _pyopencl():
    try:
        import pyopencl
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise OpenCLUnavailable("pyopencl is not installed: pip install 'relax_vk[opencl]'") from err
    return pyopencl


_CACHE: dict = {}


def describe(device) -> str:
    return f"{device.name} ({device.platform.version.strip()})"


def all_devices() -> list:
    """Every OpenCL device pyopencl sees, as ``(platform index, device index, device)``."""
    cl = _pyopencl()
    try:
        platforms = cl.get_platforms()
    except Exception as err:  # no ICD loader / no platform
        raise OpenCLUnavailable(f"no OpenCL platform: {err}") from err
    return [(p, d, dev) for p, platform in enumerate(platforms) for d, dev in enumerate(platform.get_devices())]


def device_works(device, need_images: bool = True) -> str:
    """Empty when ``device`` builds an (image-writing) probe kernel, else the reason it cannot."""
    cl = _pyopencl()
    if need_images and not device.image_support:
        return "no image support"
    try:
        ctx = cl.Context([device])
        cl.Program(ctx, _PROBE if need_images else "__kernel void relax_vk_probe() {}").build()
    except Exception as err:
        lines = str(err).strip().splitlines()
        return "probe build failed: " + next((l for l in lines if "error" in l), lines[-1] if lines else str(err))
    return ""


def find_device(prefer: str = "pocl", need_images: bool = True, gpu_only: bool = False):
    """The first OpenCL device (platforms whose name contains ``prefer`` first) that builds an
    image-writing probe kernel. Raises :class:`OpenCLUnavailable` with every reason otherwise."""
    key = (prefer, need_images, gpu_only)
    if key in _CACHE:
        return _CACHE[key]
    cl = _pyopencl()
    reasons = []
    candidates = sorted(all_devices(), key=lambda t: (prefer.lower() not in (t[2].platform.name + t[2].platform.version).lower(), t[0], t[1]))
    for _, _, device in candidates:
        if gpu_only and not device.type & cl.device_type.GPU:
            continue
        problem = device_works(device, need_images)
        if problem:
            reasons.append(f"{describe(device)}: {problem}")
            continue
        _CACHE[key] = device
        return device
    raise OpenCLUnavailable(
        "no OpenCL device can build kernels"
        + ("".join(f"\n  - {r}" for r in reasons) if reasons else " (no devices found)")
        + ("\n(only GPU devices were considered)" if gpu_only else "\nOn Debian/Ubuntu: apt-get install pocl-opencl-icd")
    )


def build_program(source: str, device=None) -> List[str]:
    """Build ``source`` with ``clBuildProgram`` and return the kernel names the program defines.
    Raises :class:`OpenCLBuildError` with the build log on failure."""
    cl = _pyopencl()
    device = device if device is not None else find_device()
    ctx = cl.Context([device])
    program = cl.Program(ctx, source)
    try:
        program.build()
    except cl.RuntimeError as err:
        try:
            log = program.get_build_info(device, cl.program_build_info.LOG)
        except Exception:
            log = str(err)
        raise OpenCLBuildError(device.name, log or str(err), source) from err
    return sorted(k.function_name for k in program.all_kernels())
