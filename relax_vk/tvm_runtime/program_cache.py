"""Cold start under TVM's runtime: TVM's OpenCL program binaries kept on disk, keyed and verified.

TVM's OpenCL module builds each kernel's program from source on its first launch (seconds for a
model on pocl, about ten on NVIDIA for hundreds of kernels). It can hand out the binaries the
driver built (``opencl.GetPreCompiledPrograms``: one blob of kernel names and binaries) and take
them back before any launch (``opencl.SetPreCompiledPrograms``), but keys them by kernel name
only. :func:`restore_or_save` wraps the two with relax_vk's binary cache
(:mod:`relax_vk.runtime.opencl.binary_cache`: the file named by the SHA-256 of its key, holding
the key in full and the blob's SHA-256, written atomically):

* the key: the device and driver as TVM's runtime reports them (device name, driver version,
  OpenCL C version, API version), the SHA-256 of the module's OpenCL source, and the blob format;
* on load a file is used only when its key equals this module's and its blob hashes to its record,
  and the driver accepts every binary (``SetPreCompiledPrograms`` raises otherwise: the module then
  builds the rest from source as without a cache, and the file is rewritten);
* without a usable file, every kernel is built now (what the first call would do) and the blob
  stored;
* device 0 only: TVM's module gets and sets the binaries of the calling thread's OpenCL device,
  device 0 unless a kernel ran on another.

The blob is a C++ ``std::string`` returned as a TVM FFI string, which TVM's Python binding decodes
as UTF-8 and cannot: :func:`_call_returning_bytes` calls the function through the FFI's C API and
reads the string's bytes.

Used by :func:`relax_vk.load_vm` (``binary_cache=True`` or a folder). ``cache_dir`` as in
:func:`relax_vk.runtime.opencl.binary_cache.cache_folder` (``$RELAX_VK_CACHE_DIR``, else
``~/.cache/relax_vk/opencl``; ``RELAX_VK_NO_CACHE=1`` turns it off).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
from typing import Dict, List

from ..codegen.opencl import opencl_module
from ..runtime.opencl.binary_cache import BuildInfo, CacheDir, cache_folder, cache_path, read_verified, write_atomic

#: what the cached blob is (part of the key: another layout is another file)
FORMAT = "tvm opencl.GetPreCompiledPrograms 1"

_STR, _BYTES = 65, 66  # TVMFFITypeIndex: kTVMFFIStr, kTVMFFIBytes (objects: { TVMFFIObject, TVMFFIByteArray })
_SMALL_STR, _SMALL_BYTES = 11, 12
_OBJECT_HEADER = 24  # sizeof(TVMFFIObject)


def device_key(device) -> Dict[str, str]:
    """The device and driver as TVM's runtime reports them for ``device`` (a ``tvm.runtime.Device``)."""
    return {
        "device": str(device.device_name).strip(),
        "driver": str(device.driver_version).strip(),
        "opencl_c": str(device.compute_version).strip(),
        "api": str(device.api_version),
    }


def cache_key(source: str, device) -> Dict[str, str]:
    """The full key of a module's binaries: :func:`device_key`, the source's SHA-256 and :data:`FORMAT`."""
    return dict(device_key(device), format=FORMAT, source_sha256=hashlib.sha256(source.encode()).hexdigest())


class _Any(ctypes.Structure):  # TVMFFIAny
    _fields_ = [("type_index", ctypes.c_int32), ("small_len", ctypes.c_uint32), ("value", ctypes.c_uint64)]


def _ffi_library():
    import tvm_ffi

    return ctypes.CDLL(os.path.join(os.path.dirname(tvm_ffi.__file__), "lib", "libtvm_ffi.so"))


def _call_returning_bytes(function) -> bytes:
    """``function()`` (a ``tvm_ffi.Function`` returning a string or bytes) as raw bytes."""
    lib = _ffi_library()
    result = _Any(0, 0, 0)
    if lib.TVMFFIFunctionCall(ctypes.c_void_p(function.__chandle__()), None, 0, ctypes.byref(result)) != 0:
        function()  # let TVM's binding raise the error it recorded, with its message
        raise RuntimeError("TVMFFIFunctionCall failed")
    if result.type_index in (_SMALL_STR, _SMALL_BYTES):
        return bytes(ctypes.string_at(ctypes.addressof(result) + 8, result.small_len))
    if result.type_index not in (_STR, _BYTES):
        raise TypeError(f"expected a string or bytes from the function, got type index {result.type_index}")
    obj = result.value
    try:
        data = ctypes.c_void_p.from_address(obj + _OBJECT_HEADER).value
        size = ctypes.c_size_t.from_address(obj + _OBJECT_HEADER + ctypes.sizeof(ctypes.c_void_p)).value
        return ctypes.string_at(data, size) if size else b""
    finally:
        lib.TVMFFIObjectDecRef(ctypes.c_void_p(obj))


def kernel_names(blob: bytes) -> List[str]:
    """The kernel names in a ``GetPreCompiledPrograms`` blob (uint64 count, then per kernel a
    uint64-length name and a uint64-length binary; little endian); ValueError on a malformed blob."""
    names, at = [], 8
    if len(blob) < 8:
        raise ValueError("blob shorter than its count")
    count = int.from_bytes(blob[:8], "little")
    for _ in range(count):
        for part in ("name", "binary"):
            if at + 8 > len(blob):
                raise ValueError(f"blob ends inside a {part} length")
            size = int.from_bytes(blob[at : at + 8], "little")
            at += 8
            if at + size > len(blob):
                raise ValueError(f"blob ends inside a {part}")
            if part == "name":
                names.append(blob[at : at + size].decode())
            at += size
    if at != len(blob):
        raise ValueError("bytes after the last kernel")
    return names


def restore_or_save(module, device, cache_dir: CacheDir = None) -> BuildInfo:
    """Give ``module``'s OpenCL module (found among its imports) its cached binaries for
    ``device``, or build them all now and store them (module docstring). Call before the first
    kernel launch. ``BuildInfo.origin``: ``"binary"``, ``"source"`` or ``"source (cache off)"``;
    ``"none"`` when ``module`` has no OpenCL module."""
    ocl = opencl_module(module)
    if ocl is None:
        return BuildInfo("none")
    folder = cache_folder(cache_dir)
    if folder is None:
        return BuildInfo("source (cache off)")
    if device.index != 0:  # TVM gets and sets binaries for the calling thread's device, 0 unless a kernel ran elsewhere
        return BuildInfo("source (cache off)", rejected=f"device index {device.index}: TVM's OpenCL module caches device 0's programs only")
    key = cache_key(ocl.inspect_source(), device)
    path = cache_path(folder, key)
    blob, names_or_reason = read_verified(path, key)
    rejected = "" if blob is not None else names_or_reason
    if blob is not None:
        try:
            if sorted(kernel_names(blob)) != sorted(names_or_reason):
                raise ValueError("kernel names differ from the record")
            ocl["opencl.SetPreCompiledPrograms"](blob)
            return BuildInfo("binary", path)
        except Exception as err:  # noqa: BLE001  (TVM raises its own error types for a refused binary)
            rejected = f"not usable ({str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__})"
    blob = _call_returning_bytes(ocl["opencl.GetPreCompiledPrograms"])
    write_atomic(path, key, blob, kernel_names(blob))
    return BuildInfo("source", path, rejected)
