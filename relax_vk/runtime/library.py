"""The native library (``native/``: ``librelax_vk_native.so``, a plain C ABI) loaded through ctypes.

This module finds the library, declares its functions and turns its status codes into relax_vk's
exceptions (:mod:`relax_vk.runtime.errors`); :mod:`~relax_vk.runtime.session` and
:mod:`~relax_vk.runtime.devices` are the bindings built on it. Everything a runtime does (parsing and
validating an artifact, choosing the device, placing storage, building kernels, running, copying,
profiling) happens in the library; ctypes releases the GIL around every call.

The library is looked for at ``$RELAX_VK_NATIVE_LIB``, else in the source tree's ``native/build/``
(a checkout: what ``make setup`` and the tests keep up to date), else inside the installed package
(``relax_vk/runtime/lib/``, where ``pip install`` puts it; an editable install's too). The library itself finds OpenCL (the system's ICD
loader, ``$RVK_OPENCL_LIBRARY``) and wgpu-native (beside itself, where the build copies the ``wgpu``
wheel's library; ``$RVK_WGPU_LIBRARY``).
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Optional

from ..core.errors import UnsupportedError
from ..serialization.artifact import ArtifactError
from .errors import (
    DeviceLimitError,
    DeviceRuntimeError,
    LibraryUnavailable,
    OpenCLBuildError,
    OpenCLUnavailable,
    ShaderError,
    VulkanUnavailable,
)

ENV = "RELAX_VK_NATIVE_LIB"
NAME = "librelax_vk_native.so"
PACKAGE_DIR = Path(__file__).resolve().parent / "lib"  # (a regular install; an editable one: package_library())
SOURCE_DIR = Path(__file__).resolve().parents[2] / "native"
DEFAULT_LIBRARY = SOURCE_DIR / "build" / NAME
ABI_VERSION = 6
MAX_RANK = 16

# rvk_status
OK, ARTIFACT, DEVICE, LIMIT, BUILD, ARGUMENT, RUNTIME, UNSUPPORTED, IO = range(9)


class TensorInfo(ctypes.Structure):
    """``rvk_tensor_info``."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_char_p),
        ("device_dtype", ctypes.c_char_p),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_RANK),
        ("elements", ctypes.c_int64),
    ]


def package_library(name: str = NAME) -> Optional[Path]:
    """``name`` in the installed package's ``lib/`` folder (found through importlib.resources, which
    also sees an editable install's built files), or None."""
    try:
        from importlib.resources import files

        path = Path(str(files(__package__) / "lib" / name))
    except (ImportError, TypeError, ValueError, OSError):
        path = PACKAGE_DIR / name
    return path if path.exists() else None


def library_path() -> Path:
    """Where the library is loaded from (see the module docstring); the source tree's build folder
    when it is found nowhere (the error then says how to build it)."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    if DEFAULT_LIBRARY.exists():
        return DEFAULT_LIBRARY
    return package_library() or DEFAULT_LIBRARY


_LIB: Optional[ctypes.CDLL] = None


def library() -> ctypes.CDLL:
    """The loaded library, its prototypes declared. Raises :class:`LibraryUnavailable` when it is not built."""
    global _LIB
    if _LIB is not None:
        return _LIB
    path = library_path()
    if not path.exists():
        raise LibraryUnavailable(
            f"the relax_vk native library is not built ({path} does not exist): run `make setup` (or `pip install .`), "
            f"or `cmake -S {SOURCE_DIR} -B {SOURCE_DIR / 'build'} && cmake --build {SOURCE_DIR / 'build'}`, or set ${ENV}"
        )
    # wgpu-native warns about XDG_RUNTIME_DIR on headless machines (harmless; keep the terminal quiet)
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    lib = ctypes.CDLL(str(path))
    P, c = ctypes.c_void_p, ctypes
    lib.rvk_abi_version.restype, lib.rvk_abi_version.argtypes = c.c_int, []
    if lib.rvk_abi_version() != ABI_VERSION:  # (before binding: an older library lacks functions)
        raise LibraryUnavailable(f"{path} speaks ABI {lib.rvk_abi_version()}, these bindings ABI {ABI_VERSION}: rebuild it (`make setup`)")
    sigs = {
        "rvk_last_error": (c.c_char_p, []),
        "rvk_artifact_open_file": (c.c_int, [c.c_char_p, c.POINTER(P)]),
        "rvk_artifact_open_memory": (c.c_int, [c.c_char_p, c.c_size_t, c.c_char_p, c.POINTER(P)]),
        "rvk_artifact_destroy": (None, [P]),
        "rvk_artifact_target": (c.c_char_p, [P]),
        "rvk_session_create": (c.c_int, [P, c.c_char_p, c.c_uint32, c.POINTER(P)]),
        "rvk_session_destroy": (None, [P]),
        "rvk_session_input_count": (c.c_int32, [P]),
        "rvk_session_output_count": (c.c_int32, [P]),
        "rvk_session_input_info": (c.c_int, [P, c.c_int32, c.POINTER(TensorInfo)]),
        "rvk_session_output_info": (c.c_int, [P, c.c_int32, c.POINTER(TensorInfo)]),
        "rvk_session_dim_count": (c.c_int32, [P]),
        "rvk_session_dim_info": (c.c_int, [P, c.c_int32, c.POINTER(c.c_char_p)] + [c.POINTER(c.c_int64)] * 3),
        "rvk_session_set_input": (c.c_int, [P, c.c_int32, P, c.c_size_t, c.c_char_p, c.POINTER(c.c_int64), c.c_int32]),
        "rvk_session_run": (c.c_int, [P]),
        "rvk_session_get_output": (c.c_int, [P, c.c_int32, P, c.c_size_t]),
        "rvk_session_read_tensor": (c.c_int, [P, c.c_int32, P, c.c_size_t]),
        "rvk_session_reset_states": (c.c_int, [P]),
        "rvk_session_tensor_info": (c.c_int, [P, c.c_int32, c.POINTER(TensorInfo)]),
        "rvk_session_set_profiling": (c.c_int, [P, c.c_int]),
        "rvk_session_profile_count": (c.c_int32, [P]),
        "rvk_session_profile_entry": (c.c_int, [P, c.c_int32, c.POINTER(c.c_char_p), c.POINTER(c.c_double)]),
        "rvk_session_profile_start": (c.c_int, [P, c.c_int32, c.POINTER(c.c_double)]),
        "rvk_session_device_ms": (c.c_double, [P]),
        "rvk_session_device_bytes": (c.c_int64, [P]),
        "rvk_session_device_objects": (c.c_int64, [P]),
        "rvk_session_variant": (c.c_int32, [P]),
        "rvk_session_device_name": (c.c_char_p, [P]),
        "rvk_session_warnings": (c.c_char_p, [P]),
        "rvk_session_program_origin": (c.c_char_p, [P]),
        "rvk_session_buffer_binding": (c.c_char_p, [P]),
        "rvk_set_cache_dir": (None, [c.c_char_p]),
        "rvk_devices": (c.c_int, [c.c_char_p, c.c_char_p, c.POINTER(c.c_char_p)]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    _LIB = lib
    return lib


def error(status: int, target: str = "opencl") -> Exception:
    """The exception for a failed call's ``status`` (the library's message; ``target``: the API it was about)."""
    message = library().rvk_last_error().decode(errors="replace")
    if status in (ARTIFACT, IO):
        return ArtifactError(message)
    if status == LIMIT:
        return DeviceLimitError(message)
    if status == ARGUMENT:
        return ValueError(message)
    if status == DEVICE:
        return (VulkanUnavailable if target == "vulkan" else OpenCLUnavailable)(message)
    if status == BUILD:
        return (ShaderError if target == "vulkan" else OpenCLBuildError)(message)
    if status == UNSUPPORTED:
        return UnsupportedError(message)
    return DeviceRuntimeError(message)


def check(status: int, target: str = "opencl") -> None:
    """Raise :func:`error` unless ``status`` is OK."""
    if status != OK:
        raise error(status, target)
