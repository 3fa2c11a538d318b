"""The native Vulkan backend's second-start cache (native/src/driver_caches.cpp) on lavapipe: the
first Vulkan session of a process points the drivers' own shader caches (Mesa's here) into
relax_vk's cache folder, so a second process finds the pipelines the first compiled; the user's
own settings and $RELAX_VK_NO_CACHE are kept. Each start is a fresh `rvk-run` process (the drivers
read their settings once per process), which prints the session's program origin."""

import os
import re
import subprocess

import numpy as np
import pytest

import relax_vk
from relax_vk.models import build_example

from relax_vk.analysis.reference import random_inputs

#: the variables that would point Mesa's cache elsewhere or turn it off (a test sets its own)
_MESA = ("MESA_SHADER_CACHE_DIR", "MESA_GLSL_CACHE_DIR", "MESA_SHADER_CACHE_DISABLE", "MESA_GLSL_CACHE_DISABLE")


@pytest.fixture(scope="module")
def model(native_build, tmp_path_factory):
    """conv-relu-pool for Vulkan as a file, its inputs as .npy files and TVM llvm's outputs."""
    from relax_vk.analysis.reference import run_on_cpu
    from relax_vk.runtime import select_device

    try:
        select_device("vulkan", "lavapipe")
    except Exception as e:  # (no Vulkan driver on this machine)
        pytest.skip(f"no lavapipe: {e}")
    folder = tmp_path_factory.mktemp("vulkan-cache")
    mod = build_example("conv-relu-pool")
    artifact = relax_vk.build(mod, target="vulkan").artifact()
    path = folder / "model.rvk"
    artifact.write(str(path))
    inputs = random_inputs(mod)
    files = [folder / f"in{i}.npy" for i in range(len(inputs))]
    for f, x in zip(files, inputs):
        np.save(f, x)
    return native_build / "rvk-run", path, files, run_on_cpu(mod, inputs)


def _start(model, tmp_path, name, **env):
    """One start of rvk-run on lavapipe (one inference); returns (origin, outputs)."""
    tool, path, inputs, expected = model
    environ = {k: v for k, v in os.environ.items() if k not in _MESA + ("RELAX_VK_NO_CACHE",)}
    environ.pop("RVK_WGPU_LIBRARY", None)  # (wgpu-native lies beside the library in every build folder)
    environ.update(XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"), **env)
    outs = [tmp_path / f"{name}{i}.npy" for i in range(len(expected))]
    args = [tool, path, "--device", "lavapipe"] + [a for f in inputs for a in ("--input", f)] + [a for f in outs for a in ("--output", f)]
    done = subprocess.run([str(a) for a in args], env=environ, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return re.search(r"^program: (.*)$", done.stdout, re.M).group(1), [np.load(f) for f in outs]


def _files(folder):
    return sorted(os.path.relpath(os.path.join(d, f), folder) for d, _, names in os.walk(folder) for f in names)


def test_the_first_start_fills_the_drivers_cache_and_the_second_runs_right(model, tmp_path):
    cache = tmp_path / "cache"
    mesa = cache / "vulkan" / "mesa"
    first, a = _start(model, tmp_path, "first", RELAX_VK_CACHE_DIR=str(cache))
    stored = _files(mesa)
    assert first == f"driver cache at {mesa}" and stored, _files(cache)  # lavapipe's compiled shaders
    second, b = _start(model, tmp_path, "second", RELAX_VK_CACHE_DIR=str(cache))
    assert second == first
    for x, y, want in zip(a, b, model[3]):
        np.testing.assert_array_equal(y, x)
        np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


def test_no_cache_leaves_the_folder_empty(model, tmp_path):
    cache = tmp_path / "cache"
    origin, outputs = _start(model, tmp_path, "off", RELAX_VK_CACHE_DIR=str(cache), RELAX_VK_NO_CACHE="1")
    assert origin == "source (cache off)" and _files(cache) == []
    for x, want in zip(outputs, model[3]):
        np.testing.assert_allclose(x, want, rtol=1e-6, atol=1e-6)


def test_the_users_driver_settings_are_kept(model, tmp_path):
    cache, own = tmp_path / "cache", tmp_path / "own mesa cache"  # (a space in the path)
    origin, _ = _start(model, tmp_path, "own", RELAX_VK_CACHE_DIR=str(cache), MESA_SHADER_CACHE_DIR=str(own))
    assert origin == f"driver cache at {own}" and _files(own) and not _files(cache)
    origin, _ = _start(model, tmp_path, "disabled", RELAX_VK_CACHE_DIR=str(cache), MESA_SHADER_CACHE_DISABLE="true")
    assert origin == "source (driver cache off: MESA_SHADER_CACHE_DISABLE)" and not _files(cache)
