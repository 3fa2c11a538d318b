"""Copy bandwidth of OpenCL images and buffers: which side of a kernel pays for textures.

Copies float4 texels with every combination of source and destination kind (image2d_array,
image2d, buffer) at three sizes (a Swin stage-1 token tensor, a ViT token tensor, 64 MiB) and
prints kernel time (median of 25 profiled runs) and bandwidth. On NVIDIA's OpenCL, image reads
run at buffer speed while image writes (``write_imagef``: formatted surface stores, ``sust.p`` in
the PTX, since OpenCL C does not know the image's format when it compiles) run at about half;
the texture plans' elementwise kernels and gathers, which write one texel per texel read, pay it.

Usage: ``python benchmarks/opencl_image_bandwidth.py [DEVICE]`` (``gpu``, ``pocl``, ``P:D``).
"""

from __future__ import annotations

import sys

import numpy as np

SOURCE = """
__constant sampler_t S = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;
__kernel void ii(__read_only image2d_array_t a, __write_only image2d_array_t b, int w) { int x = get_global_id(0), y = get_global_id(1);
  write_imagef(b, (int4)(x, y, 0, 0), read_imagef(a, S, (int4)(x, y, 0, 0))); }
__kernel void ib(__read_only image2d_array_t a, __global float4* b, int w) { int x = get_global_id(0), y = get_global_id(1);
  b[y * w + x] = read_imagef(a, S, (int4)(x, y, 0, 0)); }
__kernel void bi(__global const float4* a, __write_only image2d_array_t b, int w) { int x = get_global_id(0), y = get_global_id(1);
  write_imagef(b, (int4)(x, y, 0, 0), a[y * w + x]); }
__kernel void bb(__global const float4* a, __global float4* b, int w) { int x = get_global_id(0), y = get_global_id(1);
  b[y * w + x] = a[y * w + x]; }
__kernel void i2(__read_only image2d_t a, __write_only image2d_t b, int w) { int x = get_global_id(0), y = get_global_id(1);
  write_imagef(b, (int2)(x, y), read_imagef(a, S, (int2)(x, y))); }
"""
SIZES = ((3136, 24), (196, 96), (4096, 1024))


def main(argv=None) -> int:
    import pyopencl as cl

    from relax_vk.runtime import select_device

    argv = sys.argv[1:] if argv is None else argv
    device = select_device(argv[0] if argv else None)
    ctx = cl.Context([device])
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    program = cl.Program(ctx, SOURCE).build()
    kernels = {name: cl.Kernel(program, name) for name in ("ii", "ib", "bi", "bb", "i2")}
    fmt = cl.ImageFormat(cl.channel_order.RGBA, cl.channel_type.FLOAT)
    print(f"{device.name.strip()}: float4 copies, us (GB/s)")
    print(f"{'texels':<10}" + "".join(f"{c:>22}" for c in ("image->image", "image->buffer", "buffer->image", "buffer->buffer", "image2d->image2d")))
    for w, h in SIZES:
        arrays = [cl.create_image(ctx, cl.mem_flags.READ_WRITE, fmt, shape=(w, h, 1), is_array=True) for _ in range(2)]
        images = [cl.create_image(ctx, cl.mem_flags.READ_WRITE, fmt, shape=(w, h)) for _ in range(2)]
        buffers = [cl.Buffer(ctx, cl.mem_flags.READ_WRITE, size=w * h * 16) for _ in range(2)]
        cases = [("ii", arrays[0], arrays[1]), ("ib", arrays[0], buffers[1]), ("bi", buffers[0], arrays[1]),
                 ("bb", buffers[0], buffers[1]), ("i2", images[0], images[1])]  # fmt: skip
        row = f"{w}x{h:<6}"
        for name, src, dst in cases:
            times = []
            for _ in range(30):
                event = kernels[name](queue, (w, h), None, src, dst, np.int32(w))
                event.wait()
                times.append((event.profile.end - event.profile.start) * 1e-3)
            us = float(np.median(times[5:]))
            row += f"{us:>12.1f} ({2 * w * h * 16 / us / 1e3:>6.0f})"
        print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
