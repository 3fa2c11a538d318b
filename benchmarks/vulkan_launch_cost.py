"""Host cost of one Vulkan (wgpu) dispatch by the kind of its memory (buffers or 2D-array
textures of 1, 16 or 64 layers) and its number of bindings (2, 4, 8).

relax_vk's Vulkan texture plans cost more host time per dispatch than its buffer plans
(``host_overhead.py``). This script isolates the binding kinds: a chain of 64 dispatches of a tiny
shader (each reads the last one's output and 0, 2 or 6 other tensors, writes its own: the shape
of a model's run, bind groups made once, one compute pass, one submission) over 4096 texels held in a storage buffer or in a
``rgba32float`` 2D-array texture (read as ``texture_2d_array``, written as a write-only storage
texture, as relax_vk's WGSL does) of 1, 16 or 64 layers. It prints the host microseconds per
dispatch of recording and submitting, and the wall microseconds per dispatch of the whole run.

Usage: ``python benchmarks/vulkan_launch_cost.py [DEVICE]`` (``gpu``, ``lavapipe``, an index).
"""

from __future__ import annotations

import sys
import time

import numpy as np

DISPATCHES = 64
RUNS = 40
TEXELS = 4096
GROUP = 64
def _buffer_shader(reads: int) -> str:
    params = "".join(f"@group(0) @binding({i}) var<storage, read> a{i}: array<vec4<f32>>;\n" for i in range(reads))
    total = " + ".join(f"a{i}[g.x]" for i in range(reads))
    return (f"{params}@group(0) @binding({reads}) var<storage, read_write> b: array<vec4<f32>>;\n"
            f"@compute @workgroup_size({GROUP}) fn main(@builtin(global_invocation_id) g: vec3<u32>) {{ b[g.x] = {total}; }}\n")  # fmt: skip


def _texture_shader(width: int, reads: int) -> str:
    params = "".join(f"@group(0) @binding({i}) var a{i}: texture_2d_array<f32>;\n" for i in range(reads))
    total = " + ".join(f"textureLoad(a{i}, vec2<i32>(x, 0), layer, 0)" for i in range(reads))
    return (f"{params}@group(0) @binding({reads}) var b: texture_storage_2d_array<rgba32float, write>;\n"
            f"@compute @workgroup_size({GROUP}) fn main(@builtin(global_invocation_id) g: vec3<u32>) {{\n"
            f"  let x = i32(g.x % {width}u); let layer = i32(g.x / {width}u);\n"
            f"  textureStore(b, vec2<i32>(x, 0), layer, {total});\n}}\n")  # fmt: skip


def _measure(wgpu, device, layers, bindings: int = 2):
    """``(host us, wall us)`` per dispatch; ``layers`` None for buffers; ``bindings``: the
    dispatch's memory bindings (the last one written; the others read, the first the chain's)."""
    stage = wgpu.ShaderStage.COMPUTE
    if layers is None:
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC
        make = lambda: device.create_buffer(size=TEXELS * 16, usage=usage)  # noqa: E731
        kinds = [wgpu.BufferBindingType.read_only_storage] * (bindings - 1) + [wgpu.BufferBindingType.storage]
        layout = device.create_bind_group_layout(entries=[{"binding": i, "visibility": stage, "buffer": {"type": k}} for i, k in enumerate(kinds)])
        source = _buffer_shader(bindings - 1)
        resource = lambda m: {"buffer": m, "offset": 0, "size": m.size}  # noqa: E731
    else:
        width = TEXELS // layers
        usage = wgpu.TextureUsage.TEXTURE_BINDING | wgpu.TextureUsage.STORAGE_BINDING | wgpu.TextureUsage.COPY_SRC
        make = lambda: device.create_texture(size=(width, 1, layers), format="rgba32float", usage=usage, dimension="2d")  # noqa: E731
        read = {"sample_type": "unfilterable-float", "view_dimension": "2d-array"}
        write = {"access": "write-only", "format": "rgba32float", "view_dimension": "2d-array"}
        entries = [{"binding": i, "visibility": stage, "texture": read} for i in range(bindings - 1)]
        layout = device.create_bind_group_layout(entries=entries + [{"binding": bindings - 1, "visibility": stage, "storage_texture": write}])
        source = _texture_shader(width, bindings - 1)
        resource = lambda m: m.create_view(dimension="2d-array")  # noqa: E731
    chain = [make() for _ in range(DISPATCHES + 1)]
    extra = [make() for _ in range(bindings - 2)]
    pipeline = device.create_compute_pipeline(
        layout=device.create_pipeline_layout(bind_group_layouts=[layout]),
        compute={"module": device.create_shader_module(code=source), "entry_point": "main"},
    )
    groups = []
    for i in range(DISPATCHES):
        memory = [chain[i], *extra, chain[i + 1]]
        groups.append(device.create_bind_group(layout=layout, entries=[{"binding": k, "resource": resource(m)} for k, m in enumerate(memory)]))
    probe = device.create_buffer(size=16, usage=wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.COPY_SRC)
    host, wall = [], []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        encoder = device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        for group in groups:
            compute.set_pipeline(pipeline)
            compute.set_bind_group(0, group)
            compute.dispatch_workgroups(TEXELS // GROUP, 1, 1)
        compute.end()
        device.queue.submit([encoder.finish()])
        t1 = time.perf_counter()
        device.queue.read_buffer(probe)  # (waits for the submitted work)
        t2 = time.perf_counter()
        host.append((t1 - t0) * 1e6 / DISPATCHES)
        wall.append((t2 - t0) * 1e6 / DISPATCHES)
    return float(np.median(host[5:])), float(np.median(wall[5:]))


def main(argv=None) -> int:
    from relax_vk.runtime import select_adapter
    from relax_vk.runtime.vulkan.devices import _wgpu

    argv = sys.argv[1:] if argv is None else argv
    wgpu = _wgpu()
    adapter = select_adapter(argv[0] if argv else None)
    device = adapter.request_device_sync()
    print(f"{adapter.info['device']} ({adapter.info['backend_type']}): {DISPATCHES} dispatches per run, {TEXELS} texels per tensor")
    print(f"{'memory':<22} {'bindings':>8} {'host us':>8} {'wall us':>8}")
    for name, layers in (("buffer", None), ("texture, 1 layer", 1), ("texture, 16 layers", 16), ("texture, 64 layers", 64)):
        for bindings in (2, 4, 8):
            host, wall = _measure(wgpu, device, layers, bindings)
            print(f"{name:<22} {bindings:>8} {host:>8.1f} {wall:>8.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
