"""The zoo at 224x224 on a real GPU: relax_vk's plans on OpenCL and Vulkan, side by side in one
process with the peers that run there (PyTorch eager on CUDA; ncnn and IREE when their wheels are
present; MNN OpenCL through ../shared/peers/mnn in the same machine session).

    python benchmarks/gpu_benchmark.py --build .gpu/bench [--models resnet18 mobilenet_v2] [--plans texture buffer]   # here (TVM)
    python3 benchmarks/gpu_benchmark.py --run .gpu/bench [--repeat 50] [--json out.json]     # GPU machine

    python benchmarks/gpu_benchmark.py --tune-bundle .gpu/tune_opencl --apis opencl          # here: tuning candidates
    python3 -m relax_vk tune --measure .gpu/tune_opencl --device gpu -o tune.json         # GPU machine
    relax-vk tune --import tune.json                                                       # here: into the database

``--tune-bundle`` writes the tuning candidates of the benchmark models' convs, the 1x1 convs of
their Linears included (at 224x224 or ``name@size``; with ``--device-name``, only those that
device's database has no record of; see
:mod:`relax_vk.tools.tune`). ``--build`` compiles each model for both APIs under the plans of :data:`PLANS` and writes a
transport bundle (``benchmarks/backend_latency.py``'s format: each distinct constant once) plus
the input and PyTorch's CPU output (Winograd plans' transformed weights are stored as recipes and
derived from the conv weights on the GPU machine, in numpy: shipped, they would not fit one
transfer). ``--run`` needs numpy, pyopencl and wgpu (no TVM): every
plan's wall-clock latency (inputs uploaded, outputs read back, median and min of ``--repeat``
runs taken in rounds across the plans: clock changes fall on all alike), the device span of its
dispatches and each kernel's share (medians of 5 profiled runs: every dispatch timestamped, a
compute pass each on Vulkan, a profiling queue on OpenCL, which lengthens a run of small kernels,
so on such models the span exceeds an unprofiled run's wall time: mobilenet_v2 on the H100 1.05 /
0.72 ms against walls of 0.62 / 0.54, Vulkan / OpenCL; it bounds the GPU's time from above); on
Vulkan (Python runtime) the GPU's time of an unprofiled run too ("busy": every dispatch in one
pass between two timestamps, a Python-runtime feature that is gone: "-"); its
error against PyTorch; PyTorch eager fp32 on CUDA
timed the same way (its first output checked against the CPU output); then the ratios the
issue's targets are stated in.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from backend_latency import load_artifact, store_constants  # noqa: E402  (the same transport bundle format)

SIZE = (1, 3, 224, 224)
MODELS = ("resnet18", "mobilenet_v2")
APIS = ("opencl", "vulkan")
PROFILED_RUNS = 5  # per-step device times: the median of this many profiled runs
KERNEL_FIELDS = ("schedule", "workload", "config", "config_source", "memory", "flops")


def PLANS(relax_vk):
    """``(name, ScopeOptions, tuned, reuse)``: the RFC's texture plan and the all-buffer plan with
    the device's tuned conv configurations, the default (``auto``) plan, the texture plan with the
    untuned default configurations, the texture plan with half texels (``--fp16``), with half texels
    and half arithmetic (``--fp16-arith``: float32 accumulators; ``acc16``: half accumulators too;
    a device without half arithmetic skips them), the texture and buffer plans without storage
    planning (every tensor its own allocation), and each memory kind with Winograd off, F(2,3) and
    F(4,3) on every 3x3 stride-1 conv (``--plans texture_direct texture_f23 texture_f43
    buffer_direct buffer_f23 buffer_f43``: the side-by-side table and the ``winograd`` ratio lines)."""
    return (
        ("texture", relax_vk.ScopeOptions(prefer="texture"), True, True),
        ("buffer", relax_vk.ScopeOptions(prefer="buffer"), True, True),
        ("auto", relax_vk.ScopeOptions(), True, True),
        ("texture_untuned", relax_vk.ScopeOptions(prefer="texture"), False, True),
        ("texture_fp16", relax_vk.ScopeOptions(prefer="texture", precision="fp16"), True, True),
        ("texture_fp16arith", relax_vk.ScopeOptions(prefer="texture", precision="fp16", arithmetic="fp16"), True, True),
        ("texture_fp16acc16", relax_vk.ScopeOptions(prefer="texture", precision="fp16", arithmetic="fp16", accumulate="fp16"), True, True),
        ("texture_noreuse", relax_vk.ScopeOptions(prefer="texture"), True, False),
        ("buffer_noreuse", relax_vk.ScopeOptions(prefer="buffer"), True, False),
        # Winograd forced on every 3x3 stride-1 conv (the plans above decide per conv: a tuning
        # record, else direct); "texture_direct"/"buffer_direct": Winograd off whatever the records say
        ("texture_direct", relax_vk.ScopeOptions(prefer="texture", winograd="off"), True, True),
        ("texture_f23", relax_vk.ScopeOptions(prefer="texture", winograd="f23"), True, True),
        ("texture_f43", relax_vk.ScopeOptions(prefer="texture", winograd="f43"), True, True),
        ("buffer_direct", relax_vk.ScopeOptions(prefer="buffer", winograd="off"), True, True),
        ("buffer_f23", relax_vk.ScopeOptions(prefer="buffer", winograd="f23"), True, True),
        ("buffer_f43", relax_vk.ScopeOptions(prefer="buffer", winograd="f43"), True, True),
    )


def build(outdir: str, models, device_name=None, plans=None, apis=APIS) -> None:
    import torch

    import relax_vk
    from relax_vk.frontends import from_torch
    from relax_vk.zoo import build_zoo_model

    os.makedirs(os.path.join(outdir, "blobs"), exist_ok=True)
    index = []
    conv_weights: dict = {}  # (Winograd plans' transformed weights are derived from these on the GPU machine)
    for spec in models:
        name, size = _model_size(spec)
        if _is_packaged(name):
            mod, x, y = _packaged(name, size)
            np.savez(os.path.join(outdir, f"{name}.io.npz"), x=x, y=y)
        else:
            model, x = build_zoo_model(name, input_shape=size)
            mod = from_torch(model, (x,))
            with torch.no_grad():
                np.savez(os.path.join(outdir, f"{name}.io.npz"), x=x.numpy(), y=model(x).numpy())
        for api in apis:
            for plan, options, tuned, reuse in [p for p in PLANS(relax_vk) if not plans or p[0] in plans]:
                t0 = time.perf_counter()
                make = relax_vk.target.vulkan if api == "vulkan" else relax_vk.target.opencl
                target = make(device_name=device_name if tuned else None)
                compiled = relax_vk.build(mod, target=target, options=options, model={"zoo": name})
                artifact = compiled.artifact(reuse=reuse)
                decision = compiled.plan().scope_rule or {}
                blobs = store_constants(outdir, artifact, conv_weights)
                index.append({"model": name, "api": api, "plan": plan, "program": artifact.program, "source": artifact.source, "constants": blobs,
                              "scope_rule": decision})  # fmt: skip
                print(f"built {name} {api} {plan}: {len(artifact.program['kernels'])} kernels in {time.perf_counter() - t0:.1f} s "
                      f"({decision.get('rule')} -> {decision.get('kind')})", flush=True)  # fmt: skip
    with gzip.open(os.path.join(outdir, "index.json.gz"), "wt") as f:
        json.dump(index, f)


def _model_size(spec: str):
    """``"name"`` (at :data:`SIZE`; a packaged model at its own shape), ``"name@256"`` (a square
    input of that size: MobileViT's 2x2 unfold needs sizes whose 1/32 is even) or
    ``"name@48x320"`` (height x width: a text line for the PP-OCR recognizer)."""
    name, _, side = spec.partition("@")
    if _is_packaged(name) and not side:
        return name, None
    # the zoo model's own batch and channels (the small UNet takes 4), at 224 or the size given
    lead = SIZE[:2] if _is_packaged(name) else _zoo_input(name)[:2]
    if not side:
        return name, lead + SIZE[2:]
    height, _, width = side.partition("x")
    return name, lead + (int(height), int(width or height))


def _zoo_input(name: str) -> tuple:
    from relax_vk.zoo import ZOO

    return tuple(ZOO[name].input_shape)


def _is_packaged(name: str) -> bool:
    from relax_vk.zoo.packaged import PACKAGED

    return name in PACKAGED


def _packaged(name: str, size):
    """``(module, input, onnxruntime's output)`` of a packaged ONNX model at ``size`` (or its own)."""
    import onnxruntime

    from relax_vk.frontends import from_onnx
    from relax_vk.zoo.packaged import PACKAGED, example_input, packaged_model_path

    ((input_name, shape),) = PACKAGED[name].input_shapes.items()
    shape = tuple(size or shape)
    path = packaged_model_path(name)
    x = example_input(name, shape=shape)
    y = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {input_name: x})[0]
    return from_onnx(path, {input_name: shape}), x, y


def tune_bundle(outdir: str, models, apis, missing_for=None, winograd: bool = True) -> None:
    from relax_vk.frontends import from_torch
    from relax_vk.tools.tune import write_bundle
    from relax_vk.zoo import build_zoo_model

    modules = []
    for spec in models:
        name, size = _model_size(spec)
        if _is_packaged(name):
            modules.append(_packaged(name, size)[0])
            continue
        model, x = build_zoo_model(name, input_shape=size)
        modules.append(from_torch(model, (x,)))
    index = write_bundle(modules, outdir, apis, missing_for=missing_for, winograd=winograd)
    print(f"{len(index['cases'])} cases in {index['seconds']:.0f} s")


def _time(fn, repeat: int):
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times)), float(np.min(times))


def _interleaved(sessions, x: np.ndarray, repeat: int):
    """Wall-clock ms of ``repeat`` runs of every session, taken in rounds (each round runs every
    session once, starting one session later than the last round, each run right after a warm-up
    run of its own), so clock changes and a neighbour's caches fall on all plans alike."""
    laps = [[] for _ in sessions]
    for r in range(repeat):
        for i in range(len(sessions)):
            k = (i + r) % len(sessions)
            laps[k].append(sessions[k].time([x], 1)["median"])  # (Vulkan: unprofiled, one pass)
    return laps


def _torch_cuda(name: str, x: np.ndarray, repeat: int):
    if _is_packaged(name):  # (an ONNX model: no PyTorch module to run)
        return None
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        from relax_vk.zoo import build_zoo_model

        model, _ = build_zoo_model(name, input_shape=x.shape)
        model = model.cuda().eval()
        torch.backends.cudnn.benchmark = True

        def run():
            with torch.no_grad():
                out = model(torch.from_numpy(x).cuda()).cpu().numpy()
            return out

        out = run()
        med, mn = _time(run, repeat)
        return {"wall_ms": med, "min_ms": mn, "out": out}
    except Exception as err:  # a peer that cannot run here is reported, not fatal
        return {"error": f"{type(err).__name__}: {err}"}


def run(outdir: str, repeat: int, json_path: str, models, shader_checks=(), runtimes=("python",), plans=None) -> None:
    from relax_vk.runtime import load, select_device
    from relax_vk.runtime import DeviceLimitError

    devices = {"opencl": select_device("opencl", None), "vulkan": select_device("vulkan", None)}  # (a GPU where there is one)
    print(f"opencl: {devices['opencl'].name.strip()} ({devices['opencl'].row['platform'].strip()}); vulkan: {devices['vulkan'].name}")
    with gzip.open(os.path.join(outdir, "index.json.gz"), "rt") as f:
        names = {m.partition("@")[0] for m in models or ()}
        index = [e for e in json.load(f) if not names or e["model"] in names]
    rows = []
    for name in dict.fromkeys(e["model"] for e in index):
        io = np.load(os.path.join(outdir, f"{name}.io.npz"))
        x, ref = io["x"], io["y"]
        print(f"\n{name} at {'x'.join(map(str, x.shape))}")
        header = f"{'engine':<10} {'plan':<15} {'wall med ms':>11} {'wall min ms':>11} {'device ms':>10} {'busy ms':>8} {'kernels':>7} {'max err':>9} {'dev MiB':>8}"
        print(header)
        print("-" * len(header))
        results = {}
        entries = [e for e in index if e["model"] == name and (not plans or e["plan"] in plans)]
        # each plan once per runtime: the native library (C, no Python per step) beside pyopencl /
        # wgpu-py, as "PLAN+native", timed in the same rounds
        entries = [dict(e, plan=e["plan"] + ("+native" if rt == "native" else ""), native=rt == "native") for rt in runtimes for e in entries]
        # each Vulkan plan once more per --shader-checks mode (wgpu's runtime checks dropped), timed in
        # the same rounds ("PLAN+native/none" is compared with "PLAN+native", on its own runtime)
        entries += [dict(e, plan=f"{e['plan']}/{checks}", checks=checks) for checks in shader_checks for e in entries if e["api"] == "vulkan"]
        sessions, kept = [], []
        for entry in entries:
            try:
                sessions.append(load(load_artifact(outdir, entry), device=devices[entry["api"]], profile=True,
                                     **({"shader_checks": entry["checks"]} if "checks" in entry else {})))  # fmt: skip
                kept.append(entry)
            except DeviceLimitError as err:  # (half arithmetic on a device without it)
                print(f"{entry['api']:<10} {entry['plan']:<15.15} skipped: {err}")
        entries = kept
        firsts = [session.run([x])[0] for session in sessions]
        laps = _interleaved(sessions, x, repeat)
        for entry, session, out, lap in zip(entries, sessions, firsts, laps):
            spans, steps = [], []
            for _ in range(PROFILED_RUNS):  # warm runs, clocks up after the timed ones
                session.run([x])
                spans.append(session.last_device_ms)  # a run's span (its steps' times tile it)
                steps.append([k["ms"] for k in session.last_profile])
            device_ms = float(np.median(spans))
            # the GPU's time of an unprofiled run (Vulkan, Python runtime: one pass, two timestamps)
            busy_ms = session.busy_ms([x]) if hasattr(session, "busy_ms") else float("nan")
            info = {k["name"]: k for k in session.program["kernels"]}
            kernels = {}
            for k, ms in zip(session.last_profile, np.median(np.array(steps), axis=0)):
                row = kernels.setdefault(k["name"], {"ms": 0.0, "calls": 0, **{f: info.get(k["name"], {}).get(f) for f in KERNEL_FIELDS}})
                row["ms"] += float(ms)
                row["calls"] += 1
            lat = {"median": float(np.median(lap)), "min": float(np.min(lap))}
            med, mn = lat["median"], lat["min"]
            err = float(np.max(np.abs(out - ref)))
            rule = entry.get("scope_rule") or {}
            mib = session.device_bytes / (1 << 20)
            results[f"{entry['api']}/{entry['plan']}"] = {"wall_ms": med, "min_ms": mn, "device_ms": device_ms, "busy_ms": busy_ms, "max_err": err, "kernels": kernels,
                                                         "scope_rule": rule, "device_mib": mib, "rel_err": err / float(np.max(np.abs(ref))),
                                                         "top1": bool(out.argmax() == ref.argmax()), "memory": session.program.get("memory")}  # fmt: skip
            chose = f"  ({rule.get('rule')} -> {rule.get('kind')})" if entry["plan"] == "auto" else ""
            busy = f"{busy_ms:>8.3f}" if busy_ms == busy_ms else f"{'-':>8}"
            print(f"{entry['api']:<10} {entry['plan']:<15.15} {med:>11.3f} {mn:>11.3f} {device_ms:>10.3f} {busy} {len(session.program['kernels']):>7} {err:>9.1e} "
                  f"{mib:>8.1f}{chose}", flush=True)  # fmt: skip
            convs = [k for k in kernels.values() if k.get("flops")]
            conv_ms = sum(k["ms"] for k in convs)
            if conv_ms > 0:
                gflops = sum(k["flops"] * k["calls"] for k in convs) / conv_ms / 1e6
                print(f"{'':<10} {'':<15} convs: {conv_ms:.3f} ms of {device_ms:.3f} device ms, {gflops:.0f} GFLOP/s overall")
        del sessions
        peer = _torch_cuda(name, x, repeat)
        if peer and "error" not in peer:
            err = float(np.max(np.abs(peer["out"] - ref)))
            results["torch-cuda/eager"] = {"wall_ms": peer["wall_ms"], "min_ms": peer["min_ms"], "max_err": err}
            print(f"{'torch-cuda':<10} {'eager fp32':<15} {peer['wall_ms']:>11.3f} {peer['min_ms']:>11.3f} {'-':>10} {'-':>8} {'-':>7} {err:>9.1e}")
        elif peer:
            print(f"torch-cuda: {peer['error']}")
        for api in APIS:
            tex, buf, auto = (results.get(f"{api}/{p}") for p in ("texture", "buffer", "auto"))
            if tex and buf:
                print(f"{api}: texture/buffer wall {tex['wall_ms'] / buf['wall_ms']:.2f} (<= 1.2 wanted)", end="")
                if auto:
                    print(f", auto/faster-of-two {auto['wall_ms'] / min(tex['wall_ms'], buf['wall_ms']):.2f} (<= 1.05 wanted)", end="")
                untuned = results.get(f"{api}/texture_untuned")
                if untuned:
                    print(f", texture untuned/tuned {untuned['wall_ms'] / tex['wall_ms']:.2f}", end="")
                print()
            half, whole = results.get(f"{api}/texture_fp16"), results.get(f"{api}/texture_noreuse")
            if tex and half:
                print(f"{api}: fp16/fp32 texture wall {half['wall_ms'] / tex['wall_ms']:.2f}, memory {half['device_mib'] / tex['device_mib']:.2f}; "
                      f"fp16 rel err {half['rel_err']:.1e}, top-1 {'same' if half['top1'] else 'DIFFERENT'}")  # fmt: skip
            for plan in ("texture_fp16arith", "texture_fp16acc16"):
                arith = results.get(f"{api}/{plan}")
                if tex and half and arith:
                    print(f"{api}: {plan}: wall / fp32 texture {arith['wall_ms'] / tex['wall_ms']:.2f}, / fp16 texels {arith['wall_ms'] / half['wall_ms']:.2f}; "
                          f"rel err {arith['rel_err']:.1e}, top-1 {'same' if arith['top1'] else 'DIFFERENT'}")  # fmt: skip
            if tex and whole:
                print(f"{api}: storage planning: texture plan {whole['device_mib']:.1f} -> {tex['device_mib']:.1f} MiB, "
                      f"wall reuse/no-reuse {tex['wall_ms'] / whole['wall_ms']:.2f}")  # fmt: skip
            for kind in ("texture", "buffer"):
                direct = results.get(f"{api}/{kind}_direct")
                for tile in ("f23", "f43"):
                    wino = results.get(f"{api}/{kind}_{tile}")
                    if direct and wino:
                        print(f"{api}: winograd {tile} {kind}: wall {wino['wall_ms']:.3f} vs direct {direct['wall_ms']:.3f} ms "
                              f"({wino['wall_ms'] / direct['wall_ms']:.2f}x), device {wino['device_ms'] / direct['device_ms']:.2f}x, "
                              f"rel err {wino['rel_err']:.1e}, top-1 {'same' if wino['top1'] else 'DIFFERENT'}")  # fmt: skip
            if auto and "torch-cuda/eager" in results:
                print(f"{api}: auto plan / torch eager {auto['wall_ms'] / results['torch-cuda/eager']['wall_ms']:.2f} (<= 1.5 wanted)")
        for suffix in dict.fromkeys("+native" if rt == "native" else "" for rt in runtimes):
            ocl, vk = results.get(f"opencl/auto{suffix}"), results.get(f"vulkan/auto{suffix}")
            if ocl and vk:
                print(f"auto plan{suffix or ' (python runtimes)'}: vulkan/opencl wall {vk['wall_ms'] / ocl['wall_ms']:.2f} (<= 1.25 wanted)")
        for key, r in results.items():  # e.g. vulkan/auto/none next to vulkan/auto
            base = results.get(key.rsplit("/", 1)[0]) if key.count("/") == 2 else None
            if base:
                print(f"{key}: shader checks dropped / wgpu's bounds checks: wall {r['wall_ms'] / base['wall_ms']:.2f}, "
                      f"device {r['device_ms'] / base['device_ms']:.2f}, max |diff| of outputs vs reference {r['max_err']:.1e} / {base['max_err']:.1e}")  # fmt: skip
        rows.append({"model": name, "results": results})
    if json_path:
        with open(json_path, "w") as f:
            json.dump(rows, f, indent=1)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", metavar="DIR")
    p.add_argument("--tune-bundle", metavar="DIR")
    p.add_argument("--device-name", default=None, help="build for this device's tuning database (e.g. 'NVIDIA H100 80GB HBM3'); "
                   "with --tune-bundle: only the convs that database lacks")
    p.add_argument("--apis", nargs="*", default=list(APIS))
    p.add_argument("--no-winograd", action="store_true", help="--tune-bundle: direct conv candidates only (no Winograd cases)")
    p.add_argument("--run", metavar="DIR")
    p.add_argument("--models", nargs="*", default=None, help=f"--build/--tune-bundle: default {' '.join(MODELS)}; --run: every model of the bundle")
    p.add_argument("--plans", nargs="*", default=None, help="build (--build) or time (--run) only these plans (default: all of PLANS / the bundle's)")
    p.add_argument("--runtimes", nargs="*", default=["native"], choices=("native",),
                   help="--run: the runtimes to time each plan on, in the same rounds: python (pyopencl, wgpu-py) and/or native "
                        "(the C library, $RELAX_VK_NATIVE_LIB or native/build)")
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--shader-checks", nargs="*", default=[], choices=("loops", "none"),
                   help="--run: also time every Vulkan plan with these wgpu shader checks (default: only wgpu's bounds checks)")
    p.add_argument("--json", default="")
    args = p.parse_args()
    if args.tune_bundle:
        tune_bundle(args.tune_bundle, args.models or MODELS, args.apis, args.device_name, not args.no_winograd)
    elif args.build:
        build(args.build, args.models or MODELS, args.device_name, args.plans, args.apis)
    elif args.run:
        run(args.run, args.repeat, args.json, args.models, args.shader_checks, args.runtimes, args.plans)
    else:
        p.error("give --build DIR or --run DIR")
    return 0


if __name__ == "__main__":
    sys.exit(main())
