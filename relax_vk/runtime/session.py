"""What every runtime session shares: input checking and wall-clock timing."""

from __future__ import annotations

import time
from typing import Dict, List, Sequence

import numpy as np

from ..core.errors import LimitError


class DeviceLimitError(LimitError):
    """The device cannot hold or run the program (names the tensor or kernel and the limit)."""


def texture_limit_problems(image, max_w: int, max_h: int, max_layers: int, what: str = "image2d") -> List[str]:
    """Why an image of extents ``(W, H, L)`` does not fit (empty when it does)."""
    w, h, layers = image
    problems = []
    if w > max_w:
        problems.append(f"width {w} > {what} max width {max_w}")
    if h > max_h:
        problems.append(f"height {h} > {what} max height {max_h}")
    if layers > max_layers:
        problems.append(f"{layers} layers > max array layers {max_layers}")
    return problems


def half_arithmetic_problem(program: dict, has_half: bool, device: str, feature: str) -> None:
    """Raise :class:`DeviceLimitError` when a kernel of ``program`` computes in float16
    (``ScopeOptions(arithmetic="fp16")``) and the device lacks half arithmetic (``feature``)."""
    half = [k["name"] for k in program["kernels"] if k.get("arithmetic") == "float16"]
    if half and not has_half:
        raise DeviceLimitError(
            f"kernel {half[0]} computes in float16 (half arithmetic) and {device} lacks {feature}: rebuild it with "
            "ScopeOptions(arithmetic='fp32') (precision='fp16' still stores half texels)"
        )


class Session:
    """Base of :class:`~relax_vk.runtime.OpenCLSession` and :class:`~relax_vk.runtime.VulkanSession`:
    ``run(inputs) -> outputs`` (numpy in, numpy out), ``last_profile`` (per-step milliseconds) and
    ``last_device_ms`` (the device time of that same run, first step's start to last step's end;
    the per-step times never add up to more) and ``device_bytes`` (the device memory its tensors'
    allocations take: shared allocations counted once)."""

    program: dict
    tensors: List[dict]
    device_name: str
    last_profile: List[dict]
    last_device_ms: float = float("nan")
    device_bytes: int = 0
    profiling: bool = False  # whether run() records per-step times (time() turns it off)

    def check_inputs(self, inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
        """The inputs as the device holds them: shapes and dtypes checked (an input whose dtype the
        API cannot hold, ``host_dtype``, is converted to the device dtype here)."""
        ids = self.program["inputs"]
        if len(inputs) != len(ids):
            raise ValueError(f"the model takes {len(ids)} inputs, got {len(inputs)}")
        out = []
        for tid, array in zip(ids, inputs):
            t = self.tensors[tid]
            array = np.asarray(array)
            if list(array.shape) != t["shape"]:
                raise ValueError(f"input {t['name']}: shape {list(array.shape)}, expected {t['shape']}")
            host = t.get("host_dtype", t["dtype"])
            if str(array.dtype) not in (host, t["dtype"]):
                raise ValueError(f"input {t['name']}: dtype {array.dtype}, expected {host}")
            if str(array.dtype) != t["dtype"]:
                converted = array.astype(t["dtype"])
                if np.issubdtype(array.dtype, np.integer) and not np.array_equal(converted, array):
                    raise ValueError(f"input {t['name']}: {host} values outside the {t['dtype']} range the device holds them in")
                array = converted
            out.append(array)
        return out

    def to_host(self, tid: int, array: np.ndarray) -> np.ndarray:
        """An output as the model declares it (converted back from its device dtype)."""
        host = self.tensors[tid].get("host_dtype")
        return array.astype(host) if host else array

    def read_tensor(self, tid: int) -> np.ndarray:
        """Tensor ``tid`` as the device holds it now (its device layout and dtype; half texels
        read back as the tensor's dtype). After a run, an intermediate holds its value only in an
        artifact built without storage reuse (``relax-vk bisect`` reads them so)."""
        return self._read(tid)

    def run(self, inputs: Sequence[np.ndarray]) -> List[np.ndarray]:  # pragma: no cover - abstract
        raise NotImplementedError

    def time(self, inputs: Sequence[np.ndarray], repeat: int = 10) -> Dict[str, float]:
        """Wall-clock latency of ``run`` over ``repeat`` runs (after one warm-up run), unprofiled:
        the runs record no per-step times and keep the last profiled run's."""
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


def step_times(names: Sequence[str], begins: Sequence[int], ends: Sequence[int]) -> "tuple[List[dict], float]":
    """Per-step milliseconds and the run's device span from nanosecond timestamps.

    A step's time is what it added to the device timeline: from its start, or from the previous
    step's end if that came later (a driver may stamp a step's start before the previous step has
    drained), to its end. The times therefore tile the span and never sum to more than it, which
    raw ``end - begin`` pairs do not guarantee (NVIDIA's Vulkan driver stamps a pass's beginning
    at the top of the pipe, so consecutive pairs overlap). Each step also says where it started
    (``start_ms``, from the first step's start): what lies between one step's end and the next
    one's start is device idle time, part of the span and of no step."""
    profile, last_end = [], None
    for name, b, e in zip(names, begins, ends):
        start = b if last_end is None else max(int(b), last_end)
        e = max(int(e), start)
        # (start_ms: from the run's first step; a gap before it is device idle time)
        profile.append({"name": name, "ms": (e - start) * 1e-6, "start_ms": (start - int(begins[0])) * 1e-6})
        last_end = e
    span = (last_end - int(begins[0])) * 1e-6 if profile else 0.0
    return profile, span
