import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def pocl():
    """The pocl OpenCL device (a CPU with a real OpenCL compiler and images), as the native library opens it."""
    from relax_vk.runtime import select_device

    device = select_device("opencl", "pocl")
    assert "pocl" in device.row["platform"].lower() or "portable" in device.row["platform"].lower(), device.row
    return device


@pytest.fixture(scope="session")
def lavapipe():
    """Mesa's lavapipe Vulkan adapter (a CPU Vulkan driver), through wgpu-native."""
    from relax_vk.runtime import select_device

    device = select_device("vulkan", "lavapipe")
    assert device.type == "CPU", device.row
    return device


@pytest.fixture
def db_dir(tmp_path, monkeypatch):
    """An empty tuning-database folder searched before the package's ($RELAX_VK_TUNING_DB)."""
    from relax_vk.schedules.tuning import ENV, clear_cache

    monkeypatch.setenv(ENV, str(tmp_path / "db"))
    clear_cache()
    yield tmp_path / "db"
    clear_cache()


@pytest.fixture(autouse=True, scope="session")
def _no_program_binaries():
    """No OpenCL program binaries stored by the suite's sessions ($RELAX_VK_NO_CACHE=1; the tests
    of the caches set their own). On pocl a binary is not a by-product of the build: asking for
    CL_PROGRAM_BINARIES makes pocl compile every kernel of the program once more, for a generic
    work-group size (PP-OCR's classifier: 3.4 s to build, 20 s more for its binary, 17 s at the
    first run), and pocl keeps its own cache of both. With empty caches the binaries were half of
    the suite's time on pocl. Vulkan then uses the drivers' own cache folders."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RELAX_VK_NO_CACHE", "1")
        yield
