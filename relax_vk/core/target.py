"""TVM targets for relax_vk's two GPU APIs, carrying the device's limits.

``opencl()`` and ``vulkan()`` build a target from :class:`~relax_vk.core.limits.DeviceLimits`: the
defaults, a preset (``limits="adreno7xx"``), a local device's (``device=`` a pyopencl device for
OpenCL, ``adapter=`` a wgpu adapter for Vulkan), with any field overridden by keyword
(``spatial_limit``/``depth_limit`` for the image size and layers, ``max_buffer_bytes``,
``max_alloc_bytes``, ``max_workgroups``, ``memory_bytes``). ``opencl()`` also sets the keys TVM's
adreno schedules look for.

The limits travel on the target as keys ``NAME=VALUE`` (one per :class:`DeviceLimits` field; TVM's
dispatch ignores unknown keys) and, for OpenCL, as TVM's own ``texture_spatial_limit`` /
``texture_depth_limit`` attributes. :func:`target_limits` reads them back, so a target built by hand
with those attributes works too; :func:`texture_limits` and :func:`workgroup_limit` are its views.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Optional, Union

import tvm

from .limits import DEFAULT, VULKAN_DEFAULT, DeviceLimits, device_slug, of_device, preset
from .limits import device_name as name_of
from .scope import TextureLimits

DEFAULT_LIMITS = DEFAULT.textures
SUPPORTED_KINDS = ("opencl", "vulkan")
_NUMERIC = tuple(f.name for f in fields(DeviceLimits) if f.name != "source")

LimitsSpec = Union[DeviceLimits, str, None]


def _host() -> dict:
    return {"kind": "llvm"}


def _resolve_limits(base: LimitsSpec, spatial_limit, depth_limit, default: DeviceLimits = DEFAULT, **overrides) -> DeviceLimits:
    limits = preset(base) if isinstance(base, str) else (base or default)
    if spatial_limit is not None:
        overrides.update(image_width=int(spatial_limit), image_height=int(spatial_limit))
    if depth_limit is not None:
        overrides["image_layers"] = int(depth_limit)
    return limits.with_overrides(**overrides)


def _keys(limits: DeviceLimits, device_name: Optional[str] = None, api: Optional[str] = None) -> list:
    keys = [f"{name}={getattr(limits, name)}" for name in _NUMERIC]
    if device_name:
        keys.append(f"device={device_slug(device_name)}")
    if api:
        keys.append(f"api={api}")
    return keys


def opencl(
    spatial_limit: Optional[int] = None,
    depth_limit: Optional[int] = None,
    device: str = "adreno",
    *,
    limits: LimitsSpec = None,
    opencl_device=None,
    device_name: Optional[str] = None,
    max_buffer_bytes: Optional[int] = None,
    max_alloc_bytes: Optional[int] = None,
    max_workgroups: Optional[int] = None,
    memory_bytes: Optional[int] = None,
    api: Optional[str] = None,
) -> tvm.target.Target:
    """An OpenCL target (``device`` selects TVM's adreno schedules by default) with the limits of
    ``opencl_device`` (a :class:`relax_vk.runtime.Device`), else ``limits`` (a :class:`DeviceLimits` or preset
    name), else the defaults, overridden by the keyword limits given. ``device_name`` (or the
    ``opencl_device``'s name) selects the tuning database the schedules consult."""
    base = of_device(opencl_device) if opencl_device is not None else limits
    if opencl_device is not None and device_name is None:
        device_name = name_of(opencl_device) or None
    lim = _resolve_limits(base, spatial_limit, depth_limit, max_buffer_bytes=max_buffer_bytes, max_alloc_bytes=max_alloc_bytes,
                          max_workgroups=max_workgroups, memory_bytes=memory_bytes)  # fmt: skip
    return tvm.target.Target(
        {
            "kind": "opencl",
            "device": device,
            "keys": [device, "opencl", "gpu", "texture", *_keys(lim, device_name, api)],
            "texture_spatial_limit": lim.textures.spatial,
            "texture_depth_limit": lim.textures.depth,
        },
        host=_host(),
    )


def adapter_limits(adapter) -> TextureLimits:
    """The texture limits of a Vulkan adapter (``relax_vk.runtime.select_device("vulkan", ...)``): its
    max 2D texture dimension and max texture array layers."""
    return of_device(adapter).textures


def vulkan(
    spatial_limit: Optional[int] = None,
    depth_limit: Optional[int] = None,
    adapter=None,
    *,
    limits: LimitsSpec = None,
    device_name: Optional[str] = None,
    max_buffer_bytes: Optional[int] = None,
    max_alloc_bytes: Optional[int] = None,
    max_workgroups: Optional[int] = None,
    memory_bytes: Optional[int] = None,
) -> tvm.target.Target:
    """A Vulkan target with the limits of ``adapter`` (a Vulkan :class:`relax_vk.runtime.Device`), else ``limits`` (a
    :class:`DeviceLimits` or preset name), else the defaults (:data:`~relax_vk.core.limits.VULKAN_DEFAULT`:
    Vulkan's guaranteed 128 MiB storage binding), overridden by the keyword limits
    given. TVM's vulkan target kind has no texture-limit attributes, so every limit travels as a
    target key (module docstring). ``device_name`` (or the adapter's) selects the tuning database."""
    base = of_device(adapter) if adapter is not None else limits
    if adapter is not None and device_name is None:
        device_name = name_of(adapter) or None
    lim = _resolve_limits(base, spatial_limit, depth_limit, VULKAN_DEFAULT, max_buffer_bytes=max_buffer_bytes, max_alloc_bytes=max_alloc_bytes,
                          max_workgroups=max_workgroups, memory_bytes=memory_bytes)  # fmt: skip
    keys = ["vulkan", "gpu", "texture", f"texture_spatial_limit={lim.textures.spatial}", f"texture_depth_limit={lim.textures.depth}",
            *_keys(lim, device_name)]  # fmt: skip
    return tvm.target.Target({"kind": "vulkan", "keys": keys}, host=_host())


def target_limits(target: tvm.target.Target) -> DeviceLimits:
    """The :class:`DeviceLimits` a target carries (the defaults of its kind for what it does not carry)."""
    found = {}
    for key in target.keys:
        name, _, value = str(key).partition("=")
        if name in _NUMERIC and value:
            found[name] = int(value)
    attrs = target.attrs
    spatial = attrs.get("texture_spatial_limit") if "texture_spatial_limit" in attrs else None
    depth = attrs.get("texture_depth_limit") if "texture_depth_limit" in attrs else None
    for key in target.keys:  # (targets built before the limits were data carry only these)
        name, _, value = str(key).partition("=")
        if name == "texture_spatial_limit" and value:
            spatial = int(value)
        elif name == "texture_depth_limit" and value:
            depth = int(value)
    limits = (VULKAN_DEFAULT if target.kind.name == "vulkan" else DEFAULT).with_overrides(**found)
    if spatial is not None and "image_width" not in found:
        limits = limits.with_overrides(image_width=int(spatial), image_height=int(spatial))
    if depth is not None and "image_layers" not in found:
        limits = limits.with_overrides(image_layers=int(depth))
    return limits


def lowering_target(target: tvm.target.Target) -> tvm.target.Target:
    """The target kernels are lowered and scheduled under: the target itself for OpenCL; for
    Vulkan an OpenCL target with the same limits, because TVM's texture lowering and adreno
    schedules are keyed to OpenCL-kind targets (relax_vk emits the Vulkan shaders from the device
    TIR itself, :mod:`relax_vk.codegen.wgsl`)."""
    if check_kind(target) == "opencl":
        return target
    # (the device is already a slug, which device_slug leaves as it is)
    return opencl(limits=target_limits(target), device_name=target_device(target), api="vulkan")


def _key(target: tvm.target.Target, name: str) -> Optional[str]:
    for key in target.keys:
        key_name, _, value = str(key).partition("=")
        if key_name == name and value:
            return value
    return None


def target_device(target: tvm.target.Target) -> Optional[str]:
    """The device (database slug) a target is for, when it names one."""
    return _key(target, "device")


def target_api(target: tvm.target.Target) -> str:
    """The GPU API kernels for ``target`` run on (a Vulkan build's lowering target says vulkan)."""
    return _key(target, "api") or target.kind.name


def texture_limits(target: tvm.target.Target, override: Optional[TextureLimits] = None) -> TextureLimits:
    """The texture limits a target carries (defaults where it carries none)."""
    return override if override is not None else target_limits(target).textures


#: workgroups per grid dimension every Vulkan device supports (maxComputeWorkGroupCount); OpenCL
#: has no such limit, so kernels for either API are folded to it unless the target says otherwise
DEFAULT_MAX_WORKGROUPS = DEFAULT.max_workgroups


def workgroup_limit(target: tvm.target.Target) -> int:
    """Workgroups per grid dimension kernels for ``target`` may launch."""
    return target_limits(target).max_workgroups


def check_kind(target: tvm.target.Target) -> str:
    """The target's kind name, refusing kinds relax_vk does not scope for."""
    kind = target.kind.name
    if kind not in SUPPORTED_KINDS:
        raise ValueError(f"relax_vk scopes memory for {SUPPORTED_KINDS} targets, got kind {kind!r}")
    return kind


def resolve(target: "tvm.target.Target | str | None") -> tvm.target.Target:
    """A target from a Target, the strings ``"opencl"``/``"vulkan"``, or None (the current target
    if one is entered, else OpenCL)."""
    if target is None:
        current = tvm.target.Target.current(allow_none=True)
        target = current if current is not None else opencl()
    if isinstance(target, str):
        if target == "opencl":
            return opencl()
        if target == "vulkan":
            return vulkan()
        raise ValueError(f"unknown target name {target!r}; use 'opencl' or 'vulkan' or a tvm.target.Target")
    check_kind(target)
    return target
