"""What one kernel launch costs the host on an OpenCL driver, by how the kernel's memory is bound.

A run of relax_vk's OpenCL runtime enqueues one kernel object per step, its arguments set once at
load. This measures that loop alone: ``K`` kernel objects of a trivial kernel (``out = in * 2 + 1``
over ``N`` floats), each reading the previous one's output, enqueued ``K`` at a time, for

* ``buffers, distinct``: a ``cl_mem`` buffer per tensor (K + 1 of them);
* ``buffers, reused``: two buffers, ping-pong (each launch reads what the previous wrote, and
  writes what the one before it read: what a storage plan's sharing makes);
* ``sub-buffers of one arena``: K + 1 sub-buffers of one buffer;
* ``SVM, distinct`` / ``SVM, reused`` / ``SVM arena``: the same with coarse-grained shared virtual
  memory pointers (``clSetKernelArgSVMPointer``; the arena as offsets into one allocation), where
  the device has SVM;
* ``images, reused``: two RGBA float image2d objects, ping-pong;
* ``buffers, distinct, size set ...``: the first case with the kernels' size argument set before
  each enqueue (``clSetKernelArg``), to a value that changes every run or to the same one;
* kernels shaped like a decoder's: workgroup memory and a barrier, eight buffer arguments, a grid
  of 19,000 workgroups (most of them idle).

``--buffer-mib`` makes every buffer that large (the kernels still touch ``--elements`` floats): how
the launch cost follows the size of the memory a kernel binds.

A second table (measured first on 2026-11-24, RESULTS.md: "NVIDIA's OpenCL charges host time per
launch for images") takes a chain of ``K`` launches of kernels that read ``k - 1`` arguments and
write one, ``k`` = 2, 4, 8, with every memory argument a buffer, an ``image2d_array_t`` or an
``image2d_t``; the device's image extensions are printed above it.

Prints host microseconds per ``clEnqueueNDRangeKernel`` (the loop without the final ``clFinish``)
and wall microseconds per launch (with it), the median of ``--rounds``; ``--json`` writes them.
Needs numpy and pyopencl only::

    python3 benchmarks/opencl_launch_cost.py --device 0 --json     # e.g. the GPU machine
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

KINDS = ("buffer", "image2d_array", "image2d")

SOURCE = """
__kernel void buf(__global const float* a, __global float* b, int n) {
    int i = get_global_id(0);
    if (i < n) b[i] = a[i] * 2.0f + 1.0f;
}
__kernel void loc(__global const float* a, __global float* b, int n) {
    __local float t[256];
    int i = get_global_id(0), l = get_local_id(0);
    t[l] = i < n ? a[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (i < n) b[i] = t[255 - l] * 2.0f + 1.0f;
}
__kernel void many(__global const float* a, __global float* b, __global const float* c, __global const float* d,
                   __global const float* e, __global const float* f, __global const float* g, __global const float* h, int n) {
    int i = get_global_id(0);
    if (i < n) b[i] = a[i] * 2.0f + c[0] + d[0] + e[0] + f[0] + g[0] + h[0];
}
__constant sampler_t smp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;
__kernel void img(__read_only image2d_t a, __write_only image2d_t b) {
    int2 p = (int2)(get_global_id(0), get_global_id(1));
    write_imagef(b, p, read_imagef(a, smp, p) * 2.0f + 1.0f);
}
"""


def _kinds_source(kind: str, k: int) -> str:
    """A kernel reading arguments 0..k-2 (float4 buffers or RGBA images) and writing argument k-1."""
    if kind == "buffer":
        params = [f"__global const float4* a{i}" for i in range(k - 1)] + ["__global float4* out"]
        store = "out[x] = " + " + ".join(f"a{i}[x]" for i in range(k - 1)) + ";"
    else:
        t = "image2d_array_t" if kind == "image2d_array" else "image2d_t"
        coord = "(int4)(x, 0, 0, 0)" if kind == "image2d_array" else "(int2)(x, 0)"
        params = [f"__read_only {t} a{i}" for i in range(k - 1)] + [f"__write_only {t} out"]
        store = f"write_imagef(out, {coord}, " + " + ".join(f"read_imagef(a{i}, S, {coord})" for i in range(k - 1)) + ");"
    return (
        "__constant sampler_t S = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;\n"
        f"__kernel void f({', '.join(params)}) {{ int x = get_global_id(0); {store} }}\n"
    )


def kinds_and_counts(cl, ctx, queue, launches: int, rounds: int, width: int = 256) -> dict:
    """``{(kind, k): (host us, wall us)}`` of a chain of ``launches`` kernels with ``k`` memory
    arguments of one kind each (``width`` texels a tensor: the kernels cost the GPU nothing)."""
    fmt = cl.ImageFormat(cl.channel_order.RGBA, cl.channel_type.FLOAT)

    def memory(kind):
        if kind == "buffer":
            return cl.Buffer(ctx, cl.mem_flags.READ_WRITE, size=width * 16)
        if kind == "image2d_array":
            return cl.create_image(ctx, cl.mem_flags.READ_WRITE, fmt, shape=(width, 1, 1), is_array=True)
        return cl.create_image(ctx, cl.mem_flags.READ_WRITE, fmt, shape=(width, 1))

    out = {}
    for k in (2, 4, 8):
        for kind in KINDS:
            program = cl.Program(ctx, _kinds_source(kind, k)).build()
            extra = [memory(kind) for _ in range(k - 2)]
            chain = [memory(kind) for _ in range(launches + 1)]
            kernels = []
            for i in range(launches):  # (each launch its own kernel object, arguments bound once)
                kernel = cl.Kernel(program, "f")
                kernel.set_args(chain[i], *extra, chain[i + 1])
                kernels.append(kernel)
            out[(kind, k)] = measure(cl, queue, kernels, (width,), (64,), rounds, warm=5)
    return out


def measure(cl, queue, kernels, global_size, local_size, rounds: int, scalar=None, warm: int = 1):
    """``(host us per enqueue, wall us per launch)``, medians over ``rounds`` runs of every kernel.
    ``scalar=(index, values)``: before each enqueue, that integer argument is set to the run's value
    (as a run at a new size sets its kernels' size arguments). The first ``warm`` runs are left out."""
    host, wall = [], []
    for r in range(rounds + warm):
        queue.finish()
        start = time.perf_counter()
        for k in kernels:
            if scalar is not None:
                k.set_arg(scalar[0], np.int32(scalar[1][r % len(scalar[1])]))
            cl.enqueue_nd_range_kernel(queue, k, global_size, local_size)
        enqueued = time.perf_counter()
        queue.finish()
        done = time.perf_counter()
        if r >= warm:
            host.append((enqueued - start) / len(kernels) * 1e6)
            wall.append((done - start) / len(kernels) * 1e6)
    return statistics.median(host), statistics.median(wall)


def main(argv=None) -> int:
    import pyopencl as cl

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0, help="index among every platform's devices")
    parser.add_argument("--kernels", type=int, default=64)
    parser.add_argument("--elements", type=int, default=4096)
    parser.add_argument("--buffer-mib", type=float, default=0, help="allocate each buffer this large (the kernels still touch --elements)")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    devices = [d for p in cl.get_platforms() for d in p.get_devices()]
    device = devices[args.device]
    ctx = cl.Context([device])
    queue = cl.CommandQueue(ctx)
    program = cl.Program(ctx, SOURCE).build()
    K, n = args.kernels, args.elements
    nbytes = max(4 * n, int(args.buffer_mib * (1 << 20)) // 4 * 4)
    g, l = (n,), (64,)
    mf = cl.mem_flags

    def buffer_kernels(pairs):
        out = []
        for a, b in pairs:
            k = cl.Kernel(program, "buf")
            k.set_args(a, b, np.int32(n))
            out.append(k)
        return out

    results = {}
    distinct = [cl.Buffer(ctx, mf.READ_WRITE, nbytes) for _ in range(K + 1)]
    two = [cl.Buffer(ctx, mf.READ_WRITE, nbytes) for _ in range(2)]
    align = max(device.mem_base_addr_align // 8, 4)
    stride = (nbytes + align - 1) // align * align
    arena = cl.Buffer(ctx, mf.READ_WRITE, stride * (K + 1))
    subs = [arena.get_sub_region(i * stride, nbytes) for i in range(K + 1)]
    cases = {
        "buffers, distinct": buffer_kernels([(distinct[i], distinct[i + 1]) for i in range(K)]),
        "buffers, reused": buffer_kernels([(two[i % 2], two[(i + 1) % 2]) for i in range(K)]),
        "sub-buffers of one arena": buffer_kernels([(subs[i], subs[i + 1]) for i in range(K)]),
    }
    svm_caps = 0
    try:
        svm_caps = device.svm_capabilities
    except Exception:  # noqa: BLE001  (an OpenCL 1.2 device)
        pass
    if svm_caps & cl.device_svm_capabilities.COARSE_GRAIN_BUFFER:

        def svm_kernels(pointers):
            out = []
            for a, b in pointers:
                k = cl.Kernel(program, "buf")
                k.set_arg(0, a)
                k.set_arg(1, b)
                k.set_arg(2, np.int32(n))
                out.append(k)
            return out

        flags = cl.svm_mem_flags.READ_WRITE
        svm_distinct = [cl.SVMAllocation(ctx, nbytes, 0, flags) for _ in range(K + 1)]
        svm_two = [cl.SVMAllocation(ctx, nbytes, 0, flags) for _ in range(2)]
        svm_arena = cl.svm_empty(ctx, flags, (K + 1) * stride // 4, np.float32, alignment=128)
        views = [svm_arena[i * stride // 4 : i * stride // 4 + nbytes // 4] for i in range(K + 1)]
        cases["SVM, distinct"] = svm_kernels([(svm_distinct[i], svm_distinct[i + 1]) for i in range(K)])
        cases["SVM, reused"] = svm_kernels([(svm_two[i % 2], svm_two[(i + 1) % 2]) for i in range(K)])
        cases["SVM arena"] = svm_kernels([(cl.SVM(views[i]), cl.SVM(views[i + 1])) for i in range(K)])
    side = int(np.sqrt(n // 4)) or 1
    fmt = cl.ImageFormat(cl.channel_order.RGBA, cl.channel_type.FLOAT)
    images = [cl.Image(ctx, mf.READ_WRITE, fmt, shape=(side, side)) for _ in range(2)]
    image_kernels = []
    for i in range(K):
        k = cl.Kernel(program, "img")
        k.set_args(images[i % 2], images[(i + 1) % 2])
        image_kernels.append(k)
    print(f"{device.name} ({device.platform.version.strip()}, driver {device.driver_version}); SVM capabilities {svm_caps}")
    print(f"{K} kernel objects a run, {n} floats each (buffers of {nbytes / (1 << 20):.2f} MiB), median of {args.rounds} runs")
    print(f"{'memory':<26} {'host us/enqueue':>16} {'wall us/launch':>15}")
    for name, kernels in cases.items():
        results[name] = measure(cl, queue, kernels, g, l, args.rounds)
    results["images, reused"] = measure(cl, queue, image_kernels, (side, side), None, args.rounds)
    # kernels shaped like a decoder's: workgroup memory and a barrier; eight buffers; a grid of
    # 19,000 workgroups of 256 (a 151,936-row head's), most of them doing nothing
    loc = []
    for i in range(K):
        k = cl.Kernel(program, "loc")
        k.set_args(distinct[i], distinct[i + 1], np.int32(n))
        loc.append(k)
    results["buffers, local memory + barrier"] = measure(cl, queue, loc, g, (256,), args.rounds)
    many = []
    for i in range(K):
        k = cl.Kernel(program, "many")
        k.set_args(distinct[i], distinct[i + 1], *[distinct[(i + j) % (K + 1)] for j in range(2, 8)], np.int32(n))
        many.append(k)
    results["buffers, 8 arguments"] = measure(cl, queue, many, g, l, args.rounds)
    results["buffers, 19k workgroups"] = measure(cl, queue, cases["buffers, distinct"], (151936 * 32,), (256,), args.rounds)
    # a size argument set before each launch, to a value that changes every run (a decoder's token count)
    results["buffers, distinct, size set each run"] = measure(cl, queue, cases["buffers, distinct"], g, l, args.rounds, (2, [n, n - 1]))
    results["buffers, distinct, size set, same value"] = measure(cl, queue, cases["buffers, distinct"], g, l, args.rounds, (2, [n]))
    # clSetKernelArg alone (no enqueue), the size argument of every kernel set again
    times = []
    for r in range(args.rounds + 1):
        start = time.perf_counter()
        for k in cases["buffers, distinct"]:
            k.set_arg(2, np.int32(n - r % 2))
        times.append((time.perf_counter() - start) / K * 1e6)
    set_alone = statistics.median(times[1:])
    for name, (h, w) in results.items():
        print(f"{name:<26} {h:16.1f} {w:15.1f}")
    print(f"{'set_arg alone (no enqueue)':<26} {set_alone:16.1f}")
    results["set_arg alone"] = (set_alone, float("nan"))
    extensions = [e for e in device.extensions.split() if "image" in e or "buffer" in e]
    print(f"\nimage extensions: {' '.join(extensions)}")
    counts = kinds_and_counts(cl, ctx, queue, K, args.rounds)
    print(f"{'args':>4} " + "".join(f"{kind + ' host/wall us':>30}" for kind in KINDS))
    for k in (2, 4, 8):
        print(f"{k:>4} " + "".join(f"{counts[(kind, k)][0]:>21.1f} / {counts[(kind, k)][1]:>6.1f}" for kind in KINDS))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device.name, "driver": device.driver_version, "svm_capabilities": int(svm_caps), "kernels": K,
                       "elements": n, "buffer_bytes": nbytes, "us": {k: {"host_per_enqueue": h, "wall_per_launch": w} for k, (h, w) in results.items()},
                       "image_extensions": extensions,
                       "by_kind_and_arguments": {f"{kind}, {k} arguments": {"host_per_enqueue": h, "wall_per_launch": w}
                                                 for (kind, k), (h, w) in counts.items()}}, f, indent=1)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
