"""relax_vk.tvm_runtime.program_cache: TVM's OpenCL program binaries on disk, keyed and verified.

The key/verify logic runs everywhere on a stand-in OpenCL module (real TVM FFI functions); the
end-to-end check runs where TVM's runtime has OpenCL (``$RELAX_VK_TVM_OPENCL_LIB``, as in
tests/test_deploy.py)."""

import ctypes
import os
import struct

import numpy as np
import pytest
import tvm
import tvm_ffi

from relax_vk import tvm_runtime
from relax_vk.tvm_runtime.program_cache import _call_returning_bytes, cache_key, kernel_names, restore_or_save

if os.environ.get("RELAX_VK_TVM_OPENCL_LIB"):
    ctypes.CDLL(os.environ["RELAX_VK_TVM_OPENCL_LIB"], mode=ctypes.RTLD_GLOBAL)


@pytest.fixture(autouse=True)
def _cache_on(monkeypatch):
    """The cache these tests exercise (the suite turns it off elsewhere: tests/conftest.py)."""
    monkeypatch.delenv("RELAX_VK_NO_CACHE", raising=False)


def _blob(kernels):
    out = struct.pack("<Q", len(kernels))
    for name, binary in kernels:
        out += struct.pack("<Q", len(name)) + name.encode() + struct.pack("<Q", len(binary)) + binary
    return out


class _Device:
    def __init__(self, driver="3.1", index=0):
        self.device_name, self.driver_version, self.compute_version, self.api_version, self.index = "dev", driver, "3.0", 120, index


class _OpenCLModule:
    """Stands in for TVM's OpenCL module: its source, and the two functions, as TVM FFI functions."""

    kind = "opencl"
    imports = []

    def __init__(self, source, blob, refuse=False):
        self.source, self.blob, self.refuse, self.got, self.built = source, blob, refuse, [], 0

        def get():
            self.built += 1
            return self.blob  # bytes with a NUL and non-UTF-8: what TVM's binding could not return

        def set_(data):
            if self.refuse:
                raise RuntimeError("CL_INVALID_BINARY")
            self.got.append(bytes(data))

        self.functions = {"opencl.GetPreCompiledPrograms": tvm_ffi.convert(get), "opencl.SetPreCompiledPrograms": tvm_ffi.convert(set_)}

    def inspect_source(self):
        return self.source

    def __getitem__(self, name):
        return self.functions[name]


BLOB = _blob([("conv_kernel", b"\x00\xff\xfe binary \x80"), ("pool_kernel", b"\x01" * 100)])


def test_raw_bytes_come_back_through_the_ffi():
    assert _call_returning_bytes(tvm_ffi.convert(lambda: BLOB)) == BLOB
    assert _call_returning_bytes(tvm_ffi.convert(lambda: b"ab\x00")) == b"ab\x00"  # small bytes


def test_kernel_names_and_malformed_blobs():
    assert kernel_names(BLOB) == ["conv_kernel", "pool_kernel"]
    for bad in (BLOB[:-1], BLOB + b"x", b"\x01\x00"):
        with pytest.raises(ValueError):
            kernel_names(bad)


def test_second_load_restores_the_verified_binaries(tmp_path):
    first = _OpenCLModule("kernel void a() {}", BLOB)
    info = restore_or_save(first, _Device(), tmp_path)
    assert info.origin == "source" and first.built == 1 and os.path.exists(info.path)
    second = _OpenCLModule("kernel void a() {}", b"never read")
    info = restore_or_save(second, _Device(), tmp_path)
    assert info.origin == "binary" and second.got == [BLOB] and second.built == 0


def test_another_source_or_driver_is_another_file(tmp_path):
    restore_or_save(_OpenCLModule("kernel void a() {}", BLOB), _Device(), tmp_path)
    for module, device in ((_OpenCLModule("kernel void b() {}", BLOB), _Device()), (_OpenCLModule("kernel void a() {}", BLOB), _Device("3.2"))):
        info = restore_or_save(module, device, tmp_path)
        assert info.origin == "source" and module.got == []
    assert cache_key("x", _Device()) != cache_key("x", _Device("3.2")) and cache_key("x", _Device()) != cache_key("y", _Device())
    assert len(os.listdir(tmp_path)) == 3


def test_a_corrupted_or_refused_file_is_rebuilt_never_used(tmp_path):
    info = restore_or_save(_OpenCLModule("k", BLOB), _Device(), tmp_path)
    data = bytearray(open(info.path, "rb").read())
    data[-3] ^= 0xFF  # a flipped bit in the binary
    open(info.path, "wb").write(bytes(data))
    module = _OpenCLModule("k", BLOB)
    info = restore_or_save(module, _Device(), tmp_path)
    assert info.origin == "source" and "checksum" in info.rejected and module.got == []
    refused = _OpenCLModule("k", BLOB, refuse=True)  # the file is sound now, the driver refuses it
    info = restore_or_save(refused, _Device(), tmp_path)
    assert info.origin == "source" and "not usable" in info.rejected and refused.built == 1


def test_cache_off_and_other_devices(tmp_path):
    module = _OpenCLModule("k", BLOB)
    assert restore_or_save(module, _Device(), False).origin == "source (cache off)"
    assert restore_or_save(module, _Device(index=1), tmp_path).origin == "source (cache off)"
    assert module.built == 0 and os.listdir(tmp_path) == []


@pytest.mark.skipif(not tvm_runtime.has_runtime("opencl"), reason="this TVM runtime has no OpenCL (the PyPI wheel's)")
def test_load_vm_restores_tvm_binaries_on_pocl(pocl, tmp_path):
    import relax_vk
    from relax_vk.analysis.reference import random_inputs
    from relax_vk.frontends import load_model

    mod = load_model("rfc-conv2d")[0]
    path = str(tmp_path / "m.so")
    tvm_runtime.export_library(relax_vk.compile(mod, relax_vk.target.opencl(opencl_device=pocl)), path)
    inputs = random_inputs(mod)
    results = []
    for origin in ("source", "binary"):
        vm = relax_vk.load_vm(path, tvm.opencl(0), binary_cache=tmp_path / "cache")
        assert vm.program_cache.origin == origin
        results.append(vm["main"](*[tvm.runtime.tensor(x, device=tvm.opencl(0)) for x in inputs]).numpy())
    np.testing.assert_array_equal(results[0], results[1])
