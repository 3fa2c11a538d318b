"""The OpenCL binary cache: a second load builds from the driver's binary, verified; anything that
does not verify is rebuilt from source and replaced (pocl)."""

import os

import numpy as np
import pytest

import relax_vk
from relax_vk.analysis.reference import random_inputs
from relax_vk.models import build_example
from relax_vk.runtime.opencl import binary_cache
from relax_vk.runtime.opencl.compiler import OpenCLBuildError
from relax_vk.runtime.opencl.session import OpenCLSession

SOURCE = "__kernel void twice(__global float* x) { x[get_global_id(0)] *= 2.0f; }\n"


@pytest.fixture
def context(pocl):
    import pyopencl as cl

    return cl.Context([pocl])


def _files(folder):
    return sorted(f for f in os.listdir(folder) if f.endswith(".bin")) if os.path.isdir(folder) else []


def test_second_build_loads_the_binary(context, pocl, tmp_path):
    _, first = binary_cache.build(context, pocl, SOURCE, cache_dir=tmp_path, required=["twice"])
    program, second = binary_cache.build(context, pocl, SOURCE, cache_dir=tmp_path, required=["twice"])
    assert (first.origin, second.origin) == ("source", "binary") and first.path == second.path
    assert [k.function_name for k in program.all_kernels()] == ["twice"]
    _, other = binary_cache.build(context, pocl, SOURCE.replace("2.0f", "3.0f"), cache_dir=tmp_path)
    assert other.origin == "source" and len(_files(tmp_path)) == 2  # another source, another file


def _tamper(path, edit):
    data = bytearray(open(path, "rb").read())
    edit(data)
    open(path, "wb").write(bytes(data))


@pytest.mark.parametrize(
    "edit, reason",
    [
        (lambda d: d.__setitem__(-1, d[-1] ^ 0xFF), "checksum"),  # a flipped bit in the binary
        (lambda d: d.__delitem__(slice(-100, None)), "checksum"),  # a torn write
        (lambda d: d.__setitem__(slice(0, 8), b"garbage!"), "not a relax_vk binary"),
    ],
)
def test_a_file_that_does_not_verify_is_rebuilt(context, pocl, tmp_path, edit, reason):
    _, first = binary_cache.build(context, pocl, SOURCE, cache_dir=tmp_path)
    _tamper(first.path, edit)
    program, again = binary_cache.build(context, pocl, SOURCE, cache_dir=tmp_path, required=["twice"])
    assert again.origin == "source" and reason in again.rejected
    assert binary_cache.build(context, pocl, SOURCE, cache_dir=tmp_path)[1].origin == "binary"  # replaced


def test_another_key_or_a_binary_the_driver_refuses_is_not_used(context, pocl, tmp_path):
    key = binary_cache.cache_key(SOURCE, pocl)
    path = binary_cache._path(str(tmp_path), key)
    binary_cache._write(path, dict(key, driver="another driver"), b"\x7fELF not a program", ["twice"])
    assert "key differs" in binary_cache.build(context, pocl, SOURCE, cache_dir=tmp_path)[1].rejected
    binary_cache._write(path, key, b"\x7fELF not a program", ["twice"])  # verifies, but is no program
    program, info = binary_cache.build(context, pocl, SOURCE, cache_dir=tmp_path, required=["twice"])
    assert info.origin == "source" and "refused" in info.rejected
    assert [k.function_name for k in program.all_kernels()] == ["twice"]


def test_cache_off(context, pocl, tmp_path, monkeypatch):
    assert binary_cache.build(context, pocl, SOURCE, cache_dir=False)[1].origin == "source (cache off)"
    monkeypatch.setenv("RELAX_VK_NO_CACHE", "1")
    assert binary_cache.build(context, pocl, SOURCE, cache_dir=tmp_path)[1].origin == "source (cache off)"
    assert _files(tmp_path) == []


def test_build_errors_keep_their_log(context, pocl, tmp_path):
    with pytest.raises(OpenCLBuildError, match="error"):
        binary_cache.build(context, pocl, "__kernel void broken( { }", cache_dir=tmp_path)
    assert _files(tmp_path) == []


def test_a_session_from_the_cache_computes_the_same(pocl, tmp_path):
    mod = build_example("residual")
    artifact = relax_vk.build(mod).artifact()
    inputs = random_inputs(mod)
    cold = OpenCLSession(artifact, pocl, cache_dir=tmp_path)
    warm = OpenCLSession(artifact, pocl, cache_dir=tmp_path)
    assert (cold.build_info.origin, warm.build_info.origin) == ("source", "binary")
    for a, b in zip(cold.run(inputs), warm.run(inputs)):
        np.testing.assert_array_equal(a, b)
