"""Device limits as data: the record's invariants, presets with sources, targets that carry every
limit, and limits read from the local devices."""

import pytest

import relax_vk
from relax_vk.core.limits import DEFAULT, PRESETS, DeviceLimits, of_device, preset
from relax_vk.core.scope import TextureLimits
from relax_vk.core.target import target_limits, texture_limits, workgroup_limit


def test_invariants_are_checked():
    with pytest.raises(ValueError, match="max_buffer_bytes .* <= max_alloc_bytes"):
        DeviceLimits(max_buffer_bytes=10, max_alloc_bytes=5, memory_bytes=100)
    with pytest.raises(ValueError, match="image_layers must be a positive integer"):
        DeviceLimits(image_layers=0)
    cut = DEFAULT.with_overrides(max_buffer_bytes=1 << 20, max_workgroups=256)
    assert (cut.max_buffer_bytes, cut.max_workgroups, cut.max_alloc_bytes) == (1 << 20, 256, DEFAULT.max_alloc_bytes)
    assert DEFAULT.with_overrides(max_buffer_bytes=8 << 30).memory_bytes >= 8 << 30  # a larger buffer lifts what must hold it
    assert DEFAULT.with_overrides(max_alloc_bytes=1 << 20).max_buffer_bytes == 1 << 20


def test_presets_name_their_sources():
    assert {"adreno6xx", "adreno7xx", "mali_valhall", "apple", "nvidia", "pocl", "lavapipe"} <= set(PRESETS)
    for name, limits in PRESETS.items():
        assert len(limits.source) > 40, name
    assert PRESETS["lavapipe"].max_buffer_bytes == 128 << 20 and PRESETS["pocl"].image_width == 8192
    with pytest.raises(ValueError, match="unknown device preset 'nokia'; known: adreno6xx"):
        preset("nokia")


@pytest.mark.parametrize("make", [relax_vk.target.opencl, relax_vk.target.vulkan])
def test_targets_carry_every_limit(make):
    t = make(256, 64, limits="adreno7xx", max_buffer_bytes=1 << 20, max_workgroups=256)
    got = target_limits(t)
    assert (got.image_width, got.image_layers, got.max_buffer_bytes, got.max_workgroups) == (256, 64, 1 << 20, 256)
    assert got.max_shared_bytes == PRESETS["adreno7xx"].max_shared_bytes
    assert texture_limits(t) == TextureLimits(256, 64) and workgroup_limit(t) == 256
    lowered = relax_vk.target.lowering_target(t)
    assert target_limits(lowered).max_buffer_bytes == 1 << 20  # Vulkan's lowering target keeps them


def test_limits_from_the_local_devices(pocl, lavapipe):
    import pyopencl as cl_api

    from helpers import wgpu_lavapipe_adapter

    cl = of_device(pocl)  # what the native library read, against pyopencl's and wgpu-py's own readings
    real_cl = next(d for p in cl_api.get_platforms() for d in p.get_devices() if d.name.strip() == pocl.name)
    assert cl.image_width == int(real_cl.image2d_max_width) and cl.max_alloc_bytes == int(real_cl.max_mem_alloc_size)
    assert cl.max_workgroup_size == int(real_cl.max_work_group_size) and cl.max_shared_bytes == int(real_cl.local_mem_size)
    vk = of_device(lavapipe)
    real_vk = wgpu_lavapipe_adapter().limits
    assert vk.max_buffer_bytes == int(real_vk["max-storage-buffer-binding-size"]) and vk.image_layers == int(real_vk["max-texture-array-layers"])
    assert target_limits(relax_vk.target.opencl(opencl_device=pocl)).image_width == cl.image_width


def test_a_vulkan_target_without_a_device_splits_what_any_vulkan_device_cannot_bind(lavapipe):
    """A Vulkan build without a device's limits loads on every Vulkan device and WebGPU: its binding
    is the 2^27 bytes they all guarantee, no larger than lavapipe's real one, so a weight over
    lavapipe's binding (a VGG fc6 of 411 MB) is split at build time, not refused at load."""
    real = of_device(lavapipe).max_buffer_bytes
    for target in (relax_vk.target.vulkan(), relax_vk.target.resolve("vulkan"), __import__("tvm").target.Target("vulkan")):
        binding = target_limits(target).max_buffer_bytes
        assert binding == 128 << 20 and binding <= real
    assert target_limits(relax_vk.target.lowering_target(relax_vk.target.vulkan())).max_buffer_bytes == 128 << 20
    # a device's, a preset's or the user's limits still win; OpenCL keeps its allocation-sized default
    assert target_limits(relax_vk.target.vulkan(adapter=lavapipe)).max_buffer_bytes == real
    assert target_limits(relax_vk.target.vulkan(limits="nvidia")).max_buffer_bytes == PRESETS["nvidia"].max_buffer_bytes
    assert target_limits(relax_vk.target.vulkan(max_buffer_bytes=1 << 30)).max_buffer_bytes == 1 << 30
    assert target_limits(relax_vk.target.opencl()).max_buffer_bytes == DEFAULT.max_buffer_bytes
