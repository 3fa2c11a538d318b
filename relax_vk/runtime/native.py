"""The native runtime (``native/``: a C library, no Python inside) from Python, through ctypes.

``load(artifact, device, native=True)`` returns a :class:`NativeSession`: the same ``run(inputs) ->
outputs``, ``time()``, ``last_profile``, ``last_device_ms`` and ``device_bytes`` as the Python
sessions, computed by the library. Parsing, validation, device selection, the storage placement, the
checks and conversions of inputs and outputs and the profile all happen in C; this module only
moves numpy arrays across and maps the library's status codes onto relax_vk's exceptions (an
invalid artifact is an :class:`~relax_vk.serialization.artifact.ArtifactError`, a device limit a
:class:`~relax_vk.runtime.session.DeviceLimitError`, a bad input a ``ValueError``, ...).

The library is found at ``$RELAX_VK_NATIVE_LIB`` if set, else at ``native/build/librelax_vk_native.so``
of the source tree (what ``make setup`` builds: ``cmake -S native -B native/build && cmake --build
native/build``). ctypes releases the GIL around every call.
"""

from __future__ import annotations

import ctypes
import math
import os
import warnings
from pathlib import Path
from typing import List, Optional, Sequence, Union

import numpy as np

from ..core.errors import RelaxVKError, UnsupportedError
from ..serialization.artifact import Artifact, ArtifactError
from .opencl.binary_cache import BuildInfo
from .session import DeviceLimitError, Session

ENV = "RELAX_VK_NATIVE_LIB"
SOURCE_DIR = Path(__file__).resolve().parents[2] / "native"
DEFAULT_LIBRARY = SOURCE_DIR / "build" / "librelax_vk_native.so"
ABI_VERSION = 2
MAX_RANK = 16
PROFILE = 1
SHADER_CHECKS = {"bounds": 0, "loops": 2, "none": 4}  # RVK_SESSION_SHADER_CHECKS_*
WGPU_ENV = "RVK_WGPU_LIBRARY"
OPENCL_ENV = "RVK_OPENCL_LIBRARY"

# rvk_status
OK, ARTIFACT, DEVICE, LIMIT, BUILD, ARGUMENT, RUNTIME, UNSUPPORTED, IO = range(9)


class NativeUnavailable(RelaxVKError, RuntimeError):
    """The native library is not built (or not the ABI this module speaks)."""


class NativeRuntimeError(RelaxVKError, RuntimeError):
    """The device API failed while the native runtime ran (the message names the OpenCL error)."""


class _TensorInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_char_p),
        ("device_dtype", ctypes.c_char_p),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_RANK),
        ("elements", ctypes.c_int64),
    ]


def library_path() -> Path:
    """Where the library is looked for (``$RELAX_VK_NATIVE_LIB`` or the source tree's build folder)."""
    return Path(os.environ[ENV]) if os.environ.get(ENV) else DEFAULT_LIBRARY


_LIB: Optional[ctypes.CDLL] = None


def library() -> ctypes.CDLL:
    """The loaded library, its prototypes declared. Raises :class:`NativeUnavailable` when it is not built."""
    global _LIB
    if _LIB is not None:
        return _LIB
    path = library_path()
    if not path.exists():
        raise NativeUnavailable(
            f"the native runtime is not built ({path} does not exist): run `make setup`, or "
            f"`cmake -S {SOURCE_DIR} -B {SOURCE_DIR / 'build'} && cmake --build {SOURCE_DIR / 'build'}`, or set ${ENV}"
        )
    lib = ctypes.CDLL(str(path))
    P, c = ctypes.c_void_p, ctypes
    sigs = {
        "rvk_abi_version": (c.c_int, []),
        "rvk_last_error": (c.c_char_p, []),
        "rvk_artifact_open_file": (c.c_int, [c.c_char_p, c.POINTER(P)]),
        "rvk_artifact_open_memory": (c.c_int, [c.c_char_p, c.c_size_t, c.c_char_p, c.POINTER(P)]),
        "rvk_artifact_destroy": (None, [P]),
        "rvk_artifact_target": (c.c_char_p, [P]),
        "rvk_session_create": (c.c_int, [P, c.c_char_p, c.c_uint32, c.POINTER(P)]),
        "rvk_session_destroy": (None, [P]),
        "rvk_session_input_count": (c.c_int32, [P]),
        "rvk_session_output_count": (c.c_int32, [P]),
        "rvk_session_input_info": (c.c_int, [P, c.c_int32, c.POINTER(_TensorInfo)]),
        "rvk_session_output_info": (c.c_int, [P, c.c_int32, c.POINTER(_TensorInfo)]),
        "rvk_session_set_input": (c.c_int, [P, c.c_int32, P, c.c_size_t, c.c_char_p, c.POINTER(c.c_int64), c.c_int32]),
        "rvk_session_run": (c.c_int, [P]),
        "rvk_session_get_output": (c.c_int, [P, c.c_int32, P, c.c_size_t]),
        "rvk_session_set_profiling": (c.c_int, [P, c.c_int]),
        "rvk_session_profile_count": (c.c_int32, [P]),
        "rvk_session_profile_entry": (c.c_int, [P, c.c_int32, c.POINTER(c.c_char_p), c.POINTER(c.c_double)]),
        "rvk_session_device_ms": (c.c_double, [P]),
        "rvk_session_device_bytes": (c.c_int64, [P]),
        "rvk_session_device_name": (c.c_char_p, [P]),
        "rvk_session_warnings": (c.c_char_p, [P]),
        "rvk_session_program_origin": (c.c_char_p, [P]),
        "rvk_set_cache_dir": (None, [c.c_char_p]),
    }
    lib.rvk_abi_version.restype, lib.rvk_abi_version.argtypes = c.c_int, []
    if lib.rvk_abi_version() != ABI_VERSION:  # (before binding: an older library lacks functions)
        raise NativeUnavailable(f"{path} speaks ABI {lib.rvk_abi_version()}, this module ABI {ABI_VERSION}: rebuild it")
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    _LIB = lib
    return lib


def wgpu_library() -> Optional[str]:
    """The wgpu wheel's wgpu-native library (what wgpu-py loads), or None without the wheel."""
    import importlib.util

    spec = importlib.util.find_spec("wgpu")
    if spec is None or not spec.origin:
        return None
    path = Path(spec.origin).parent / "resources" / "libwgpu_native-release.so"
    return str(path) if path.exists() else None


def pyopencl_loader() -> Optional[str]:
    """The OpenCL ICD loader that pyopencl's wheel bundles (``pyopencl/.libs/libOpenCL-*.so*``), or
    None (no pyopencl, or one linked against the system's loader, which the library finds too)."""
    import importlib.util

    spec = importlib.util.find_spec("pyopencl")
    if spec is None or not spec.origin:
        return None
    found = sorted((Path(spec.origin).parent / ".libs").glob("libOpenCL*.so*"))
    return str(found[0]) if found else None


def _point_at_pyopencl_loader() -> None:
    """``$RVK_OPENCL_LIBRARY`` set to pyopencl's loader (unless the caller set it), so that the
    library lists the platforms and devices the Python runtime lists, in its order. Two loaders can
    disagree: on the GPU machine pyopencl's honours ``$OCL_ICD_VENDORS`` (NVIDIA alone) and the
    system's also lists pocl first, so "0:0" named the H100 in one and pocl in the other. The
    library reads the variable once, at its first OpenCL call."""
    if os.environ.get(OPENCL_ENV):
        return
    path = pyopencl_loader()
    if not path:
        return
    try:  # pyopencl initializes its loader first: the wheel's ocl-icd crashed (a stpcpy in
        # __initClIcd, on this CPU machine with pocl) when the library's dlopen initialized it first
        import pyopencl

        pyopencl.get_platforms()
    except Exception:  # (no platform through it: the library's own lookup says why)
        return
    os.environ[OPENCL_ENV] = path


def _point_at_wgpu() -> None:
    """``$RVK_WGPU_LIBRARY`` set to the wheel's library (unless the caller set it)."""
    if not os.environ.get(WGPU_ENV):
        path = wgpu_library()
        if path:
            os.environ[WGPU_ENV] = path
    # wgpu-native warns about XDG_RUNTIME_DIR on headless machines (as devices._wgpu)
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")


def _error(status: int, target: str = "opencl") -> Exception:
    """The exception the Python runtime of ``target`` raises for the same failure."""
    message = library().rvk_last_error().decode(errors="replace")
    if status in (ARTIFACT, IO):
        return ArtifactError(message)
    if status == LIMIT:
        return DeviceLimitError(message)
    if status == ARGUMENT:
        return ValueError(message)
    if status == DEVICE and target == "vulkan":
        from .vulkan.devices import VulkanUnavailable

        return VulkanUnavailable(message)
    if status == BUILD and target == "vulkan":
        from .vulkan.session import ShaderError

        err = ShaderError.__new__(ShaderError)
        RuntimeError.__init__(err, message)
        err.kernel, err.error, err.source = "", message, ""
        return err
    if status == DEVICE:
        from .opencl.compiler import OpenCLUnavailable

        return OpenCLUnavailable(message)
    if status == BUILD:
        from .opencl.compiler import OpenCLBuildError

        err = OpenCLBuildError.__new__(OpenCLBuildError)
        RuntimeError.__init__(err, message)
        err.device, err.log, err.source = "", message, ""
        return err
    if status == UNSUPPORTED:
        return UnsupportedError(message)
    return NativeRuntimeError(message)


def _check(status: int, target: str = "opencl") -> None:
    if status != OK:
        raise _error(status, target)


def _info(fn, handle, index: int) -> dict:
    info = _TensorInfo()
    _check(fn(handle, index, ctypes.byref(info)))
    return {
        "name": info.name.decode(),
        "dtype": info.dtype.decode(),
        "device_dtype": info.device_dtype.decode(),
        "shape": [int(v) for v in info.shape[: info.rank]],
    }


def device_spec(device) -> str:
    """The ``"P:D"`` name of a pyopencl device (its platform and device index, as the library counts)."""
    if not hasattr(device, "platform"):
        raise TypeError(f"the native runtime takes a device name ('pocl', 'gpu', 'P:D') or a pyopencl device, not {type(device).__name__}")
    from .opencl.compiler import all_devices

    for p, d, dev in all_devices():
        if dev == device:
            return f"{p}:{d}"
    raise ValueError(f"device {device.name} is not among the OpenCL devices")


def adapter_spec(adapter) -> str:
    """The index name of a wgpu adapter among the Vulkan adapters (as the library counts them)."""
    if not hasattr(adapter, "info"):
        raise TypeError(f"the native Vulkan runtime takes a device name ('lavapipe', 'gpu', an adapter index) or a wgpu adapter, not {type(adapter).__name__}")
    from .vulkan.devices import vulkan_adapters

    key = ("device", "vendor_id", "device_id", "adapter_type", "backend_type")
    for i, other in enumerate(vulkan_adapters()):
        if all(other.info.get(k) == adapter.info.get(k) for k in key):
            return str(i)
    raise ValueError(f"adapter {adapter.info.get('device')} is not among the Vulkan adapters")


class NativeSession(Session):
    """A program loaded by the native library on one device (see the module docstring)."""

    def __init__(self, artifact: Union[str, os.PathLike, bytes, Artifact], device=None, profile: bool = True, shader_checks: Optional[str] = None):
        """``artifact``: a path, the file's bytes or an :class:`Artifact`; ``device``: OpenCL ``"pocl"``,
        ``"gpu"``, ``"P:D"``, None (a GPU if one works, else pocl) or a pyopencl device; Vulkan
        ``"lavapipe"``, ``"gpu"``, an adapter index or None; ``shader_checks`` (Vulkan):
        ``"bounds"`` (None), ``"loops"`` or ``"none"`` (:mod:`relax_vk.runtime.vulkan.shader_modules`)."""
        lib = library()
        if shader_checks is not None and shader_checks not in SHADER_CHECKS:
            raise ValueError(f"shader checks must be one of {', '.join(SHADER_CHECKS)}, not {shader_checks!r}")
        flags = (PROFILE if profile else 0) | SHADER_CHECKS[shader_checks or "bounds"]
        handle = ctypes.c_void_p()
        if isinstance(artifact, Artifact):
            data = artifact.to_bytes()
            _check(lib.rvk_artifact_open_memory(data, len(data), b"artifact", ctypes.byref(handle)))
        elif isinstance(artifact, bytes):
            _check(lib.rvk_artifact_open_memory(artifact, len(artifact), b"artifact", ctypes.byref(handle)))
        else:
            _check(lib.rvk_artifact_open_file(os.fsencode(artifact), ctypes.byref(handle)))
        self._lib, self._handle = lib, None
        self.target = target = lib.rvk_artifact_target(handle).decode()
        if target == "vulkan":
            _point_at_wgpu()
            if device is not None and not isinstance(device, str):
                try:
                    device = adapter_spec(device)
                except (TypeError, ValueError):
                    lib.rvk_artifact_destroy(handle)
                    raise
        else:
            _point_at_pyopencl_loader()
        asked = device if target == "opencl" and device is not None and not isinstance(device, str) else None
        if asked is not None:
            try:
                device = device_spec(device)
            except (TypeError, ValueError):
                lib.rvk_artifact_destroy(handle)
                raise
        session = ctypes.c_void_p()
        try:
            _check(lib.rvk_session_create(handle, device.encode() if device else None, flags, ctypes.byref(session)), target)
        finally:
            lib.rvk_artifact_destroy(handle)  # the session keeps what it needs
        self._handle = session
        self.inputs = [_info(lib.rvk_session_input_info, session, i) for i in range(lib.rvk_session_input_count(session))]
        self.outputs = [_info(lib.rvk_session_output_info, session, i) for i in range(lib.rvk_session_output_count(session))]
        self.device_name = lib.rvk_session_device_name(session).decode()
        if asked is not None and self.device_name != asked.name.strip():  # never another device, silently
            lib.rvk_session_destroy(session)
            self._handle = None
            raise ValueError(f"the native library opened {self.device_name!r} as {device!r}, not pyopencl's {asked.name.strip()!r}: its OpenCL "
                             f"loader ({os.environ.get(OPENCL_ENV) or 'the system libOpenCL.so.1'}) lists other platforms; set ${OPENCL_ENV} "
                             f"to pyopencl's loader, or pass a device name ('gpu', 'pocl')")  # fmt: skip
        self.device_bytes = int(lib.rvk_session_device_bytes(session))
        # how the OpenCL program was made, as the Python session's build_info says it (the two share
        # one binary cache folder and file format); on Vulkan where the driver keeps the pipelines
        # ("driver cache at FOLDER") or why it keeps none ("source (...)")
        origin = lib.rvk_session_program_origin(session).decode()
        self.build_info = BuildInfo(origin) if origin else None
        # the program description, for tools that read it beside a session (names, shapes, kernels
        # of a profile); the native library has validated the same bytes
        if isinstance(artifact, Artifact):
            self.program = artifact.program
        else:
            self.program = Artifact.from_bytes(artifact, what="artifact").program if isinstance(artifact, bytes) else Artifact.read_program(os.fspath(artifact))
        self.tensors = self.program["tensors"]
        self._can_profile = self._profiling = profile
        self.last_profile: List[dict] = []
        text = lib.rvk_session_warnings(session).decode()
        if text:
            warnings.warn(text, stacklevel=3)

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            self._lib.rvk_session_destroy(handle)
            self._handle = None

    @property
    def profiling(self) -> bool:  # type: ignore[override]
        return self._profiling

    @profiling.setter
    def profiling(self, enabled: bool) -> None:
        if self._can_profile:
            _check(self._lib.rvk_session_set_profiling(self._handle, int(bool(enabled))))
            self._profiling = bool(enabled)

    def run(self, inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
        """Run once (numpy in, numpy out); inputs are checked and converted by the library."""
        lib, handle = self._lib, self._handle
        if len(inputs) != len(self.inputs):
            raise ValueError(f"the model takes {len(self.inputs)} inputs, got {len(inputs)}")
        for i, array in enumerate(inputs):
            array = np.ascontiguousarray(array)
            shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
            _check(lib.rvk_session_set_input(handle, i, array.ctypes.data, array.nbytes, str(array.dtype).encode(), shape, array.ndim))
        _check(lib.rvk_session_run(handle))
        outputs = []
        for i, info in enumerate(self.outputs):
            out = np.empty(info["shape"], dtype=info["dtype"])
            _check(lib.rvk_session_get_output(handle, i, out.ctypes.data, out.nbytes))
            outputs.append(out)
        self._read_profile()
        return outputs

    def _read_profile(self) -> None:
        """``last_profile`` from the library after a profiled run (or the first run of a session
        that cannot profile); a timing run keeps the last profiled run's times unread: reading 56
        entries through ctypes cost mobilenet_v2 ~0.1 ms a run on the H100."""
        if not self._profiling and self.last_profile:  # (a session that cannot profile: NaN entries, read once)
            return
        lib, handle = self._lib, self._handle
        name, ms = ctypes.c_char_p(), ctypes.c_double()
        profile = []
        for i in range(lib.rvk_session_profile_count(handle)):
            _check(lib.rvk_session_profile_entry(handle, i, ctypes.byref(name), ctypes.byref(ms)))
            profile.append({"name": name.value.decode(), "ms": float(ms.value)})
        self.last_profile = profile
        self.last_device_ms = float(lib.rvk_session_device_ms(handle)) if profile else math.nan
