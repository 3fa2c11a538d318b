"""Run a Vulkan ``.rvk`` program through ``wgpu`` on its Vulkan backend.

Texture-scoped tensors are real Vulkan images: 2D array textures, RGBA float32, bound as
``texture_2d_array<f32>`` where a kernel reads them and as write-only storage textures where it
writes them; buffers are storage buffers. Every allocation of the program's storage assignment
(:mod:`relax_vk.storage`: intermediates whose lifetimes do not overlap share a texture, or sit
at offsets of one buffer arena, bound as buffer ranges), bind group and pipeline is created when
the session is loaded (constants uploaded then, and a mappable readback buffer per output), so
runs allocate nothing.
Scope copies are small WGSL shaders (:mod:`relax_vk.runtime.vulkan.copies`). One run is one
command buffer (submitted in parts: :class:`VulkanSession`), its last commands copying the outputs
into their readback buffers; WebGPU orders each dispatch's memory accesses after the previous one's. A profiled
run (``run``, when the adapter offers ``timestamp-query``) records a compute pass per step with a
timestamp pair each (``last_profile``); ``time`` measures unprofiled runs, all steps in one pass.

Before anything is created the program is checked against the adapter's limits (2D texture
size, array layers, workgroup size and count, bindings per stage, buffer sizes);
a violation raises :class:`DeviceLimitError` naming the tensor or kernel, the extents and the
limit. A shader the device rejects raises :class:`ShaderError` with the device's message and the
numbered WGSL. Needs numpy and wgpu only (never TVM).
"""

from __future__ import annotations

import re
from typing import Dict, List, Sequence

import numpy as np

from ...core.errors import RelaxVKError
from ...serialization.artifact import Artifact
from ...core.limits import device_name
from ...storage.program import device_placement
from ...storage.lifetimes import texel_dtype
from ..session import DeviceLimitError, Session, half_arithmetic_problem, step_times, texture_limit_problems
from .copies import TEXTURE_FORMATS, copy_bindings, copy_grid, copy_items, copy_shader
from .devices import LIMIT_KEYS, _wgpu, describe_adapter
from .readback import Readback, mapping
from .readback import words as _words
from .shader_modules import create_shader_module

MAX_QUERIES = 4096  # WebGPU's limit on one query set: per-step profiling covers 2048 steps


def writable_reads(source: str, bindings: Sequence[str], positions: Sequence[int]) -> "tuple[str, List[str]]":
    """The shader and binding kinds with the read-only buffers at ``positions`` declared and bound
    read-write (the shader never writes them; only the binding's usage changes)."""
    bindings = list(bindings)
    for i in positions:
        if bindings[i] != "buffer_read":
            continue
        bindings[i] = "buffer"
        source, n = re.subn(rf"(@binding\({i}\)\s+var<storage,\s*)read>", r"\1read_write>", source)
        if n != 1:
            raise ValueError(f"binding {i} is not a read-only storage buffer declaration of the shader")
    return source, bindings


class ShaderError(RelaxVKError, RuntimeError):
    """The device rejected a WGSL shader; the message holds the error and the numbered shader."""

    def __init__(self, kernel: str, error: str, source: str):
        numbered = "\n".join(f"{i + 1:4d} | {line}" for i, line in enumerate(source.splitlines()))
        super().__init__(f"shader for kernel {kernel} was rejected by the device:\n{error}\n--- shader ---\n{numbered}")
        self.kernel, self.error, self.source = kernel, error, source


def shader_source(artifact: Artifact, kernel: dict) -> str:
    where = kernel.get("shader")
    if not where:
        raise ValueError(f"kernel {kernel['name']} has no shader: is this a Vulkan artifact? (target {artifact.program.get('target')})")
    start, length = int(where["offset"]), int(where["length"])
    if start < 0 or start + length > len(artifact.source):
        raise ValueError(f"kernel {kernel['name']}: shader [{start}, {start + length}) lies outside the source section")
    return artifact.source[start : start + length]


def check_limits(program: dict, limits: Dict[str, int], device_name: str = "the device", features=frozenset()) -> None:
    """Raise :class:`DeviceLimitError` for the first tensor or kernel the adapter cannot handle
    (``features``: the adapter's features; float16 tensors need ``shader-f16``)."""
    half_arithmetic_problem(program, "shader-f16" in features, device_name, "the shader-f16 feature")
    max_dim, max_layers = int(limits["max-texture-dimension-2d"]), int(limits["max-texture-array-layers"])
    for t in program["tensors"]:
        if t["image"]:
            problems = texture_limit_problems(t["image"], max_dim, max_dim, max_layers, "texture2d")
            if problems:
                w, h, layers = t["image"]
                raise DeviceLimitError(
                    f"tensor {t['name']} ({t['scope']}, image {w}x{h}x{layers}) does not fit {device_name}: " + "; ".join(problems)
                )
            if t["dtype"] not in TEXTURE_FORMATS:
                raise DeviceLimitError(f"tensor {t['name']}: {t['dtype']} textures are not supported (float32 and float16 only)")
        if t["dtype"] == "float16" and "shader-f16" not in features:
            raise DeviceLimitError(f"tensor {t['name']} is float16; {device_name} lacks the shader-f16 feature (rebuild the model in float32)")
        if not t["image"] and int(t["bytes"]) > int(limits["max-storage-buffer-binding-size"]):
            raise DeviceLimitError(
                f"tensor {t['name']} ({t['bytes']} bytes) exceeds {device_name}'s max storage buffer binding size "
                f"{limits['max-storage-buffer-binding-size']}"
            )
    for k in program["kernels"]:
        local, global_ = k["local"], k["global"]
        if int(k.get("workgroup_bytes", 0)) > int(limits["max-compute-workgroup-storage-size"]):
            raise DeviceLimitError(
                f"kernel {k['name']} needs {k['workgroup_bytes']} bytes of workgroup memory; {device_name} allows "
                f"{limits['max-compute-workgroup-storage-size']}"
            )
        if int(np.prod(local)) > int(limits["max-compute-invocations-per-workgroup"]):
            raise DeviceLimitError(
                f"kernel {k['name']} needs workgroups of {int(np.prod(local))} invocations; {device_name} allows "
                f"{limits['max-compute-invocations-per-workgroup']}"
            )
        for axis, size, groups in zip("xyz", local, (g // l for g, l in zip(global_, local))):
            if size > int(limits[f"max-compute-workgroup-size-{axis}"]):
                raise DeviceLimitError(f"kernel {k['name']}: workgroup size {axis}={size} > {limits[f'max-compute-workgroup-size-{axis}']}")
            if groups > int(limits["max-compute-workgroups-per-dimension"]):
                raise DeviceLimitError(
                    f"kernel {k['name']}: {groups} workgroups along {axis} > {device_name}'s limit {limits['max-compute-workgroups-per-dimension']}"
                )
        bindings = [{"buffer_read": "buffer", "storage_texture_f16": "storage_texture"}.get(b, b) for b in k.get("bindings", [])]
        for kind, key in (
            ("buffer", "max-storage-buffers-per-shader-stage"),
            ("texture", "max-sampled-textures-per-shader-stage"),
            ("storage_texture", "max-storage-textures-per-shader-stage"),
        ):
            if bindings.count(kind) > int(limits[key]):
                raise DeviceLimitError(f"kernel {k['name']} binds {bindings.count(kind)} {kind}s; {device_name} allows {limits[key]} ({key})")


class VulkanSession(Session):
    """A loaded program on one Vulkan adapter: memory, pipelines and bind groups created,
    constants uploaded.

    A run records its steps into command buffers of ``submit_every`` steps each and submits each
    as soon as it is recorded, so the GPU works while the host records the rest (recording costs
    wgpu about as much host time per dispatch as a small kernel takes on a desktop GPU; one
    submission at the end would add the two). ``0``: one submission."""

    submit_every = 32
    #: an unprofiled run records the next run's command buffer after submitting its own, so its
    #: host recording overlaps the GPU's work instead of preceding it. WebGPU command buffers are
    #: single-use; the bindings never change, and the next run's input writes are queued before
    #: its submission.
    record_ahead = True
    #: how long a run polls for its outputs without blocking before it blocks (ms; 0: block at
    #: once; where wgpu-py runs on wgpu-native, :mod:`.readback`). A blocking wait wakes the
    #: thread well after the GPU is done: on the H100, 2 ms of polling takes mobilenet_v2 from
    #: 0.726 to 0.657 ms. The cost is a busy CPU core for up to that long per run: a run whose
    #: last wait was longer sleeps first, until shortly before it should be done
    #: (:func:`.readback.sleep_before_polling`). ``None``: 2 ms, and 0 on a CPU adapter (lavapipe:
    #: polling would take a core from its "GPU").
    spin_ms: "float | None" = None

    def __init__(self, artifact: Artifact, adapter, profile: bool = True, shader_checks: str = "bounds"):
        wgpu = _wgpu()
        self.shader_checks = shader_checks  # wgpu's runtime checks in the shaders (shader_modules.py)
        self.wgpu = wgpu
        self.artifact = artifact
        self.program = artifact.program
        if self.program.get("target") != "vulkan":
            raise ValueError(f"this artifact was built for {self.program.get('target')!r}; the Vulkan runtime runs Vulkan builds")
        self.adapter = adapter
        self.device_name = device_name(adapter)
        limits = {k: int(adapter.limits[k]) for k in LIMIT_KEYS}
        check_limits(self.program, limits, describe_adapter(adapter), set(adapter.features))
        steps = len(self.program["steps"])
        self.profiling = profile and "timestamp-query" in adapter.features and 0 < 2 * steps <= MAX_QUERIES
        features = ["timestamp-query"] if self.profiling else []
        if any(t["dtype"] == "float16" for t in self.program["tensors"]) or "enable f16;" in artifact.source:
            features.append("shader-f16")
        self.device = adapter.request_device_sync(required_features=features, required_limits=limits)
        self.max_groups = limits["max-compute-workgroups-per-dimension"]
        self.tensors = self.program["tensors"]
        self.min_offset_alignment = int(adapter.limits.get("min-storage-buffer-offset-alignment", 256))
        self.memory, self.offsets = self._allocate_storage()
        self.pipelines = {k["name"]: self._kernel_pipeline(k) for k in self.program["kernels"]}
        # pipelines made while preparing steps: copy shaders (by source) and kernels with some
        # read-only bindings made writable (by (kernel, binding positions)) -> (pipeline, layout)
        self._extra_pipelines: Dict[object, tuple] = {}
        kernels = {k["name"]: k for k in self.program["kernels"]}
        self.steps = [self._prepare(step, kernels) for step in self.program["steps"]]
        self._record = self._recorder()
        if self.profiling:
            self.queries = self.device.create_query_set(type=wgpu.QueryType.timestamp, count=2 * steps)
            usage = wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC
            self.query_buffer = self.device.create_buffer(size=16 * steps, usage=usage)
        self.readbacks = [Readback(self, tid) for tid in self.program["outputs"]]
        spin = self.spin_ms if self.spin_ms is not None else 0.0 if adapter.info.get("adapter_type") == "CPU" else 2.0
        self.mapping = mapping(self.device, spin)
        self._ahead: "list | None" = None  # the next run's command buffer (record_ahead)
        self._upload_constants()
        self.last_profile: List[dict] = []

    # ---------------------------------------------------------------- memory
    def _allocate(self, a: dict):
        """One allocation: a 2D-array texture of the texel format, or a storage buffer."""
        wgpu = self.wgpu
        if a["image"]:
            w, h, layers = a["image"]
            usage = wgpu.TextureUsage.TEXTURE_BINDING | wgpu.TextureUsage.STORAGE_BINDING | wgpu.TextureUsage.COPY_DST | wgpu.TextureUsage.COPY_SRC
            return self.device.create_texture(size=(w, h, layers), format=TEXTURE_FORMATS[a["dtype"]], usage=usage, dimension="2d")
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.COPY_SRC
        return self.device.create_buffer(size=max(4, _words(a["bytes"])), usage=usage)

    def _allocate_storage(self):
        """``(memory object, byte offset)`` of every tensor: its allocation, or a range of its arena
        (:func:`relax_vk.storage.program.device_placement`: an offset the adapter cannot bind gets
        a buffer of its own)."""
        placement = device_placement(self.program, self.min_offset_alignment, int(self.adapter.limits.get("max-buffer-size", 1 << 62)))
        memory = [self._allocate(a) if a is not None else None for a in placement.allocations]
        self.device_bytes = placement.device_bytes
        out, offsets = [], []
        for t, place in zip(self.tensors, placement.places):
            out.append(self._allocate({"image": None, "bytes": t["bytes"]}) if place is None else memory[place[0]])
            offsets.append(0 if place is None else place[1])
        return out, offsets

    def _resource(self, tid: int):
        t, mem = self.tensors[tid], self.memory[tid]
        if t["image"]:
            return mem.create_view(dimension="2d-array")
        offset = self.offsets[tid]
        return {"buffer": mem, "offset": offset, "size": min(max(4, _words(t["bytes"])), mem.size - offset)}

    def _write(self, tid: int, array: np.ndarray) -> None:
        t = self.tensors[tid]
        data = np.ascontiguousarray(array, dtype=texel_dtype(t))
        if not t["bytes"]:  # a tensor of no elements: nothing to write (wgpu refuses empty writes)
            return
        if t["image"]:
            w, h, layers = t["image"]
            self.device.queue.write_texture(
                {"texture": self.memory[tid], "mip_level": 0, "origin": (0, 0, 0)},
                data.tobytes(),
                {"offset": 0, "bytes_per_row": 4 * data.itemsize * w, "rows_per_image": h},
                (w, h, layers),
            )
        else:
            if data.nbytes % 4:  # (padded to whole words, as WebGPU requires; else written as it is)
                data = np.frombuffer(data.tobytes() + b"\0" * (-data.nbytes % 4), dtype=np.uint8)
            self.device.queue.write_buffer(self.memory[tid], self.offsets[tid], data)

    def _write_inputs(self, inputs: Sequence[np.ndarray]) -> None:
        """Every input checked (:meth:`Session.check_inputs`) and written (queued before the next submission)."""
        for tid, array in zip(self.program["inputs"], self.check_inputs(inputs)):
            self._write(tid, array)

    def _read(self, tid: int) -> np.ndarray:
        t = self.tensors[tid]
        stored = texel_dtype(t)
        if not t["bytes"]:
            return np.zeros(t["shape"], dtype=t["dtype"])
        if t["image"]:
            w, h, layers = t["image"]
            raw = self.device.queue.read_texture(
                {"texture": self.memory[tid], "mip_level": 0, "origin": (0, 0, 0)},
                {"offset": 0, "bytes_per_row": 4 * np.dtype(stored).itemsize * w, "rows_per_image": h},
                (w, h, layers),
            )
        else:
            raw = self.device.queue.read_buffer(self.memory[tid], self.offsets[tid], _words(t["bytes"]))
        nbytes = int(np.prod(t["shape"])) * np.dtype(stored).itemsize
        return np.frombuffer(bytes(raw)[:nbytes], dtype=stored).reshape(t["shape"]).astype(t["dtype"])

    def _upload_constants(self) -> None:
        for t in self.tensors:
            if t["kind"] == "constant":
                self._write(t["id"], self.artifact.constants[f"t{t['id']}"].reshape(t["shape"]))

    # ------------------------------------------------------------- pipelines
    def _layout_entry(self, binding: int, kind: str) -> dict:
        wgpu = self.wgpu
        entry = {"binding": binding, "visibility": wgpu.ShaderStage.COMPUTE}
        if kind == "buffer":
            entry["buffer"] = {"type": wgpu.BufferBindingType.storage}
        elif kind == "buffer_read":
            entry["buffer"] = {"type": wgpu.BufferBindingType.read_only_storage}
        elif kind == "texture":
            entry["texture"] = {
                "sample_type": wgpu.TextureSampleType.unfilterable_float,
                "view_dimension": wgpu.TextureViewDimension.d2_array,
                "multisampled": False,
            }
        elif kind in ("storage_texture", "storage_texture_f16"):
            entry["storage_texture"] = {
                "access": wgpu.StorageTextureAccess.write_only,
                "format": TEXTURE_FORMATS["float16" if kind.endswith("f16") else "float32"],
                "view_dimension": wgpu.TextureViewDimension.d2_array,
            }
        else:
            raise ValueError(f"unknown binding kind {kind!r}")
        return entry

    def _pipeline(self, name: str, source: str, bindings: Sequence[str]):
        wgpu = self.wgpu
        try:  # wgpu validates eagerly: a rejected shader or layout raises here, with the driver's message
            module = create_shader_module(self.device, source, self.shader_checks, label=name)
            layout = self.device.create_bind_group_layout(entries=[self._layout_entry(i, k) for i, k in enumerate(bindings)])
            pipeline = self.device.create_compute_pipeline(
                layout=self.device.create_pipeline_layout(bind_group_layouts=[layout]), compute={"module": module, "entry_point": "main"}
            )
        except (wgpu.GPUError, RuntimeError, ValueError) as err:
            raise ShaderError(name, str(err), source) from None
        return pipeline, layout

    def _kernel_pipeline(self, kernel: dict, writable: Sequence[int] = ()):
        source, bindings = writable_reads(shader_source(self.artifact, kernel), kernel["bindings"], writable)
        return self._pipeline(kernel["name"], source, bindings)

    def _shared_buffers(self, args: Sequence[int]) -> List[int]:
        """Positions of ``args`` bound to a buffer that another argument of the step is bound to
        too (two ranges of one arena): WebGPU forbids one buffer read-only and writable in one
        dispatch, so those read-only bindings are bound writable for this step."""
        buffers = [id(self.memory[tid]) if not self.tensors[tid]["image"] else None for tid in args]
        return [i for i, b in enumerate(buffers) if b is not None and buffers.count(b) > 1]

    def _prepare(self, step: dict, kernels: Dict[str, dict]) -> tuple:
        if step["op"] == "launch":
            kernel = kernels[step["kernel"]]
            args = step["args"]
            writable = [i for i in self._shared_buffers(args) if kernel["bindings"][i] == "buffer_read"]
            if writable:
                key = (step["kernel"], tuple(writable))
                if key not in self._extra_pipelines:
                    self._extra_pipelines[key] = self._kernel_pipeline(kernel, writable)
                pipeline, layout = self._extra_pipelines[key]
            else:
                pipeline, layout = self.pipelines[step["kernel"]]
            groups = tuple(g // l for g, l in zip(kernel["global"], kernel["local"]))
            name = step["kernel"]
        elif step["op"] == "copy":
            s, d = self.tensors[step["src"]], self.tensors[step["dst"]]
            nbytes, dtype = int(s["bytes"]), s["dtype"]
            gx, gy = copy_grid(copy_items(s["image"], d["image"], nbytes, np.dtype(dtype).itemsize), self.max_groups)
            name = f"copy {s['name']}->{d['name']}"
            args = [step["src"], step["dst"]]
            texel = texel_dtype(d) if d["image"] else None
            source, bindings = writable_reads(
                copy_shader(s["image"], d["image"], nbytes, dtype, gx, texel),
                copy_bindings(s["image"], d["image"], dtype, texel),
                self._shared_buffers(args),
            )
            if source not in self._extra_pipelines:  # copies of the same shape share one pipeline
                self._extra_pipelines[source] = self._pipeline(name, source, bindings)
            pipeline, layout = self._extra_pipelines[source]
            groups = (gx, gy, 1)
        else:
            raise ValueError(f"unknown step {step['op']}")
        try:
            group = self.device.create_bind_group(
                layout=layout, entries=[{"binding": i, "resource": self._resource(tid)} for i, tid in enumerate(args)]
            )
        except (self.wgpu.GPUError, RuntimeError, ValueError) as err:
            described = ", ".join(f"{self.tensors[t]['name']} ({self.tensors[t]['dtype']}, {'texture' if self.tensors[t]['image'] else 'buffer'})" for t in args)
            raise ValueError(f"step {name}: its tensors [{described}] do not match the kernel's bindings: {err}") from None
        return name, pipeline, group, groups

    # ------------------------------------------------------------------- run
    def _recorder(self):
        """``record(compute_pass, pipeline, bind_group, groups)``: one dispatch into a pass.

        wgpu-py's pass methods are thin Python wrappers around wgpu-native's C calls that cost
        about as much host time as the calls themselves (``benchmarks/vulkan_launch_cost.py``);
        where wgpu-py runs on wgpu-native the three C calls are made directly, on the handles of
        the objects the session holds (so they stay alive). Every pipeline, bind group and
        workgroup count was validated when the session was loaded."""
        try:
            from wgpu.backends.wgpu_native import _api
        except ImportError:  # pragma: no cover - another wgpu backend
            _api = None
        if _api is None or not all(hasattr(o, "_internal") for _, p, g, _ in self.steps for o in (p, g)):

            def record(compute, pipeline, group, groups) -> None:
                compute.set_pipeline(pipeline)
                compute.set_bind_group(0, group)
                compute.dispatch_workgroups(*groups)

            return record
        lib, null = _api.lib, _api.ffi.NULL
        set_pipeline, set_group = lib.wgpuComputePassEncoderSetPipeline, lib.wgpuComputePassEncoderSetBindGroup
        dispatch = lib.wgpuComputePassEncoderDispatchWorkgroups

        def record(compute, pipeline, group, groups) -> None:
            handle = compute._internal
            set_pipeline(handle, pipeline._internal)
            set_group(handle, 0, group._internal, 0, null)
            dispatch(handle, *groups)

        return record

    def _record_run(self, submit: bool) -> list:
        """Record every step of a run (its inputs written), its output copies into the readback
        buffers and, when profiling, its timestamps' resolution: a compute pass per step with
        timestamps when profiling, else one pass per command buffer. ``submit``: each command
        buffer of ``submit_every`` steps is submitted as soon as it is recorded; else the run is
        returned as one unsubmitted command buffer (``[buffer]``), for the next run."""
        record, queue = self._record, self.device.queue
        encoder = self.device.create_command_encoder()
        compute, parts = None, []

        def finish(encoder, compute) -> None:
            if compute is not None and not self.profiling:
                compute.end()
            buffer = encoder.finish()
            if submit:
                queue.submit([buffer])
            else:
                parts.append(buffer)

        for i, (_, pipeline, group, groups) in enumerate(self.steps):
            if submit and self.submit_every and i and i % self.submit_every == 0:
                # hand the GPU what is recorded so far: it runs while the rest is recorded
                finish(encoder, compute)
                encoder, compute = self.device.create_command_encoder(), None
            if self.profiling:
                stamps = {"query_set": self.queries, "beginning_of_pass_write_index": 2 * i, "end_of_pass_write_index": 2 * i + 1}
                compute = encoder.begin_compute_pass(timestamp_writes=stamps)
            elif compute is None:
                compute = encoder.begin_compute_pass()
            record(compute, pipeline, group, groups)  # WebGPU orders each dispatch's accesses after the last's
            if self.profiling:
                compute.end()
        if compute is not None and not self.profiling:
            compute.end()
        for readback in self.readbacks:
            readback.copy(encoder)
        if self.profiling:
            encoder.resolve_query_set(self.queries, 0, 2 * len(self.steps), self.query_buffer, 0)
        finish(encoder, None)
        return parts

    def submit_steps(self) -> None:
        """Record every step of a run and submit it, every ``submit_every`` steps (its inputs
        written, its outputs copied into the readback buffers but not read)."""
        self._record_run(submit=True)

    def run(self, inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
        """Run once; returns the outputs. A profiled run (the default, when the adapter has
        timestamp queries) records a compute pass per step and its time in ``last_profile``; an
        unprofiled one (:meth:`time`) one compute pass per submitted command buffer, and, with
        ``record_ahead``, records the next run's command buffer while the GPU runs this one."""
        self._write_inputs(inputs)
        ahead, self._ahead = self._ahead, None  # (an unprofiled recording: a profiled run records its own)
        if self.profiling or ahead is None:
            self.submit_steps()
        else:  # the input writes above are queued before it
            self.device.queue.submit(ahead)
        if self.record_ahead and not self.profiling:
            self._ahead = self._record_run(submit=False)
        self.mapping.map([r.buffer for r in self.readbacks if r.buffer is not None], adaptive=not self.profiling)
        outputs = []
        try:
            for r in self.readbacks:  # (each unmapped as it is read)
                outputs.append(self.to_host(r.tid, r.read(self.mapping)))
        finally:  # the rest unmapped too when one fails, so the next run can copy into them
            for r in self.readbacks[len(outputs) + 1 :]:
                if r.buffer is not None:
                    self.mapping.unmap(r.buffer)
        if not self.profiling:  # (timing runs keep the last profiled run's times)
            return outputs
        # nanoseconds (the instance normalizes timestamps: devices._wgpu)
        stamps = np.frombuffer(bytes(self.device.queue.read_buffer(self.query_buffer)), dtype=np.uint64).astype(np.int64)
        names = [name for name, *_rest in self.steps]
        self.last_profile, self.last_device_ms = step_times(names, stamps[0::2][: len(names)], stamps[1::2][: len(names)])
        return outputs

    def busy_ms(self, inputs: Sequence[np.ndarray], repeat: int = 5) -> float:
        """The GPU's time for one unprofiled run's dispatches, in ms (median of ``repeat``): every
        step in one compute pass with a timestamp at its beginning and its end only. A profiled
        run's span (a pass and a timestamp pair per step) is longer for models of small kernels:
        on the H100, mobilenet_v2's 56 dispatches take 0.46 ms this way and span 1.05 ms
        profiled. NaN where the session cannot profile (no timestamp queries)."""
        if not hasattr(self, "queries"):
            return float("nan")
        self._write_inputs(inputs)
        spans = []
        for _ in range(repeat):
            encoder = self.device.create_command_encoder()
            stamps = {"query_set": self.queries, "beginning_of_pass_write_index": 0, "end_of_pass_write_index": 1}
            compute = encoder.begin_compute_pass(timestamp_writes=stamps)
            for _, pipeline, group, groups in self.steps:
                self._record(compute, pipeline, group, groups)
            compute.end()
            encoder.resolve_query_set(self.queries, 0, 2, self.query_buffer, 0)
            self.device.queue.submit([encoder.finish()])
            begin, end = np.frombuffer(bytes(self.device.queue.read_buffer(self.query_buffer, 0, 16)), dtype=np.uint64).astype(np.int64)
            spans.append((end - begin) * 1e-6)
        return float(np.median(spans))
