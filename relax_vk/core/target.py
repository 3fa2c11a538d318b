"""TVM targets for relax_vk's two GPU APIs, carrying their texture limits.

``opencl()`` defaults to Adreno-like limits (spatial 16384, depth 2048) and the target keys TVM's
adreno schedules look for; ``vulkan()`` uses the same limits by default, or a wgpu adapter's
(``vulkan(adapter=...)``). Both accept overrides.
The scope passes read the limits back with :func:`texture_limits`, so a target built by hand
with ``texture_spatial_limit`` / ``texture_depth_limit`` attributes works too.
"""

from __future__ import annotations

from typing import Optional

import tvm

from .scope import TextureLimits

DEFAULT_LIMITS = TextureLimits(spatial=16384, depth=2048)
SUPPORTED_KINDS = ("opencl", "vulkan")


def _host() -> dict:
    return {"kind": "llvm"}


def opencl(
    spatial_limit: int = DEFAULT_LIMITS.spatial,
    depth_limit: int = DEFAULT_LIMITS.depth,
    device: str = "adreno",
) -> tvm.target.Target:
    """An OpenCL target with texture limits (``device`` selects TVM's adreno schedules by default)."""
    limits = TextureLimits(spatial_limit, depth_limit)
    return tvm.target.Target(
        {
            "kind": "opencl",
            "device": device,
            "keys": [device, "opencl", "gpu", "texture"],
            "texture_spatial_limit": limits.spatial,
            "texture_depth_limit": limits.depth,
        },
        host=_host(),
    )


def adapter_limits(adapter) -> TextureLimits:
    """The texture limits of a wgpu adapter (``relax_vk.runtime.select_adapter``): its max 2D
    texture dimension and max texture array layers."""
    limits = adapter.limits
    return TextureLimits(int(limits["max-texture-dimension-2d"]), int(limits["max-texture-array-layers"]))


def vulkan(
    spatial_limit: Optional[int] = None,
    depth_limit: Optional[int] = None,
    adapter=None,
) -> tvm.target.Target:
    """A Vulkan target with texture limits: the ones given, else the ``adapter``'s (a wgpu
    adapter), else the defaults.

    TVM's vulkan target kind has no texture-limit attributes (only OpenCL's has), so the limits
    travel as two extra target keys, ``texture_spatial_limit=N`` and ``texture_depth_limit=N``,
    which :func:`texture_limits` reads back. Extra keys do not affect TVM's dispatch."""
    base = adapter_limits(adapter) if adapter is not None else DEFAULT_LIMITS
    limits = TextureLimits(
        base.spatial if spatial_limit is None else spatial_limit,
        base.depth if depth_limit is None else depth_limit,
    )
    return tvm.target.Target(
        {
            "kind": "vulkan",
            "keys": ["vulkan", "gpu", "texture", f"texture_spatial_limit={limits.spatial}", f"texture_depth_limit={limits.depth}"],
        },
        host=_host(),
    )


def lowering_target(target: tvm.target.Target) -> tvm.target.Target:
    """The target kernels are lowered and scheduled under: the target itself for OpenCL; for
    Vulkan an OpenCL target with the same texture limits, because TVM's texture lowering and
    adreno schedules are keyed to OpenCL-kind targets (relax_vk emits the Vulkan shaders from the
    device TIR itself, :mod:`relax_vk.codegen.wgsl`)."""
    if check_kind(target) == "opencl":
        return target
    limits = texture_limits(target)
    return opencl(limits.spatial, limits.depth)


def texture_limits(target: tvm.target.Target, override: Optional[TextureLimits] = None) -> TextureLimits:
    """The texture limits a target carries (defaults where it carries none)."""
    if override is not None:
        return override
    attrs = target.attrs
    spatial = attrs.get("texture_spatial_limit") if "texture_spatial_limit" in attrs else None
    depth = attrs.get("texture_depth_limit") if "texture_depth_limit" in attrs else None
    for key in target.keys:
        name, _, value = str(key).partition("=")
        if name == "texture_spatial_limit" and value:
            spatial = int(value)
        elif name == "texture_depth_limit" and value:
            depth = int(value)
    return TextureLimits(
        int(spatial) if spatial is not None else DEFAULT_LIMITS.spatial,
        int(depth) if depth is not None else DEFAULT_LIMITS.depth,
    )


#: workgroups per grid dimension every Vulkan device supports (maxComputeWorkGroupCount); OpenCL
#: has no such limit, so kernels for either API are folded to it unless the target says otherwise
DEFAULT_MAX_WORKGROUPS = 65535


def _attr_or_key(target: tvm.target.Target, name: str) -> Optional[int]:
    """A limit carried as a target attribute or as a ``name=N`` target key (Vulkan targets)."""
    if name in target.attrs:
        return int(target.attrs[name])
    for key in target.keys:
        key_name, _, value = str(key).partition("=")
        if key_name == name and value:
            return int(value)
    return None


def workgroup_limit(target: tvm.target.Target) -> int:
    """Workgroups per grid dimension kernels for ``target`` may launch."""
    found = _attr_or_key(target, "max_workgroups")
    return found if found is not None else DEFAULT_MAX_WORKGROUPS


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
