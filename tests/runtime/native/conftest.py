"""Fixtures of the native runtime's tests: the library built from the current sources (plain, and
with AddressSanitizer + UBSan), once per session, serialised across pytest-xdist workers."""

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

from relax_vk.runtime import library as native

ROOT = native.SOURCE_DIR.parent


def cmake_build(folder: Path, *options: str, targets=()) -> Path:
    """Configure and build native/ into ``folder`` (incremental: a no-op when up to date), holding
    a lock so parallel test workers do not build the same tree at once."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".pytest-build.lock", "w") as lock:  # (inside the ignored build folder)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "CMakeCache.txt").exists():
            subprocess.run(["cmake", "-S", str(native.SOURCE_DIR), "-B", str(folder), *options], check=True, capture_output=True, text=True)
        build = ["cmake", "--build", str(folder), "-j2"] + [a for t in targets for a in ("--target", t)]
        done = subprocess.run(build, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return folder


@pytest.fixture(scope="session")
def native_build() -> Path:
    """The plain build (what `make setup` makes), brought up to date; the binding uses its library."""
    folder = cmake_build(native.DEFAULT_LIBRARY.parent, "-DCMAKE_BUILD_TYPE=Release")
    assert native.library_path() == native.DEFAULT_LIBRARY or os.environ.get(native.ENV)
    return folder


@pytest.fixture(scope="session")
def asan_build() -> Path:
    """The AddressSanitizer + UBSan build (native/build-asan): library, rvk-run and rvk-fuzz."""
    return cmake_build(native.SOURCE_DIR / "build-asan", "-DRVK_SANITIZE=ON", "-DRVK_BUILD_EXAMPLES=OFF", "-DCMAKE_BUILD_TYPE=Debug",
                       targets=("rvk-run", "rvk-fuzz"))


_ZOO: dict = {}


@pytest.fixture(scope="session")
def zoo_artifact():
    """``zoo_artifact(name, target="opencl") -> (artifact, example input, torch model)``: each zoo
    model compiled once per target and test session (the equivalence and example tests share them)."""

    def get(name: str, target: str = "opencl"):
        key = (name, target)
        if key not in _ZOO:
            pytest.importorskip("torch")
            import relax_vk
            from relax_vk.frontends import from_torch
            from relax_vk.zoo import build_zoo_model

            model, example = build_zoo_model(name)
            _ZOO[key] = (relax_vk.build(from_torch(model, (example,)), target=target).artifact(), example.numpy(), model)
        return _ZOO[key]

    return get


@pytest.fixture(autouse=True, scope="session")
def _program_cache_of_the_session(tmp_path_factory):
    """OpenCL program binaries of these tests (the library's, and of the
    fuzz's mutants) in a folder of the session, not the user's ~/.cache (a test that needs another
    folder sets its own)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RELAX_VK_CACHE_DIR", str(tmp_path_factory.mktemp("program-cache")))
        yield
