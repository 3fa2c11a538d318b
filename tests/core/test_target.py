import pytest
import tvm

import relax_vk
from relax_vk.core.scope import TextureLimits
from relax_vk.core.target import resolve, texture_limits


def test_opencl_defaults_are_adreno_like():
    t = relax_vk.target.opencl()
    assert t.kind.name == "opencl"
    assert "texture" in t.keys and "adreno" in t.keys
    assert texture_limits(t) == TextureLimits(16384, 2048)


def test_overrides_for_both_kinds():
    assert texture_limits(relax_vk.target.opencl(spatial_limit=4096, depth_limit=256)) == TextureLimits(4096, 256)
    v = relax_vk.target.vulkan(spatial_limit=8192, depth_limit=512)
    assert v.kind.name == "vulkan"
    assert texture_limits(v) == TextureLimits(8192, 512)
    assert texture_limits(relax_vk.target.vulkan()) == TextureLimits(16384, 2048)


def test_explicit_override_wins():
    assert texture_limits(relax_vk.target.opencl(), TextureLimits(10, 10)) == TextureLimits(10, 10)


def test_resolve():
    assert resolve("vulkan").kind.name == "vulkan"
    assert resolve(None).kind.name == "opencl"
    with relax_vk.target.vulkan():
        assert resolve(None).kind.name == "vulkan"
    with pytest.raises(ValueError, match="cuda"):
        resolve(tvm.target.Target({"kind": "cuda"}))
    with pytest.raises(ValueError, match="metal"):
        resolve("metal")
