"""The native runtime's OpenCL program-binary cache (native/src/binary_cache.cpp) on pocl: the
Python runtime's folder and file format, byte for byte (one runtime's binary loads in the other),
verified before use, rebuilt and replaced when it does not verify, off when asked."""

import os

import numpy as np
import pytest

import relax_vk
from relax_vk.analysis.reference import random_inputs
from relax_vk.models import build_example
from relax_vk.runtime import load
from relax_vk.runtime import library as native


@pytest.fixture
def artifact_and_inputs():
    mod = build_example("conv-relu-pool")
    return relax_vk.build(mod, target="opencl").artifact(), random_inputs(mod)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache folder through $RELAX_VK_CACHE_DIR (read by both runtimes at each load), with
    pocl's own kernel cache declared off, so that relax_vk keeps the binaries itself as it does for
    drivers that keep none (pocl reads the variable once a process: its cache stays on here)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("RELAX_VK_CACHE_DIR", str(folder))
    monkeypatch.delenv("RELAX_VK_NO_CACHE", raising=False)
    monkeypatch.setenv("POCL_KERNEL_CACHE", "0")
    return folder


@pytest.mark.parametrize("variables, where", [({"POCL_CACHE_DIR": "{tmp}/pocl"}, "{tmp}/pocl"),
                                              ({"XDG_CACHE_HOME": "{tmp}/xdg"}, "{tmp}/xdg/pocl/kcache"),
                                              ({"HOME": "{tmp}/home"}, "{tmp}/home/.cache/pocl/kcache"),
                                              ({"POCL_KERNEL_CACHE": "1", "POCL_CACHE_DIR": "{tmp}/p"}, "{tmp}/p")])  # fmt: skip
def test_pocl_keeps_its_programs_itself(native_build, artifact_and_inputs, cache, tmp_path, monkeypatch, variables, where):
    """pocl caches what it builds (asked for CL_PROGRAM_BINARIES it would compile every kernel to
    machine code first): relax_vk writes no binary of its own and names pocl's folder, by pocl's
    rule, and the outputs are those of a session with relax_vk's binary."""
    artifact, inputs = artifact_and_inputs
    expected = _origin(artifact)[1].run(inputs)  # (POCL_KERNEL_CACHE=0: relax_vk's binary)
    assert _files(cache)
    for name in ("POCL_KERNEL_CACHE", "POCL_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value.format(tmp=tmp_path))
    files = _files(cache)
    origin, session = _origin(artifact)
    assert origin == "driver cache at " + where.format(tmp=tmp_path) and _files(cache) == files
    for x, y in zip(session.run(inputs), expected):
        np.testing.assert_array_equal(x, y)


def _program_file(folder, artifact):
    """The cache file of ``artifact``'s program on pocl (the key both runtimes compute); the native
    device probe keeps a file of its own beside it in the same folder."""
    from helpers import pyopencl_pocl
    from relax_vk.runtime.opencl import binary_cache

    return binary_cache.cache_path(str(folder), binary_cache.cache_key(artifact.source, pyopencl_pocl()))


def _files(folder):
    return sorted(f for f in os.listdir(folder) if f.endswith(".bin")) if os.path.isdir(folder) else []


def _origin(artifact):
    session = load(artifact, device="pocl")
    return session.build_info.origin, session


def test_second_native_load_uses_the_binary(native_build, artifact_and_inputs, cache):
    artifact, inputs = artifact_and_inputs
    first, a = _origin(artifact)
    files = _files(cache)
    second, b = _origin(artifact)
    assert (first, second) == ("source", "binary")
    assert os.path.exists(_program_file(cache, artifact)) and _files(cache) == files  # (the second load wrote nothing)
    for x, y in zip(a.run(inputs), b.run(inputs)):
        np.testing.assert_array_equal(x, y)


def test_the_file_is_where_the_python_key_names_it(native_build, artifact_and_inputs, cache):
    """The library writes the program's binary under the key :mod:`relax_vk.runtime.opencl.binary_cache`
    computes (the one TVM's VM path reads: same key JSON, same SHA-256s) and loads it back, with the
    same outputs."""
    artifact, inputs = artifact_and_inputs
    written, first = _origin(artifact)
    program = _program_file(cache, artifact)
    stored = open(program, "rb").read()
    read, session = _origin(artifact)
    assert (written, read) == ("source", "binary") and open(program, "rb").read() == stored  # read, not rewritten
    for x, y in zip(session.run(inputs), first.run(inputs)):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("edit", [lambda d: d.__setitem__(-1, d[-1] ^ 0xFF), lambda d: d.__delitem__(slice(-64, None)),
                                  lambda d: d.__setitem__(slice(0, 8), b"garbage!"), lambda d: d.__setitem__(slice(40, 48), b"{{{{{{{{")])  # fmt: skip
def test_a_file_that_does_not_verify_is_rebuilt_and_replaced(native_build, artifact_and_inputs, cache, edit):
    artifact, inputs = artifact_and_inputs
    _origin(artifact)
    path = cache / os.path.basename(_program_file(cache, artifact))
    data = bytearray(path.read_bytes())
    edit(data)
    path.write_bytes(bytes(data))
    again, session = _origin(artifact)
    assert again == "source"
    assert _origin(artifact)[0] == "binary"  # replaced by a good file
    np.testing.assert_allclose(session.run(inputs)[0], load(artifact, device="pocl").run(inputs)[0], rtol=1e-6, atol=1e-6)


def test_a_binary_the_driver_refuses_is_rebuilt(native_build, artifact_and_inputs, cache):
    """A file that verifies (key and checksum right) but holds no program the driver loads."""
    from helpers import pyopencl_pocl
    from relax_vk.runtime.opencl import binary_cache

    artifact, _ = artifact_and_inputs
    key = binary_cache.cache_key(artifact.source, pyopencl_pocl())
    path = binary_cache.cache_path(str(cache), key)
    binary_cache.write_atomic(path, key, b"\x7fELF not a program", ["anything"])
    assert _origin(artifact)[0] == "source"
    assert binary_cache.read_verified(path, key)[0] != b"\x7fELF not a program"  # replaced


def test_cache_off_and_set_by_the_app(native_build, artifact_and_inputs, cache, tmp_path, monkeypatch):
    artifact, _ = artifact_and_inputs
    lib = native.library()
    monkeypatch.setenv("RELAX_VK_NO_CACHE", "1")
    assert _origin(artifact)[0] == "source (cache off)" and _files(cache) == []
    monkeypatch.delenv("RELAX_VK_NO_CACHE")
    app = tmp_path / "app cache"  # (an Android app's getCacheDir(); a space in the path)
    try:
        lib.rvk_set_cache_dir(str(app).encode())
        assert [_origin(artifact)[0], _origin(artifact)[0]] == ["source", "binary"]
        assert os.path.exists(_program_file(app, artifact)) and _files(cache) == []
        lib.rvk_set_cache_dir(b"")
        assert _origin(artifact)[0] == "source (cache off)"
    finally:
        lib.rvk_set_cache_dir(None)
    assert _origin(artifact)[0] == "source"  # back to $RELAX_VK_CACHE_DIR


def test_an_unwritable_folder_costs_a_build_only(native_build, artifact_and_inputs, cache):
    artifact, inputs = artifact_and_inputs
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text("a file where the folder should be")
    origin, session = _origin(artifact)
    assert origin == "source" and session.run(inputs)


def test_vulkan_sessions_name_their_drivers_cache(native_build):
    """Vulkan keeps no program binaries: its origin names the driver's cache instead
    (test_vulkan_cache.py holds the first and second start to it, in fresh processes)."""
    mod = build_example("conv-relu-pool")
    session = load(relax_vk.build(mod, target="vulkan").artifact(), device="lavapipe")
    assert session.build_info.origin.startswith(("driver cache at ", "source (")), session.build_info


def test_key_json_and_sha256_are_pythons(native_build):
    """The file name is the SHA-256 of json.dumps(key, sort_keys=True): the C++ side must write the
    same bytes for any device string (escapes, non-ASCII as \\uXXXX, surrogate pairs) and hash like
    hashlib, across SHA-256's block boundaries."""
    import hashlib
    import json
    import random
    import subprocess

    rng = random.Random(0)
    cases = ["", "NVIDIA H100 80GB HBM3", 'q"b\\s\n\t\r\b\f\x01\x7f', "Mali\u2122-G78", "\u00e9\U0001f600x"] + ["x" * n for n in (55, 56, 63, 64, 65, 119, 1000)]
    for _ in range(200):
        cases.append("".join(chr(rng.choice([rng.randint(0, 0x7F), rng.randint(0x80, 0x7FF), rng.randint(0x800, 0xD7FF), rng.randint(0xE000, 0x10FFFF)]))
                             for _ in range(rng.randint(0, 40))))  # fmt: skip
    done = subprocess.run([native_build / "rvk-cache-key"], input="\n".join(c.encode().hex() for c in cases) + "\n", capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    assert len(lines) == len(cases)
    for case, line in zip(cases, lines):
        key, digest = line.split("\t")
        assert key == json.dumps({"device": case, "options": ""}, sort_keys=True), repr(case)
        assert digest == hashlib.sha256(case.encode()).hexdigest(), repr(case)
