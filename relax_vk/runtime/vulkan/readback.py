"""Reading a Vulkan run's outputs back: a mappable buffer per output that the run's last commands
copy the output into (:class:`Readback`), and the wait for the GPU that maps them (:func:`mapping`).

wgpu-py's ``map_sync`` submits an empty command buffer first and then waits on a promise that
its per-device polling thread resolves, two thread hand-offs per map. Where wgpu-py runs on
wgpu-native, :class:`NativeMapping` maps through wgpu-native's C calls and polls the device from the
calling thread instead: for up to ``spin_ms`` without blocking, then blocking. The copies are
in the submitted command buffer, so no extra submission is needed to see them.

Where the recent waits were longer than the polling budget, a wait sleeps first, until shortly
before the GPU should be done (:func:`sleep_before_polling`): a long run then costs the host the budget
at most, spent where it shortens the wait, and not at the start of the wait, where it buys nothing.
"""

from __future__ import annotations

import time
from collections import deque
from typing import List, Sequence

import numpy as np

from ...storage.lifetimes import texel_dtype

#: the longest a mapping may take before a run gives up on the device (seconds)
MAP_TIMEOUT_S = 60.0
#: how many of the last waits the next wait's sleep is estimated from (their shortest)
WAITS_KEPT = 8


def sleep_before_polling(wait_s: "float | None", spin_s: float) -> float:
    """Seconds a wait sleeps before it polls, given ``wait_s``, the shortest of the last
    :data:`WAITS_KEPT` waits (each from the start of the wait to the outputs mapped): that less a
    margin of a tenth of it, at least 0.2 ms and at most the polling budget ``spin_s``; 0 without
    a last wait, without a budget, or where the budget covers the whole wait.

    The shortest, not the last: one slow run (a stall, a clock change) does not make the next
    eight sleep past their end. A run that ends during the sleep is seen late by the rest of the
    sleep, and its wait (the sleep) becomes the new shortest, so the estimate falls by the margin
    per run while the GPU is faster than it; a run that ends after it is polled for, then blocked
    for, and costs the host at most the budget."""
    if wait_s is None or spin_s <= 0 or wait_s <= spin_s:
        return 0.0
    return wait_s - min(spin_s, max(0.1 * wait_s, 2e-4))


#: a mapping callback's user data: (its map() call's number modulo _CALLS) * _PER_CALL + buffer index
_PER_CALL, _CALLS = 1 << 16, 1 << 15


def words(nbytes) -> int:
    """``nbytes`` rounded up to whole 32-bit words (buffer sizes and ranges)."""
    return -(-int(nbytes) // 4) * 4


class Readback:
    """An output's mappable copy: :meth:`copy` records the copy of output tensor ``tid`` into it
    (rows padded to WebGPU's 256-byte copy alignment for a texture); once it is mapped,
    :meth:`read` returns the tensor in its texel dtype and shape and unmaps it. ``buffer`` is
    ``None`` for a tensor of no elements."""

    def __init__(self, session, tid: int):
        wgpu = session.wgpu
        self.tid = tid
        # (the output's memory object and offset, not the session: no reference cycle keeps a
        # dropped session's device memory alive until Python's cycle collector runs)
        self.source, self.offset = session.memory[tid], session.offsets[tid]
        t = self.tensor = session.tensors[tid]
        self.stored = np.dtype(texel_dtype(t))
        self.buffer = None
        if not t["bytes"]:
            return
        if t["image"]:
            w, h, layers = t["image"]
            self.row = 4 * self.stored.itemsize * w
            self.padded_row = -(-self.row // 256) * 256
            size = self.padded_row * h * layers
        else:
            size = words(t["bytes"])
        self.buffer = session.device.create_buffer(size=size, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)

    def copy(self, encoder) -> None:
        if self.buffer is None:
            return
        t = self.tensor
        if t["image"]:
            w, h, layers = t["image"]
            encoder.copy_texture_to_buffer(
                {"texture": self.source, "mip_level": 0, "origin": (0, 0, 0)},
                {"buffer": self.buffer, "offset": 0, "bytes_per_row": self.padded_row, "rows_per_image": h},
                (w, h, layers),
            )
        else:
            encoder.copy_buffer_to_buffer(self.source, self.offset, self.buffer, 0, self.buffer.size)

    def read(self, mapping: "Mapping") -> np.ndarray:
        """The output, its buffer mapped by ``mapping.map`` (unmapped here)."""
        t = self.tensor
        if self.buffer is None:
            return np.zeros(t["shape"], dtype=t["dtype"])
        try:
            raw = np.frombuffer(mapping.view(self.buffer), dtype=np.uint8)
            if t["image"]:
                raw = raw.reshape(-1, self.padded_row)[:, : self.row]
            nbytes = int(np.prod(t["shape"])) * self.stored.itemsize
            # (astype copies: nothing refers to the mapped memory after the unmap)
            return np.ascontiguousarray(raw).reshape(-1)[:nbytes].view(self.stored).reshape(t["shape"]).astype(t["dtype"], copy=True)
        finally:
            mapping.unmap(self.buffer)


class Mapping:
    """Maps readback buffers through wgpu-py: ``map(buffers)`` returns once every buffer is mapped
    for reading (the GPU done writing it), ``view(buffer)`` is its mapped bytes and ``unmap``
    ends the mapping. ``adaptive=False`` (a profiled run, slower than the runs it would predict):
    the wait neither sleeps first nor counts among the recent waits."""

    def map(self, buffers: Sequence, adaptive: bool = True) -> None:
        for b in buffers:
            b.map_sync("READ")

    def view(self, buffer) -> memoryview:
        return buffer.read_mapped(copy=False)

    def unmap(self, buffer) -> None:
        buffer.unmap()


class _Calls:
    """The number of the last ``map()`` call and its buffers' statuses, shared with the callback."""

    def __init__(self) -> None:
        self.call = 0
        self.statuses: List[int] = []


class NativeMapping(Mapping):
    """:class:`Mapping` through wgpu-native's C calls, the device polled from the calling thread:
    without blocking for up to ``spin_ms``, then blocking."""

    def __init__(self, device, spin_ms: float = 0.0):
        from wgpu.backends.wgpu_native import _api
        from wgpu.backends.wgpu_native._helpers import get_wgpu_instance

        self.lib, self.ffi = lib, ffi = _api.lib, _api.ffi
        self.device, self.instance, self.spin_ms = device._internal, get_wgpu_instance(), spin_ms
        self.waits_s: "deque[float]" = deque(maxlen=WAITS_KEPT)  # the last unprofiled waits (sleep_before_polling)
        # per map() call: its number and its buffers' statuses (0 pending, 1 mapped, -1 failed); a
        # callback of an earlier call (a map abandoned by an error) finds another number and is ignored
        state = self.state = _Calls()

        @ffi.callback("void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)")
        def on_mapped(status, _message, userdata1, _userdata2):
            call, i = divmod(int(ffi.cast("intptr_t", userdata1)), _PER_CALL)
            if call == state.call % _CALLS:
                state.statuses[i] = 1 if status == lib.WGPUMapAsyncStatus_Success else -1

        self._on_mapped = on_mapped  # (kept alive with the mapping)

    def map(self, buffers: Sequence, adaptive: bool = True) -> None:
        lib, ffi, state = self.lib, self.ffi, self.state
        if len(buffers) >= _PER_CALL:
            raise ValueError(f"{len(buffers)} outputs to read back; at most {_PER_CALL - 1}")
        state.call += 1
        statuses = state.statuses = [0] * len(buffers)
        for i, b in enumerate(buffers):
            info = ffi.new("WGPUBufferMapCallbackInfo *")
            info.mode = lib.WGPUCallbackMode_AllowSpontaneous
            info.callback = self._on_mapped
            info.userdata1 = ffi.cast("void *", (state.call % _CALLS) * _PER_CALL + i)
            lib.wgpuBufferMapAsync(b._internal, lib.WGPUMapMode_Read, 0, b.size, info[0])
        start = time.perf_counter()
        sleep = sleep_before_polling(min(self.waits_s, default=None), self.spin_ms * 1e-3) if adaptive else 0.0
        if sleep > 0:
            time.sleep(sleep)
        spin_until = time.perf_counter() + self.spin_ms * 1e-3
        problem = None
        while 0 in statuses:
            block = time.perf_counter() >= spin_until
            lib.wgpuDevicePoll(self.device, block, ffi.NULL)
            if 0 in statuses:
                lib.wgpuInstanceProcessEvents(self.instance)
            if block and 0 in statuses and time.perf_counter() - start > MAP_TIMEOUT_S:
                problem = f"the device did not finish within {MAP_TIMEOUT_S:.0f} s"
                break
        if problem or -1 in statuses:  # (every buffer unmapped, pending maps cancelled: the next run can copy into them)
            for b in buffers:
                lib.wgpuBufferUnmap(b._internal)
            raise RuntimeError(f"reading the outputs: {problem or 'mapping a readback buffer failed'}")
        if adaptive:
            self.waits_s.append(time.perf_counter() - start)

    def view(self, buffer) -> memoryview:
        pointer = self.lib.wgpuBufferGetConstMappedRange(buffer._internal, 0, buffer.size)
        return memoryview(self.ffi.buffer(pointer, buffer.size))

    def unmap(self, buffer) -> None:
        self.lib.wgpuBufferUnmap(buffer._internal)


def mapping(device, spin_ms: float = 0.0) -> Mapping:
    """A :class:`NativeMapping` where wgpu-py runs on wgpu-native, else a :class:`Mapping`."""
    try:
        import wgpu.backends.wgpu_native._api  # noqa: F401
    except ImportError:  # pragma: no cover - another wgpu backend
        return Mapping()
    return NativeMapping(device, spin_ms) if hasattr(device, "_internal") else Mapping()
