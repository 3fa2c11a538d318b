"""Run an ``.rvk`` program on an OpenCL device with pyopencl.

Texture-scoped tensors are real ``image2d_array`` objects (RGBA, float32) whose extents come from
the scope's flattening; buffers are ``cl.Buffer``; copies between scopes use the OpenCL
buffer<->image copy commands (a packed tensor's dense bytes are exactly its image's texels in
layer/row/column order for all three mappings, so no kernel is needed); constants are uploaded once
when the session is created, and every allocation of the program's storage assignment
(:mod:`relax_vk.storage`: intermediates whose lifetimes do not overlap share an image, or sit
at offsets of one buffer arena, bound as sub-buffers) is made then too, so runs allocate nothing.
An arena offset the device cannot bind (its ``CL_DEVICE_MEM_BASE_ADDR_ALIGN`` is coarser than the
artifact's alignment) gets a buffer of its own instead: more memory, the same results
(:func:`relax_vk.storage.program.device_placement`). Before anything is allocated the plan is
checked against the device's real limits (image support, image2d max width/height, max array layers, work-group size); a violation
raises :class:`DeviceLimitError` naming the tensor or kernel, its extents and the limit.
"""

from __future__ import annotations

import time
import warnings
from typing import List, Optional, Sequence

import numpy as np

from ...serialization.artifact import Artifact
from ...core.limits import device_name
from ...storage import allocated_bytes
from ...storage.program import device_placement
from ...storage.lifetimes import texel_dtype
from ...storage.program import with_float_texels
from .copies import TexelCopies
from ..session import DeviceLimitError, Session, half_arithmetic_problem, step_times, texture_limit_problems
from . import binary_cache
from .compiler import describe


def check_limits(program: dict, device) -> None:
    """Raise :class:`DeviceLimitError` for the first tensor or kernel the device cannot handle."""
    half_arithmetic_problem(program, "cl_khr_fp16" in device.extensions.split(), describe(device), "cl_khr_fp16")
    textures = [t for t in program["tensors"] if t["image"]]
    if textures and not device.image_support:
        raise DeviceLimitError(f"{describe(device)} has no image support; the plan keeps {textures[0]['name']} in a texture")
    max_w, max_h = (int(device.image2d_max_width), int(device.image2d_max_height)) if device.image_support else (0, 0)
    max_layers = int(device.image_max_array_size) if device.image_support else 0
    for t in textures:
        w, h, layers = t["image"]
        problems = texture_limit_problems(t["image"], max_w, max_h, max_layers)
        if problems:
            raise DeviceLimitError(
                f"tensor {t['name']} ({t['scope']}, image {w}x{h}x{layers}) does not fit {describe(device)}: " + "; ".join(problems)
            )
        if t["dtype"] != "float32":
            raise DeviceLimitError(f"tensor {t['name']}: {t['dtype']} textures are not supported by this runtime (float32 only)")
    alloc, memory = int(device.max_mem_alloc_size), int(device.global_mem_size)
    for t in program["tensors"]:
        if not t["image"] and int(t["bytes"]) > alloc:
            raise DeviceLimitError(f"tensor {t['name']} takes {t['bytes']} bytes; {describe(device)} allocates at most {alloc} bytes at once")
    total = allocated_bytes(program)
    if total > memory:
        raise DeviceLimitError(f"the program needs {total} bytes; {describe(device)} has {memory} bytes of global memory")
    max_group = int(device.max_work_group_size)
    for k in program["kernels"]:
        group = int(np.prod(k["local"]))
        if group > max_group:
            raise DeviceLimitError(f"kernel {k['name']} needs work groups of {group} items; {describe(device)} allows {max_group}")


def half_images(context) -> bool:
    """Whether the context's device has RGBA ``CL_HALF_FLOAT`` 2D image arrays."""
    import pyopencl as cl

    try:
        formats = cl.get_supported_image_formats(context, cl.mem_flags.READ_WRITE, cl.mem_object_type.IMAGE2D_ARRAY)
    except cl.Error:
        return False
    return any(f.channel_order == cl.channel_order.RGBA and f.channel_data_type == cl.channel_type.HALF_FLOAT for f in formats)


class OpenCLSession(Session):
    """A loaded program on one device: memory allocated, kernels built, constants uploaded."""

    def __init__(self, artifact: Artifact, device, profile: bool = True, cache_dir=None):
        import pyopencl as cl

        self.cl = cl
        self.artifact = artifact
        self.program = artifact.program
        self.device = device
        self.device_name = device_name(device)
        self.context = cl.Context([device])
        if any(t.get("texel") == "float16" for t in self.program["tensors"]) and not half_images(self.context):
            warnings.warn(f"{describe(device)} has no half-float images: textures stored as float32 instead (twice the memory)", stacklevel=2)
            self.program = with_float_texels(self.program)
        check_limits(self.program, device)  # (what is allocated: after the fallback)
        self.copies = TexelCopies(cl, self.context)
        props = cl.command_queue_properties.PROFILING_ENABLE if profile else 0
        self.queue = cl.CommandQueue(self.context, properties=props)
        # timed runs (:meth:`time`) go through a queue without profiling: a profiling queue costs
        # every launch host time (NVIDIA's: about as much as the launch itself)
        self.timing_queue = cl.CommandQueue(self.context) if profile else self.queue
        self.profiling = profile
        t0 = time.perf_counter()
        built, self.build_info = binary_cache.build(self.context, device, artifact.source, cache_dir=cache_dir,
                                                    required=[k["name"] for k in self.program["kernels"]])  # fmt: skip
        self.build_seconds = time.perf_counter() - t0
        self.kernels = {k["name"]: (cl.Kernel(built, k["name"]), tuple(k["global"]), tuple(k["local"])) for k in self.program["kernels"]}
        self.tensors = self.program["tensors"]
        self.memory = self._allocate_storage()
        self._scratch: Optional[object] = None
        self.launches = self._bind_launches(built)
        self._upload_constants()
        self.last_profile: List[dict] = []

    # ---------------------------------------------------------------- memory
    def _allocate(self, a: dict):
        """One allocation: an RGBA float image array, or a buffer."""
        cl = self.cl
        if a["image"]:
            kind = cl.channel_type.HALF_FLOAT if a["dtype"] == "float16" else cl.channel_type.FLOAT
            fmt = cl.ImageFormat(cl.channel_order.RGBA, kind)
            return cl.create_image(self.context, cl.mem_flags.READ_WRITE, fmt, shape=tuple(a["image"]), is_array=True)
        return cl.Buffer(self.context, cl.mem_flags.READ_WRITE, size=max(int(a["bytes"]), 4))

    def _allocate_storage(self) -> list:
        """The memory object of every tensor: its allocation, or a sub-buffer of its arena (every
        tensor of a shared buffer gets one: OpenCL leaves concurrent use of a buffer and its
        sub-buffers undefined, not of disjoint sub-buffers)."""
        placement = device_placement(self.program, max(int(self.device.mem_base_addr_align) // 8, 1), int(self.device.max_mem_alloc_size))
        memory = [self._allocate(a) if a is not None else None for a in placement.allocations]
        self.device_bytes = placement.device_bytes
        out = []
        self.ranges = []  # per tensor (memory object, byte offset) for copies between buffers and images
        for t, place in zip(self.tensors, placement.places):
            if place is None:
                out.append(self._allocate({"image": None, "bytes": t["bytes"]}))
                self.ranges.append((out[-1], 0))
            elif placement.shared[place[0]] and not t["image"]:
                out.append(memory[place[0]].get_sub_region(place[1], int(t["bytes"])))
                self.ranges.append((memory[place[0]], int(place[1])))
            else:
                out.append(memory[place[0]])
                self.ranges.append((out[-1], 0))
        return out

    def _region(self, t: dict):
        return tuple(t["image"])

    def _write(self, tid: int, array: np.ndarray, queue=None) -> None:
        t, q = self.tensors[tid], queue or self.queue
        array = np.ascontiguousarray(array, dtype=texel_dtype(t))
        if not t["bytes"]:  # a tensor of no elements: nothing to copy
            return
        if t["image"]:
            self.cl.enqueue_copy(q, self.memory[tid], array, origin=(0, 0, 0), region=self._region(t))
        else:
            self.cl.enqueue_copy(q, self.memory[tid], array)

    def _read(self, tid: int, queue=None) -> np.ndarray:
        t, q = self.tensors[tid], queue or self.queue
        out = np.empty(t["shape"], dtype=texel_dtype(t))
        if not t["bytes"]:
            return out.astype(t["dtype"], copy=False)
        if t["image"]:
            self.cl.enqueue_copy(q, out, self.memory[tid], origin=(0, 0, 0), region=self._region(t))
        else:
            self.cl.enqueue_copy(q, out, self.memory[tid])
        return out.astype(t["dtype"], copy=False)

    def _upload_constants(self) -> None:
        for t in self.tensors:
            if t["kind"] == "constant":
                self._write(t["id"], self.artifact.constants[f"t{t['id']}"].reshape(t["shape"]))
        self.queue.finish()

    def _copy(self, src: int, dst: int, queue=None):
        cl, q = self.cl, queue or self.queue
        s, d = self.tensors[src], self.tensors[dst]
        if texel_dtype(s) != texel_dtype(d):
            # half texels on one side: a converting kernel (the copy commands move bytes)
            texels = int(s["bytes"]) // (4 * np.dtype(s["dtype"]).itemsize)
            return self.copies.enqueue(q, self.memory[src], self.memory[dst], s["image"], d["image"], texels)
        if s["image"] and d["image"]:  # between mappings: through the dense layout
            if self._scratch is None or self._scratch.size < s["bytes"]:
                self._scratch = cl.Buffer(self.context, cl.mem_flags.READ_WRITE, size=int(s["bytes"]))
            cl.enqueue_copy(q, self._scratch, self.memory[src], offset=0, origin=(0, 0, 0), region=self._region(s))
            return cl.enqueue_copy(q, self.memory[dst], self._scratch, offset=0, origin=(0, 0, 0), region=self._region(d))
        # a buffer side that is a sub-buffer of an arena is named by its arena and offset: copying
        # between a sub-buffer and an image crashes pocl
        if d["image"]:
            buffer, offset = self.ranges[src]
            return cl.enqueue_copy(q, self.memory[dst], buffer, offset=offset, origin=(0, 0, 0), region=self._region(d))
        if s["image"]:
            buffer, offset = self.ranges[dst]
            return cl.enqueue_copy(q, buffer, self.memory[src], offset=offset, origin=(0, 0, 0), region=self._region(s))
        return cl.enqueue_copy(q, self.memory[dst], self.memory[src], byte_count=int(s["bytes"]))

    # ------------------------------------------------------------------- run
    def _bind_launches(self, built) -> list:
        """Per step: ``(name, kernel, global, local)`` for a launch, its kernel object made for that
        step alone with its arguments set once (every tensor's memory object is fixed for the
        session's life, inputs included), or ``(name, None, src, dst)`` for a copy. A run then only
        enqueues: no ``clSetKernelArg`` per launch per run."""
        cl, out = self.cl, []
        for step in self.program["steps"]:
            if step["op"] == "launch":
                _, gsize, lsize = self.kernels[step["kernel"]]
                kernel = cl.Kernel(built, step["kernel"])
                kernel.set_args(*[self.memory[i] for i in step["args"]])
                out.append((step["kernel"], kernel, gsize, lsize))
            elif step["op"] == "copy":
                name = f"copy {self.tensors[step['src']]['name']}->{self.tensors[step['dst']]['name']}"
                out.append((name, None, step["src"], step["dst"]))
            else:
                raise ValueError(f"unknown step {step['op']}")
        return out

    def enqueue_steps(self, queue) -> list:
        """Enqueue every step of a run on ``queue`` (its inputs written, its outputs not read);
        returns their events."""
        cl = self.cl
        return [cl.enqueue_nd_range_kernel(queue, kernel, a, b) if kernel is not None else self._copy(a, b, queue) for _, kernel, a, b in self.launches]

    def run(self, inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
        """Run once; returns the outputs. A profiled run (the default for a session made with
        ``profile=True``) records per-kernel times in ``last_profile`` and the run's device span in
        ``last_device_ms``; an unprofiled one (:meth:`time`) goes through a queue without
        profiling and keeps the last profiled run's times."""
        q = self.queue if self.profiling else self.timing_queue
        for tid, array in zip(self.program["inputs"], self.check_inputs(inputs)):
            self._write(tid, array, q)
        events = self.enqueue_steps(q)
        outputs = [self.to_host(tid, self._read(tid, q)) for tid in self.program["outputs"]]
        q.finish()
        names = [name for name, *_ in self.launches]
        if q is not self.queue:  # a timing run
            return outputs
        if not self.profiling:  # a session made without profiling
            self.last_profile, self.last_device_ms = [{"name": n, "ms": float("nan")} for n in names], float("nan")
            return outputs
        begins = [e.profile.start for e in events]
        ends = [e.profile.end for e in events]
        self.last_profile, self.last_device_ms = step_times(names, begins, ends)
        return outputs
