"""The devices the native library can open (``relax-vk devices``, ``--device``), with their limits.

A device is named by a spec string, the same for the runtime, the CLI and the C ABI: OpenCL
``"pocl"``, ``"gpu"`` or ``"P:D"`` (platform and device index); Vulkan ``"lavapipe"`` (or
``"cpu"``), ``"gpu"`` or an adapter index; ``"default"`` (None here) picks a GPU when one works,
else the CPU device: the library's own rule, the one a session opened without a device follows.
"""

from __future__ import annotations

import ctypes
import json
from dataclasses import dataclass, field
from typing import List, Optional

from ..core.limits import DeviceLimits
from .library import check, library

APIS = ("opencl", "vulkan")


@dataclass(frozen=True)
class Device:
    """One device as the library opens it: ``api``, ``index`` (the spec that names it exactly),
    ``name``, ``type`` and ``limits`` (what plans are built against); ``row`` holds every field of
    :func:`list_devices`' row."""

    api: str
    index: str
    name: str
    type: str
    limits: DeviceLimits
    row: dict = field(repr=False, compare=False)

    @property
    def spec(self) -> str:
        """The spec that opens this device (its index)."""
        return self.index

    @property
    def fp16(self) -> dict:
        """``{"half_images": ..., "half_arithmetic": ...}``: what ``--fp16`` / ``--fp16-arith`` need."""
        return dict(self.row.get("fp16", {}))


def _rows(api: str, spec: Optional[str]) -> List[dict]:
    if api not in APIS:
        raise ValueError(f"unknown API {api!r}: 'opencl' or 'vulkan'")
    lib, out = library(), ctypes.c_char_p()
    check(lib.rvk_devices(api.encode(), spec.encode() if spec is not None else None, ctypes.byref(out)), api)
    return json.loads(out.value.decode())


def list_devices(api: str = "opencl") -> List[dict]:
    """Every device of ``api`` with its image limits, half-precision support and whether relax_vk
    can use it (an OpenCL device must build an image-writing probe kernel): the rows of ``relax-vk
    devices --json``, each with its ``"api"``."""
    return [dict({"api": api}, **r) for r in _rows(api, None)]


def select_device(api: str = "opencl", spec: "str | Device | None" = None) -> Device:
    """The device ``spec`` names (see the module docstring), as a session on ``api`` would open it."""
    if isinstance(spec, Device):
        if spec.api != api:
            raise ValueError(f"device {spec.name} is a {spec.api} device, not {api}")
        return spec
    if spec is not None and not isinstance(spec, str):
        raise TypeError(f"a device is a spec string ('pocl', 'lavapipe', 'gpu', 'P:D', an index) or a Device, not {type(spec).__name__}")
    # (None: the device a session opens without one, which the library names "default")
    (row,) = _rows(api, "default" if spec is None else spec)
    return Device(api, row["index"], row["device"], row["type"], DeviceLimits(**row["limits"]), row)
