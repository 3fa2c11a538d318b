"""OpenCL device selection for the runtime (``--device pocl | gpu | P:D``)."""

from __future__ import annotations

from typing import List, Optional

from ...core.limits import from_opencl_device
from .compiler import OpenCLUnavailable, all_devices, describe, device_works, find_device


def list_devices() -> List[dict]:
    """Every device pyopencl sees with its image limits and whether relax_vk can use it."""
    import pyopencl as cl

    rows = []
    for p, d, dev in all_devices():
        problem = device_works(dev)
        rows.append(
            {
                "index": f"{p}:{d}",
                "platform": dev.platform.name.strip(),
                "device": dev.name.strip(),
                "type": cl.device_type.to_string(dev.type),
                "image_support": bool(dev.image_support),
                "image2d_max": [int(dev.image2d_max_width), int(dev.image2d_max_height)] if dev.image_support else None,
                "image_max_array_size": int(dev.image_max_array_size) if dev.image_support else None,
                "usable": not problem,
                "problem": problem,
                "limits": from_opencl_device(dev).to_json(),
                "fp16": fp16_caps(dev),
            }
        )
    return rows


def fp16_caps(dev) -> dict:
    """What a device offers for half precision: RGBA ``CL_HALF_FLOAT`` image arrays (what
    ``--fp16`` stores textures in; without them textures stay float32) and ``cl_khr_fp16`` (half
    arithmetic in kernels)."""
    import pyopencl as cl

    from ..opencl.session import half_images

    images = False
    if dev.image_support:
        try:
            images = half_images(cl.Context([dev]))
        except cl.Error:
            images = False
    return {"half_images": images, "half_arithmetic": "cl_khr_fp16" in dev.extensions.split()}


def select_device(spec: Optional[str] = None):
    """A device for ``spec``: ``None`` (a GPU if one works, else pocl), ``"pocl"``, ``"gpu"``,
    or ``"P:D"`` (platform and device index from :func:`list_devices`)."""

    if spec is None:
        try:
            return find_device(gpu_only=True)
        except OpenCLUnavailable:
            return find_device(prefer="pocl")
    if spec == "pocl":
        return find_device(prefer="pocl")
    if spec == "gpu":
        return find_device(gpu_only=True)
    platform, _, device = spec.partition(":")
    if not (platform.isdigit() and device.isdigit()):
        raise ValueError(f"unknown device {spec!r}: use 'pocl', 'gpu' or PLATFORM:DEVICE (see `relax-vk devices`)")
    for p, d, dev in all_devices():
        if p == int(platform) and d == int(device):
            problem = device_works(dev)
            if problem:
                raise OpenCLUnavailable(f"device {spec} ({describe(dev)}) cannot run relax_vk kernels: {problem}")
            return dev
    raise OpenCLUnavailable(f"no OpenCL device {spec}; `relax-vk devices` lists them")
