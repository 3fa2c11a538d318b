"""A model loaded on one device: the binding of the native library's ``rvk_session``.

:class:`Session` moves numpy arrays across the C ABI and nothing else: the library validates the
artifact, opens the device, places the storage, builds the kernels, checks and converts inputs and
outputs, runs and profiles.
"""

from __future__ import annotations

import ctypes
import math
import os
import time
import warnings
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from ..serialization.artifact import Artifact, variant_artifact
from .devices import Device
from .library import TensorInfo, check, library

PROFILE = 1  # RVK_SESSION_PROFILE
SHADER_CHECKS = {"bounds": 0, "loops": 2, "none": 4}  # RVK_SESSION_SHADER_CHECKS_*


@dataclass(frozen=True)
class BuildInfo:
    """How the session's program was made (``rvk_session_program_origin``). OpenCL: ``"binary"``
    (the program-binary cache's, verified), ``"source"`` (built, binary stored), ``"source (cache
    off)"``, or ``"driver cache at FOLDER"`` where the driver caches its programs itself (pocl, unless
    ``POCL_KERNEL_CACHE`` is off); Vulkan: ``"driver cache at FOLDER"`` or ``"source (...)"`` with the
    reason there is none."""

    origin: str


def _open(lib, artifact: Union[str, os.PathLike, bytes, Artifact], what: str = "artifact") -> ctypes.c_void_p:
    """An ``rvk_artifact`` handle of ``artifact`` (a path, the file's bytes or an :class:`Artifact`),
    parsed and validated by the library; the caller destroys it."""
    if isinstance(artifact, Artifact):
        artifact = artifact.to_bytes()
    handle = ctypes.c_void_p()
    if isinstance(artifact, bytes):
        check(lib.rvk_artifact_open_memory(artifact, len(artifact), what.encode(), ctypes.byref(handle)))
    else:
        check(lib.rvk_artifact_open_file(os.fsencode(artifact), ctypes.byref(handle)))
    return handle


def _whole(artifact: Union[str, os.PathLike, bytes, Artifact]) -> Artifact:
    """``artifact`` (a path, the file's bytes or an :class:`Artifact`) as an :class:`Artifact`."""
    if isinstance(artifact, Artifact):
        return artifact
    return Artifact.from_bytes(artifact, what="artifact") if isinstance(artifact, bytes) else Artifact.read(os.fspath(artifact))


def validate(artifact: Union[str, os.PathLike, bytes, Artifact], what: str = "artifact") -> None:
    """Raise :class:`~relax_vk.serialization.artifact.ArtifactError` unless ``artifact`` (a path,
    the file's bytes or an :class:`Artifact`) is complete and consistent, as the library checks it
    before anything runs (no device is opened): the one artifact validator, what every load does."""
    lib = library()
    lib.rvk_artifact_destroy(_open(lib, artifact, what))


def _info(fn, handle, index: int, target: str) -> dict:
    info = TensorInfo()
    check(fn(handle, index, ctypes.byref(info)), target)
    return {"name": info.name.decode(), "dtype": info.dtype.decode(), "device_dtype": info.device_dtype.decode(),
            "shape": [int(v) for v in info.shape[: info.rank]]}  # fmt: skip


def _dim_rows(lib, handle, target: str) -> List[tuple]:
    """``(name, min, max, value in the last run)`` of each run-time dim (``rvk_session_dim_info``)."""
    name, lo, hi, value = ctypes.c_char_p(), ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
    rows = []
    for i in range(lib.rvk_session_dim_count(handle)):
        check(lib.rvk_session_dim_info(handle, i, ctypes.byref(name), ctypes.byref(lo), ctypes.byref(hi), ctypes.byref(value)), target)
        rows.append((name.value.decode(), int(lo.value), int(hi.value), int(value.value)))
    return rows


class Session:
    """A program loaded by the native library on one device.

    ``run(inputs) -> outputs`` (numpy in, numpy out, in the model's dtypes); ``time(inputs)``
    (unprofiled wall-clock latency); with ``profile=True``, ``last_profile`` (per-step
    milliseconds of the last profiled run, ``{"name", "ms", "start_ms"}``) and ``last_device_ms`` (that run's
    device span: the steps' times never add up to more); ``device_bytes`` (the device memory the
    tensors' allocations take, shared allocations counted once); ``device_objects`` (the device
    memory objects made since load: runs make none); ``device_name``; ``build_info`` (where the
    program came from: OpenCL's binary cache, or the Vulkan drivers' cache); ``buffer_binding``
    (OpenCL: ``"svm"``, arenas in shared virtual memory and their tensors passed to kernels by
    address, or ``"memory objects"``; Vulkan: ``"bind groups"``); ``program`` and
    ``tensors`` (the artifact's program description, for tools).

    A model built with run-time dims (``dims``: ``{name: (min, max)}``) runs at any input shape in
    those ranges: ``inputs``/``outputs`` show such an axis as -1, ``run`` returns each output at the
    run's shape, and ``dim_values`` holds the last run's dims. Built with shape variants, a run at a
    variant's dims runs that build (``variant`` names it); ``device_bytes`` counts every variant's."""

    def __init__(self, artifact: Union[str, os.PathLike, bytes, Artifact], device: "str | Device | None" = None, profile: bool = False,
                 shader_checks: Optional[str] = None):  # fmt: skip
        """``artifact``: a path, the file's bytes or an :class:`Artifact`; ``device``: a spec
        (:mod:`relax_vk.runtime.devices`) or a :class:`~relax_vk.runtime.devices.Device`;
        ``profile``: record per-step device times on every run (a profiling queue or timestamp
        queries: slower runs); ``shader_checks`` (Vulkan): wgpu's runtime checks in the shaders,
        ``"bounds"`` (None, the default), ``"loops"`` or ``"none"``."""
        lib = self._lib = library()
        self._handle = None
        if shader_checks is not None and shader_checks not in SHADER_CHECKS:
            raise ValueError(f"shader checks must be one of {', '.join(SHADER_CHECKS)}, not {shader_checks!r}")
        if isinstance(device, Device):
            device = device.index
        elif device is not None and not isinstance(device, str):
            raise TypeError(f"a device is a spec string ('pocl', 'lavapipe', 'gpu', 'P:D', an index) or a Device, not {type(device).__name__}")
        flags = (PROFILE if profile else 0) | SHADER_CHECKS[shader_checks or "bounds"]
        handle = _open(lib, artifact)
        self.target = target = lib.rvk_artifact_target(handle).decode()
        session = ctypes.c_void_p()
        try:
            check(lib.rvk_session_create(handle, device.encode() if device else None, flags, ctypes.byref(session)), target)
        finally:
            lib.rvk_artifact_destroy(handle)  # the session keeps what it needs
        self._handle = session
        self.inputs = [_info(lib.rvk_session_input_info, session, i, target) for i in range(lib.rvk_session_input_count(session))]
        self.outputs = [_info(lib.rvk_session_output_info, session, i, target) for i in range(lib.rvk_session_output_count(session))]
        self.dims = {name: (lo, hi) for name, lo, hi, _ in _dim_rows(lib, session, target)}
        self._output_layout = [(tuple(o["shape"]), np.dtype(o["dtype"])) for o in self.outputs]
        # the ctypes shape and dtype arguments of each input as declared (a run passes them as they are)
        self._input_args = [self._input_arg(tuple(i["shape"]), np.dtype(i["dtype"])) for i in self.inputs]
        self.device_name = lib.rvk_session_device_name(session).decode()
        self.device_bytes = int(lib.rvk_session_device_bytes(session))
        origin = lib.rvk_session_program_origin(session).decode()
        self.build_info = BuildInfo(origin) if origin else None
        self.buffer_binding = lib.rvk_session_buffer_binding(session).decode()
        self._artifact = artifact
        self._program: Optional[dict] = None
        self._variant_programs: Dict[int, dict] = {}
        self._can_profile = self._profiling = bool(profile)
        self.last_profile: List[dict] = []
        self.last_device_ms = math.nan
        text = lib.rvk_session_warnings(session).decode()
        if text:
            warnings.warn(text, stacklevel=3)

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            self._lib.rvk_session_destroy(handle)
            self._handle = None

    @property
    def program(self) -> dict:
        """The artifact's program description (read from the artifact on first use; the library has validated the same bytes)."""
        if self._program is None:
            a = self._artifact  # (a file's program alone, not its constants)
            self._program = _whole(a).program if isinstance(a, (bytes, Artifact)) else Artifact.read_program(os.fspath(a))
        return self._program

    @property
    def tensors(self) -> List[dict]:
        return self.program["tensors"]

    @property
    def profiling(self) -> bool:
        """Whether runs record per-step times (only a session loaded with ``profile=True`` can)."""
        return self._profiling

    @profiling.setter
    def profiling(self, enabled: bool) -> None:
        if self._can_profile:
            check(self._lib.rvk_session_set_profiling(self._handle, int(bool(enabled))), self.target)
            self._profiling = bool(enabled)

    @property
    def device_objects(self) -> int:
        """Device memory objects the session has created since it was loaded (all at load: runs add none)."""
        return int(self._lib.rvk_session_device_objects(self._handle))

    def run(self, inputs: Union[Sequence[np.ndarray], Mapping[str, np.ndarray]]) -> List[np.ndarray]:
        """Run once: numpy in (checked and converted by the library), numpy out. ``inputs`` in the
        model's input order, or by name (``{"x": array}``, as onnxruntime takes them)."""
        lib, handle, target = self._lib, self._handle, self.target
        inputs = self._ordered(inputs)
        if len(inputs) != len(self.inputs):
            raise ValueError(f"the model takes {len(self.inputs)} inputs, got {len(inputs)}")
        set_input = lib.rvk_session_set_input
        for i, array in enumerate(inputs):
            array = np.asarray(array, order="C")  # (not ascontiguousarray: it makes a 0-d scalar 1-d)
            args = self._input_args[i]
            if (array.shape, array.dtype) != args[0]:  # another shape or dtype: the library says whether it takes it
                args = self._input_arg(array.shape, array.dtype)
            status = set_input(handle, i, array.ctypes.data, array.nbytes, args[2], args[1], len(array.shape))
            if status:
                check(status, target)
        status = lib.rvk_session_run(handle)
        if status:
            check(status, target)
        outputs = []
        get_output = lib.rvk_session_get_output
        for i, (shape, dtype) in enumerate(self._output_layout):
            if self.dims:  # each run's own output shapes
                shape = tuple(_info(lib.rvk_session_output_info, handle, i, target)["shape"])
            out = np.empty(shape, dtype=dtype)
            status = get_output(handle, i, out.ctypes.data, out.nbytes)
            if status:
                check(status, target)
            outputs.append(out)
        if self._profiling:
            self._read_profile()
        return outputs

    def _ordered(self, inputs) -> Sequence:
        """``inputs`` as a sequence in the model's order: a mapping is read by input name (every
        input named once, no other name), a lone array or a string is refused with what was meant."""
        if isinstance(inputs, Mapping):
            names = [i["name"] for i in self.inputs]
            unknown = [k for k in inputs if k not in names]
            missing = [n for n in names if n not in inputs]
            if unknown or missing:
                raise ValueError(f"the model's inputs are {names}; " + "; ".join(
                    ([f"unknown {unknown}"] if unknown else []) + ([f"missing {missing}"] if missing else [])))
            return [inputs[n] for n in names]
        if isinstance(inputs, (np.ndarray, str, bytes)):
            raise TypeError(f"inputs are a list of arrays in the model's order or a dict by name "
                            f"({[i['name'] for i in self.inputs]}), not a {type(inputs).__name__}")
        return inputs

    @staticmethod
    def _input_arg(shape: tuple, dtype: np.dtype) -> tuple:
        """``((shape, dtype), ctypes shape array, dtype name)`` for ``rvk_session_set_input``."""
        return (shape, dtype), (ctypes.c_int64 * max(len(shape), 1))(*shape), str(dtype).encode()

    def reset_states(self) -> None:
        """Zero the model's states (a new sequence: a language model's key/value cache). A model with
        states (:mod:`relax_vk.core.states`) keeps them on the device between runs; ``inputs`` and
        ``outputs`` leave them out, and ``states`` names them."""
        check(self._lib.rvk_session_reset_states(self._handle), self.target)

    @property
    def states(self) -> List[str]:
        """The names of the model's states (``[]`` when it has none)."""
        tensors = self.tensors
        return [tensors[s["tensor"]]["name"] for s in self.program.get("states", [])]

    @property
    def dim_values(self) -> Dict[str, int]:
        """The run-time dims' values in the last run (-1 before the first)."""
        return {name: value for name, _, _, value in _dim_rows(self._lib, self._handle, self.target)}

    @property
    def variant(self) -> Optional[Dict[str, int]]:
        """The dims of the shape variant the last run ran (a model built with ``specialize``:
        :mod:`relax_vk.codegen.shape_variants`), or None when it ran the program itself (or no run yet)."""
        index = int(self._lib.rvk_session_variant(self._handle))
        return None if index < 0 else dict(self.program["variants"][index]["dims"])

    @property
    def last_program(self) -> dict:
        """The program the last run ran: ``program``, or the shape variant's that ran (its steps are
        what ``last_profile`` times)."""
        index = int(self._lib.rvk_session_variant(self._handle))
        if index < 0:
            return self.program
        if index not in self._variant_programs:
            self._variant_programs[index] = variant_artifact(_whole(self._artifact), index).program
        return self._variant_programs[index]

    def _read_profile(self) -> None:
        lib, handle = self._lib, self._handle
        name, ms, start = ctypes.c_char_p(), ctypes.c_double(), ctypes.c_double()
        profile = []
        for i in range(lib.rvk_session_profile_count(handle)):
            check(lib.rvk_session_profile_entry(handle, i, ctypes.byref(name), ctypes.byref(ms)), self.target)
            check(lib.rvk_session_profile_start(handle, i, ctypes.byref(start)), self.target)
            profile.append({"name": name.value.decode(), "ms": float(ms.value), "start_ms": float(start.value)})
        self.last_profile = profile
        self.last_device_ms = float(lib.rvk_session_device_ms(handle)) if profile else math.nan

    def time(self, inputs: Union[Sequence[np.ndarray], Mapping[str, np.ndarray]], repeat: int = 10) -> Dict[str, float]:
        """Wall-clock milliseconds of ``run`` over ``repeat`` unprofiled runs after one warm-up run
        (``median``, ``min``, ``max``); the last profiled run's times stay as they were."""
        if repeat < 1:
            raise ValueError(f"repeat {repeat}: at least 1 run is timed")
        profiling, self.profiling = self.profiling, False
        try:
            self.run(inputs)
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                self.run(inputs)
                times.append((time.perf_counter() - start) * 1e3)
        finally:
            self.profiling = profiling
        return {"median": float(np.median(times)), "min": float(np.min(times)), "max": float(np.max(times))}

    def read_tensor(self, tid: int) -> np.ndarray:
        """Tensor ``tid`` of the program as the device holds it now: its device layout and dtype
        (half texels read back as the tensor's dtype). After a run an intermediate holds its value
        only in an artifact built without storage reuse (``relax-vk bisect`` reads them so)."""
        t = self.tensors[tid]
        shape = t["shape"] if "shape_expr" not in t else _info(self._lib.rvk_session_tensor_info, self._handle, tid, self.target)["shape"]
        if any(d < 0 for d in shape):
            raise ValueError(f"tensor {t['name']}: its shape depends on run-time dims and the session has not run yet")
        out = np.empty(shape, dtype=t["dtype"])
        check(self._lib.rvk_session_read_tensor(self._handle, tid, out.ctypes.data, out.nbytes), self.target)
        return out
