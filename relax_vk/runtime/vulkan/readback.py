"""Reading a Vulkan run's outputs back: a mappable buffer per output that the run's last commands
copy the output into (:class:`Readback`), and the wait for the GPU that maps them (:func:`mapping`).

wgpu-py's ``map_sync`` submits an empty command buffer first and then waits on a promise that
its per-device polling thread resolves, two thread hand-offs per map. Where wgpu-py runs on
wgpu-native, :class:`NativeMapping` maps through wgpu-native's C calls and polls the device from the
calling thread instead: for up to ``spin_ms`` without blocking, then blocking. The copies are
in the submitted command buffer, so no extra submission is needed to see them.
"""

from __future__ import annotations

import time
from typing import List, Sequence

import numpy as np

from ...storage.lifetimes import texel_dtype

#: the longest a mapping may take before a run gives up on the device (seconds)
MAP_TIMEOUT_S = 60.0
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
    ends the mapping."""

    def map(self, buffers: Sequence) -> None:
        for b in buffers:
            b.map_sync("READ")

    def view(self, buffer) -> memoryview:
        return buffer.read_mapped(copy=False)

    def unmap(self, buffer) -> None:
        buffer.unmap()


class _Calls:
    call: int = 0
    statuses: List[int] = []


class NativeMapping(Mapping):
    """:class:`Mapping` through wgpu-native's C calls, the device polled from the calling thread:
    without blocking for up to ``spin_ms``, then blocking."""

    def __init__(self, device, spin_ms: float = 0.0):
        from wgpu.backends.wgpu_native import _api
        from wgpu.backends.wgpu_native._helpers import get_wgpu_instance

        self.lib, self.ffi = lib, ffi = _api.lib, _api.ffi
        self.device, self.instance, self.spin_ms = device._internal, get_wgpu_instance(), spin_ms
        # per map() call: its number and its buffers' statuses (0 pending, 1 mapped, -1 failed); a
        # callback of an earlier call (a map abandoned by an error) finds another number and is ignored
        state = self.state = _Calls()

        @ffi.callback("void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)")
        def on_mapped(status, _message, userdata1, _userdata2):
            call, i = divmod(int(ffi.cast("intptr_t", userdata1)), _PER_CALL)
            if call == state.call % _CALLS:
                state.statuses[i] = 1 if status == lib.WGPUMapAsyncStatus_Success else -1

        self._on_mapped = on_mapped  # (kept alive with the mapping)

    def map(self, buffers: Sequence) -> None:
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
        spin_until = start + self.spin_ms * 1e-3
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
