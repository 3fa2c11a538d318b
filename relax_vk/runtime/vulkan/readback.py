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
        self.session, self.tid = session, tid
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
        s, t = self.session, self.tensor
        if t["image"]:
            w, h, layers = t["image"]
            encoder.copy_texture_to_buffer(
                {"texture": s.memory[self.tid], "mip_level": 0, "origin": (0, 0, 0)},
                {"buffer": self.buffer, "offset": 0, "bytes_per_row": self.padded_row, "rows_per_image": h},
                (w, h, layers),
            )
        else:
            encoder.copy_buffer_to_buffer(s.memory[self.tid], s.offsets[self.tid], self.buffer, 0, self.buffer.size)

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


class NativeMapping(Mapping):
    """:class:`Mapping` through wgpu-native's C calls, the device polled from the calling thread:
    without blocking for up to ``spin_ms``, then blocking."""

    def __init__(self, device, spin_ms: float = 0.0):
        from wgpu.backends.wgpu_native import _api
        from wgpu.backends.wgpu_native._helpers import get_wgpu_instance

        self.lib, self.ffi = lib, ffi = _api.lib, _api.ffi
        self.device, self.instance, self.spin_ms = device._internal, get_wgpu_instance(), spin_ms
        self.statuses: List[int] = []
        statuses = self.statuses

        @ffi.callback("void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)")
        def on_mapped(status, _message, userdata1, _userdata2):
            statuses[int(ffi.cast("intptr_t", userdata1))] = 1 if status == lib.WGPUMapAsyncStatus_Success else -1

        self._on_mapped = on_mapped  # (kept alive with the mapping)

    def map(self, buffers: Sequence) -> None:
        lib, ffi, statuses = self.lib, self.ffi, self.statuses
        statuses[:] = [0] * len(buffers)
        for i, b in enumerate(buffers):
            info = ffi.new("WGPUBufferMapCallbackInfo *")
            info.mode = lib.WGPUCallbackMode_AllowSpontaneous
            info.callback = self._on_mapped
            info.userdata1 = ffi.cast("void *", i)
            lib.wgpuBufferMapAsync(b._internal, lib.WGPUMapMode_Read, 0, b.size, info[0])
        start = time.perf_counter()
        spin_until = start + self.spin_ms * 1e-3
        while 0 in statuses:
            block = time.perf_counter() >= spin_until
            lib.wgpuDevicePoll(self.device, block, ffi.NULL)
            if 0 in statuses:
                lib.wgpuInstanceProcessEvents(self.instance)
            if block and 0 in statuses and time.perf_counter() - start > MAP_TIMEOUT_S:
                raise RuntimeError(f"reading the outputs: the device did not finish within {MAP_TIMEOUT_S:.0f} s")
        if -1 in statuses:  # (the others unmapped, so the next run can copy into them)
            for b, status in zip(buffers, statuses):
                if status == 1:
                    lib.wgpuBufferUnmap(b._internal)
            raise RuntimeError("reading the outputs: mapping a readback buffer failed")

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
