"""Host cost of one OpenCL launch by the kind and number of its memory arguments.

A transformer's run on a desktop GPU is bound by the host's ``clEnqueueNDRangeKernel`` calls, and
relax_vk's texture plans cost more host time per launch than its buffer plans (RESULTS.md,
measured 2026-11-24 at commit 49643cc). This script isolates why: a chain of 64 launches of tiny
kernels (each reads the last one's output and ``k - 2`` further inputs, writes its own output: the
shape of a model's run, each launch its own kernel object with its arguments bound once, as
:class:`relax_vk.runtime.OpenCLSession` does) with every memory argument a buffer, an
``image2d_array_t`` or an ``image2d_t``, and ``k`` = 2, 4, 8. It prints the host microseconds per
launch (median of the runs' enqueue time over 64) and the wall microseconds per launch of a whole
run (enqueue + finish), and the device's image extensions.

Usage: ``python benchmarks/opencl_launch_cost.py [DEVICE]`` (``gpu``, ``pocl``, ``P:D``).
"""

from __future__ import annotations

import sys
import time

import numpy as np

LAUNCHES = 64
RUNS = 40
WIDTH = 256  # texels per tensor (one workgroup's worth: the kernels cost the GPU nothing)
KINDS = ("buffer", "image2d_array", "image2d")


def _source(kind: str, k: int) -> str:
    """A kernel reading arguments 0..k-2 and writing argument k-1 at its global id."""
    if kind == "buffer":
        params = [f"__global const float4* a{i}" for i in range(k - 1)] + ["__global float4* out"]
        read = " + ".join(f"a{i}[x]" for i in range(k - 1))
        store = f"out[x] = {read};"
    else:
        t = "image2d_array_t" if kind == "image2d_array" else "image2d_t"
        coord = "(int4)(x, 0, 0, 0)" if kind == "image2d_array" else "(int2)(x, 0)"
        params = [f"__read_only {t} a{i}" for i in range(k - 1)] + [f"__write_only {t} out"]
        read = " + ".join(f"read_imagef(a{i}, S, {coord})" for i in range(k - 1))
        store = f"write_imagef(out, {coord}, {read});"
    return (
        "__constant sampler_t S = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;\n"
        f"__kernel void f({', '.join(params)}) {{ int x = get_global_id(0); {store} }}\n"
    )


def _memory(cl, ctx, kind: str):
    if kind == "buffer":
        return cl.Buffer(ctx, cl.mem_flags.READ_WRITE, size=WIDTH * 16)
    fmt = cl.ImageFormat(cl.channel_order.RGBA, cl.channel_type.FLOAT)
    if kind == "image2d_array":
        return cl.create_image(ctx, cl.mem_flags.READ_WRITE, fmt, shape=(WIDTH, 1, 1), is_array=True)
    return cl.create_image(ctx, cl.mem_flags.READ_WRITE, fmt, shape=(WIDTH, 1))


def _measure(cl, ctx, queue, kind: str, k: int):
    program = cl.Program(ctx, _source(kind, k)).build()
    extra = [_memory(cl, ctx, kind) for _ in range(k - 2)]
    chain = [_memory(cl, ctx, kind) for _ in range(LAUNCHES + 1)]
    kernels = []
    for i in range(LAUNCHES):  # (each launch its own kernel object, arguments bound once)
        kernel = cl.Kernel(program, "f")
        kernel.set_args(chain[i], *extra, chain[i + 1])
        kernels.append(kernel)
    host, wall = [], []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        for kernel in kernels:
            cl.enqueue_nd_range_kernel(queue, kernel, (WIDTH,), (64,))
        t1 = time.perf_counter()
        queue.finish()
        t2 = time.perf_counter()
        host.append((t1 - t0) * 1e6 / LAUNCHES)
        wall.append((t2 - t0) * 1e6 / LAUNCHES)
    return float(np.median(host[5:])), float(np.median(wall[5:]))


def main(argv=None) -> int:
    import pyopencl as cl

    from relax_vk.runtime import select_device

    argv = sys.argv[1:] if argv is None else argv
    device = select_device(argv[0] if argv else None)
    ctx = cl.Context([device])
    queue = cl.CommandQueue(ctx)
    extensions = device.extensions.split()
    print(f"{device.name.strip()} ({device.version.strip()}, driver {device.driver_version.strip()})")
    print("image extensions: " + " ".join(e for e in extensions if "image" in e or "buffer" in e))
    try:
        print(f"image pitch alignment: {device.image_pitch_alignment} pixels, base address alignment {device.image_base_address_alignment}")
    except (cl.LogicError, AttributeError):
        print("image pitch alignment: not reported")
    print(f"{'args':>4} " + "".join(f"{kind + ' host/wall us':>30}" for kind in KINDS))
    for k in (2, 4, 8):
        row = f"{k:>4} "
        for kind in KINDS:
            host, wall = _measure(cl, ctx, queue, kind, k)
            row += f"{host:>21.1f} / {wall:>6.1f}"
        print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
