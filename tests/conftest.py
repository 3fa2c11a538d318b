import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def pocl():
    """The pocl OpenCL device (a CPU with a real OpenCL compiler and images)."""
    from relax_vk.runtime.opencl import find_device

    return find_device(prefer="pocl")


@pytest.fixture(scope="session")
def lavapipe():
    """Mesa's lavapipe Vulkan adapter (a CPU Vulkan driver) through wgpu."""
    from relax_vk.runtime import select_adapter

    adapter = select_adapter("lavapipe")
    assert adapter.info["backend_type"] == "Vulkan"
    return adapter


@pytest.fixture
def db_dir(tmp_path, monkeypatch):
    """An empty tuning-database folder searched before the package's ($RELAX_VK_TUNING_DB)."""
    from relax_vk.schedules.tuning import ENV, clear_cache

    monkeypatch.setenv(ENV, str(tmp_path / "db"))
    clear_cache()
    yield tmp_path / "db"
    clear_cache()
