"""The ``relax-vk`` command line.

* ``relax-vk plan MODEL [--target opencl|vulkan] [--json]``: the memory plan of a model;
* ``relax-vk show MODEL [--lowering]``: the module after every layout and scope stage (the stages
  ``plan`` and ``build`` run: :data:`relax_vk.pipeline.STAGES`; ``--lowering``: and every lowering stage);
* ``relax-vk build MODEL [--target opencl|vulkan] -o DIR``: compile; writes ``kernels.cl`` (OpenCL)
  or ``kernels.wgsl`` (Vulkan), ``plan.json`` (the ``plan --json`` contract), ``module.py`` (the
  final Relax module as TVMScript) and ``model.rvk``; ``-o FILE.rvk`` writes just the artifact;
* ``relax-vk run MODEL_OR_RVK [--backend opencl|vulkan] [--device D] [--check] [--repeat N] [--profile] [--json]``:
  run on OpenCL or Vulkan (the native library); an ``.rvk`` file runs on the backend it was built for;
* ``relax-vk profile MODEL_OR_RVK --device D [--json] [--plot FILE.png] [--repeat N]``: time per op
  of the user's model (:mod:`relax_vk.tools.profile`); ``relax-vk bisect MODEL --device D [--json]``:
  the first op whose output on the device differs from TVM llvm (:mod:`relax_vk.tools.bisect`;
  exit 1 when one does);
* ``relax-vk devices``: the OpenCL devices and Vulkan adapters the native library sees;
* ``relax-vk demo``: the README's main job on the built-in default model;
* ``relax-vk models``: the built-in example models;
* ``relax-vk tune MODEL... (--device D | --bundle DIR)``, ``relax-vk tune --measure DIR -o R.json``,
  ``relax-vk tune --import R.json``: measure conv schedule candidates on a device, keep the best
  in the tuning database (:mod:`relax_vk.tools.tune`); ``--measure`` needs no TVM.

MODEL is a built-in example or zoo name (``relax-vk models``), a ``.onnx`` file or a ``.pt2`` file
(``torch.export.save``). ``--json`` outputs are stable contracts:
``plan`` as in :mod:`relax_vk.analysis.memory_plan`; ``run`` prints ``{"backend", "device", "ok",
"max_abs_err", "max_rel_err", "latency_ms": {"median", "min", "max"}, "kernels": [{"name", "ms"}],
"device_ms"}``: ``latency_ms`` of unprofiled runs; with ``--profile``, the kernels (and copies) of a
profiled run after the timed runs, whose times tile that run's device span ``device_ms`` (without
it ``kernels`` is empty and ``device_ms`` null); a model of run-time dims adds ``"dims"`` (the run's
values) and ``"variant"`` (the shape variant that ran, its dims, or null).
``devices`` prints a list of ``{"api", "index", "platform", "device", "type", "image_support",
"image2d_max", "image_max_array_size", "usable", "problem", "limits"}`` (``limits``: the
:class:`~relax_vk.core.limits.DeviceLimits` fields). ``run`` and ``devices`` on ``.rvk``
files need only numpy and the native library (no TVM).

Device limits (:class:`relax_vk.core.limits.DeviceLimits`): ``--device D`` plans for that local
device's limits (and ``run`` runs on it; ``run`` without ``--device`` plans for the device it
picks), ``--preset NAME`` for a preset's; ``--spatial-limit``, ``--depth-limit``,
``--max-buffer-bytes`` and ``--max-workgroups`` override single limits. An ``.rvk`` that does not
fit the device is re-planned for it when TVM and its model are at hand.

Exit codes: 0 success; 1 ``run --check`` found a mismatch; 2 the input or the device cannot be
used (unknown model, malformed file, unsupported op or dtype, a model that does not fit: the
message names it); 3 an internal error (a relax_vk bug: the message says so; ``RELAX_VK_DEBUG=1``
prints the traceback). No user error prints a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional

from ..core.errors import RelaxVKError, UnsupportedError

DEFAULT_MODEL = "rfc-conv2d"
FP16_RTOL = 1e-2  # run --check's bound for half-texel builds (of the largest output magnitude)


def _input_shapes(args) -> dict:
    from ..frontends.onnx import parse_input_shape

    return dict(parse_input_shape(text) for text in (getattr(args, "input_shape", None) or []))


def _dims(args) -> dict:
    from ..frontends.onnx import parse_dim

    return dict(parse_dim(text) for text in (getattr(args, "dim", None) or []))


def _load(name: str, args=None):
    return _load_with_source(name, args)[0]


def _load_with_source(name: str, args=None):
    from ..frontends import load_model

    half = args is not None and (getattr(args, "fp16", False) or getattr(args, "fp16_arith", False))
    return load_model(name, _input_shapes(args) if args is not None else None, _dims(args) if args is not None else None,
                      dtype="float16" if half else None,  # (a decoder checkpoint: float16 weights, activations and cache)
                      quantize="int4" if getattr(args, "int4", False) else None, logits=getattr(args, "logits", None))  # fmt: skip


def _target(args):
    """The target of the command: limits from --preset or the --device's, then the flags' overrides."""
    from ..core import target

    _select_device(args)
    base = args.device_limits
    if getattr(args, "preset", None):
        from ..core.limits import preset

        base = preset(args.preset)
    make = target.vulkan if args.target == "vulkan" else target.opencl
    return make(
        args.spatial_limit, args.depth_limit, limits=base, device_name=_device_name(args),
        max_buffer_bytes=getattr(args, "max_buffer_bytes", None), max_workgroups=getattr(args, "max_workgroups", None),
    )  # fmt: skip


def _device_name(args) -> Optional[str]:
    """The device whose tuning database the build consults: --device-name, else the --device's."""
    if getattr(args, "device_name", None):
        return args.device_name
    from ..core.limits import device_name

    device = getattr(args, "run_device", None)
    return (device_name(device) or None) if device is not None else None


def _select_device(args, default: bool = False) -> None:
    """With --device (or ``default``: the device ``run`` would pick): the local OpenCL device or
    Vulkan adapter (``args.run_device``) and its limits (``args.device_limits``), which shape the
    plan; otherwise neither."""
    if getattr(args, "_device_selected", False):
        return
    args._device_selected = True
    args.run_device, args.device_limits = None, None
    spec = getattr(args, "device", None)
    if spec is None and not default:
        return
    from ..runtime import select_device

    args.run_device = select_device(args.target or "opencl", spec)
    args.device_limits = args.run_device.limits


def _options(args):
    from ..core.options import ScopeOptions

    return ScopeOptions(textures=not args.no_textures, weights_in_texture=not args.weights_in_buffers, prefer=args.prefer,
                        precision="fp16" if getattr(args, "fp16", False) or getattr(args, "fp16_arith", False) else "fp32",
                        arithmetic="fp16" if getattr(args, "fp16_arith", False) else "fp32", accumulate=getattr(args, "accumulate", "fp32"),
                        fp32_ops=tuple(getattr(args, "fp32_op", None) or ()),
                        winograd=getattr(args, "winograd", "auto"))  # fmt: skip


def _registry(args):
    from ..core.registry import default_registry, rfc_registry

    return rfc_registry() if args.registry == "rfc" else default_registry()


def _add_model_args(p: argparse.ArgumentParser, model_default: Optional[str] = None) -> None:
    if model_default is None:
        p.add_argument("model", help="built-in example or zoo name (see `relax-vk models`), a .onnx / .pt2 file, or a Hugging Face "
                       "decoder checkpoint directory")
    p.add_argument("--target", "--backend", dest="target", choices=("opencl", "vulkan"), default=None,
                   help="GPU API to plan and build for (default opencl; an .rvk file's own target for run)")
    p.add_argument("--device", default=None,
                   help="plan for this local device's limits (OpenCL: pocl, gpu or PLATFORM:DEVICE; Vulkan: lavapipe, gpu or N); "
                        "run also runs on it")
    p.add_argument("--preset", default=None, help="plan for a preset's limits (adreno6xx, adreno7xx, mali_valhall, apple, nvidia, pocl, lavapipe)")
    p.add_argument("--spatial-limit", type=int, default=None,
                   help="max texture width/height (default: the --device's or --preset's, else 16384)")
    p.add_argument("--depth-limit", type=int, default=None,
                   help="max texture array layers (default: the --device's or --preset's, else 2048)")
    p.add_argument("--max-buffer-bytes", type=int, default=None,
                   help="largest buffer one kernel binding may address; larger constant weights are split")
    p.add_argument("--max-workgroups", type=int, default=None, help="workgroups per grid dimension; larger grids are folded")
    p.add_argument("--weights-in-buffers", action="store_true", help="keep conv2d weights in buffers")
    p.add_argument("--no-textures", action="store_true", help="all-buffer plan (the same as --prefer buffer)")
    p.add_argument("--prefer", choices=("auto", "texture", "buffer"), default="auto",
                   help="memory kind: texture (the RFC's rule), buffer, or auto (default: measured conv times from the tuning "
                        "database of the --device / --device-name, else the RFC's rule)")
    p.add_argument("--fp16", action="store_true",
                   help="store textures (activations and weights) as half texels: half the memory; kernels compute in float32. "
                        "A decoder checkpoint: float16 weights, activations and cache, float32 accumulation")
    p.add_argument("--fp16-arith", action="store_true",
                   help="half arithmetic too (implies --fp16): kernels compute in float16, accumulating in --accumulate; needs the "
                        "device's shader-f16 (Vulkan) or cl_khr_fp16 (OpenCL); ops that overflow float16 on a calibration run stay float32")
    p.add_argument("--accumulate", choices=("fp32", "fp16"), default="fp32",
                   help="with --fp16-arith: the dtype reductions, convs and matmuls accumulate in (default fp32)")
    p.add_argument("--fp32-op", action="append", metavar="NAME",
                   help="with --fp16-arith: keep this op in float32 (model op, kernel or tensor name; fnmatch patterns; repeatable)")
    p.add_argument("--winograd", choices=("auto", "off", "f23", "f43"), default="auto",
                   help="3x3 stride-1 convs: Winograd F(2,3) or F(4,3) for all (f23, f43), none (off), or auto (default: "
                        "the tuning database's record per conv, else direct)")
    p.add_argument("--device-name", default=None,
                   help="the device the build is for (its tuning database; default: the --device's name), e.g. 'NVIDIA H100 80GB HBM3'")
    p.add_argument(
        "--registry", choices=("default", "rfc"), default="default",
        help="op registry: relax_vk's default, or the RFC's (layout transforms read buffers)",
    )
    p.add_argument("--input-shape", action="append", metavar="NAME=D0,D1,...",
                   help="fix a symbolic input dimension of an ONNX model (repeat per input), e.g. x=1,3,224,224; "
                        "an axis may name a run-time dim instead: x=1,3,48,W with --dim W=MIN:MAX")
    p.add_argument("--dim", action="append", metavar="NAME=MIN:MAX[:STEP]",
                   help="keep an ONNX input dimension symbolic with this inclusive range: one artifact runs every size in it "
                        "(repeat per dim), e.g. W=32:1280; a STEP when the sizes must be its multiples, e.g. H=32:960:32")
    p.add_argument("--specialize", action="append", metavar="NAME=VALUE,...",
                   help="with --dim: also build the model fixed to these sizes (every dim given; repeatable), carried in the same "
                        "artifact: a run at them runs that build (packed textures, tuned convs), any other the generic one")


def _scoped(args, model: str):
    from ..pipeline import scope_pipeline

    return scope_pipeline(_target(args), registry=_registry(args), options=_options(args))(_load(model, args))


def _scoped_with_decision(args, model: str):
    """The scoped module and the memory-kind decision behind it (which rule chose the kind)."""
    from ..passes.scope.choose_memory_kind import decide
    from ..pipeline import scope_pipeline

    mod, target, options = _load(model, args), _target(args), _options(args)
    return scope_pipeline(target, registry=_registry(args), options=options)(mod), None, decide(mod, target, options)


def cmd_plan(args) -> int:
    from ..analysis.memory_plan import plan

    result = plan(*_scoped_with_decision(args, args.model), texel=_options(args).texel_dtype)
    print(json.dumps(result.to_json(), indent=2) if args.json else result.table())
    return 0


def _shown_stages(args):
    """``(stage, module after it)`` for every layout and scope stage of
    :data:`relax_vk.pipeline.STAGES` (with ``--lowering``, every lowering stage too), on the model
    of ``args``: the passes ``plan`` and ``build`` run, for the same target, registry and options
    (the last scope stage's module is ``plan``'s)."""
    from ..pipeline import stages

    groups = ("layout", "scope", "lowering") if getattr(args, "lowering", False) else ("layout", "scope")
    mod = _load(args.model, args)
    for stage, run in stages(_target(args), _registry(args), _options(args), groups=groups):
        mod = run(mod)
        yield stage, mod


def cmd_show(args) -> int:
    for stage, mod in _shown_stages(args):
        print(f"# ===== after stage {stage.number}: {stage.name} =====")
        print(mod["main"].script(show_meta=False))
    return 0


def _compare(outputs, reference, rtol: float, atol: float):
    """``(all close, max abs error, max relative error)`` of outputs against reference outputs; a
    NaN where the reference has one too agrees (a fully masked attention row is NaN in PyTorch's
    softmax as on the device), a NaN on one side only is an infinite error."""
    import numpy as np

    def diff(o, r):
        o, r = np.asarray(o, np.float64), np.asarray(r, np.float64)
        both = np.isnan(o) & np.isnan(r)
        d = np.where(both, 0.0, np.abs(o - r))
        return np.where(np.isnan(d), np.inf, d), np.where(both, 0.0, np.abs(r))

    errors = [diff(o, r) for o, r in zip(outputs, reference)]
    abs_err = max((float(np.max(d)) if d.size else 0.0) for d, _ in errors)
    rel_err = max((float(np.max(d / np.maximum(m, 1e-6))) if d.size else 0.0) for d, m in errors)
    ok = all(np.allclose(o, r, rtol=rtol, atol=atol, equal_nan=True) for o, r in zip(outputs, reference))
    return bool(ok), abs_err, rel_err


def _check_tolerances(program: dict, reference, rtol: Optional[float] = None, atol: Optional[float] = None):
    """``(rtol, atol)`` to check a program's outputs against ``reference`` at: the given ones, else
    1e-4 each, or for a program that stores textures as half texels (``--fp16``) or computes in
    half (``--fp16-arith``) the fp16 bound (half values carry 11 significant bits): ``FP16_RTOL`` and ``FP16_RTOL`` of the largest output
    magnitude."""
    if any(t.get("texel") == "float16" for t in program["tensors"]) or "arithmetic" in program:
        import numpy as np

        scale = max(float(np.max(np.abs(r))) for r in reference)
        return (FP16_RTOL if rtol is None else rtol), (FP16_RTOL * scale if atol is None else atol)
    return (1e-4 if rtol is None else rtol), (1e-4 if atol is None else atol)


def _warm_profile(session, inputs) -> "tuple[list, float]":
    """A profiled run after warm-up: ``(per-step times, the device span of that run)``; the steps'
    times tile the span (``session.last_profile``, ``session.last_device_ms``). The first run of a
    session pays shader compilation and first-touch costs (on lavapipe a cold run's steps summed
    to 7x (rfc-conv2d) and 35x (conv20) the warm median; on pocl conv20's cold device span was
    10.3 s against 126 ms warm), so profiles are taken warm."""
    session.time(inputs, repeat=1)  # (two unprofiled runs: warm even when called first)
    session.run(inputs)
    return session.last_profile, session.last_device_ms


def _print_profile(profile, device_ms: float) -> None:
    total = sum(k["ms"] for k in profile)
    print(f"warm profiled run: device time {device_ms:.4f} ms = its steps {total:.4f} ms + idle between them {device_ms - total:.4f} ms")
    print(f"  {'kernel / copy':<60} {'ms':>9}")
    for k in profile:
        print(f"  {k['name'][:60]:<60} {k['ms']:>9.4f}")


def _demo_run(compiled, device, model: str, label: str):
    """Run a compiled model, check it against TVM llvm (at the fp16 bound for half-texel builds),
    time it, profile a warm run; returns whether it matched."""
    from ..runtime import load
    from ..analysis.reference import run_on_cpu

    artifact = compiled.artifact()
    session = load(artifact, device=device, profile=True)
    inputs = _inputs(argparse.Namespace(inputs=None, seed=0), session)
    outputs = session.run(inputs)
    reference = run_on_cpu(_load(model), inputs)
    rtol, atol = _check_tolerances(artifact.program, reference)
    ok, abs_err, _ = _compare(outputs, reference, rtol=rtol, atol=atol)
    print(f"{label} device: {session.device_name}  check vs TVM llvm: {'OK' if ok else 'MISMATCH'} "
          f"(max abs err {abs_err:.3g}; rtol {rtol:.3g}, atol {atol:.3g})")  # fmt: skip
    lat = session.time(inputs, repeat=10)
    print(f"latency over 10 runs: median {lat['median']:.3f} ms (min {lat['min']:.3f}, max {lat['max']:.3f})")
    _print_profile(*_warm_profile(session, inputs))
    return ok


def _unavailable_errors():
    """The errors that mean "no usable device of this API here" (not a failure of relax_vk)."""
    from ..runtime import DeviceUnavailable, LibraryUnavailable

    return (DeviceUnavailable, LibraryUnavailable, ImportError)


def cmd_demo(args) -> int:
    _select_device(args)
    print(f"relax_vk demo: model {args.model!r}, target {args.target}")
    print("[1/4] scope, lower and compile ...", flush=True)
    compiled = _compile(args, args.model)
    print(compiled.main.script(show_meta=False))
    print("[2/4] memory plan")
    print(compiled.plan().table())
    api = "Vulkan" if args.target == "vulkan" else "OpenCL"
    print(f"[3/4] run on {api}, check, time ...", flush=True)
    ok = _demo_run(compiled, args.run_device, args.model, api)
    other = "vulkan" if args.target == "opencl" else "opencl"
    print(f"[4/4] the same plan on {other.capitalize() if other == 'vulkan' else 'OpenCL'} ...", flush=True)
    try:
        compiled_other = _compile(argparse.Namespace(**dict(vars(args), target=other, device=None, _device_selected=False)), args.model)
        ok = _demo_run(compiled_other, None, args.model, "Vulkan" if other == "vulkan" else "OpenCL") and ok
    except _unavailable_errors() as err:  # no device of the other API here: say so (real failures still fail)
        print(f"skipped: {err}")
    return 0 if ok else 1


def _write_atomically(out: str, files) -> None:
    """Write ``{name: text or bytes}`` into folder ``out`` all or nothing (:mod:`.staging`)."""
    import os

    from .staging import staged_folder

    with staged_folder(out, prefix=".relax-vk-build-") as staging:
        for name, data in files.items():
            with open(os.path.join(staging, name), "wb" if isinstance(data, bytes) else "w") as f:
                f.write(data)


def _compile(args, model: str):
    from ..compiler import build

    mod, source = _load_with_source(model, args)
    return build(mod, _target(args), registry=_registry(args), options=_options(args), model=source, specialize=_specializations(args))


def _specializations(args) -> list:
    """``--specialize H=224,W=224`` (repeatable): ``[{"H": 224, "W": 224}]``."""
    out = []
    for text in getattr(args, "specialize", None) or []:
        values = {}
        for part in text.split(","):
            name, sep, value = part.partition("=")
            if not sep or not name.strip() or not value.strip().lstrip("-").isdigit():
                raise ValueError(f"--specialize {text}: expected NAME=VALUE[,NAME=VALUE...], e.g. H=224,W=224")
            values[name.strip()] = int(value)
        out.append(values)
    return out


def _build_tvm_library(args) -> int:
    """``build --runtime tvm``: the model as a library for TVM's own runtime (relax_vk.tvm_runtime)."""
    from .. import tvm_runtime
    from ..core.errors import UnsupportedError

    if not args.output.endswith((".so", ".dylib", ".dll")):
        raise UnsupportedError(f"--runtime tvm writes a shared library: name the output MODEL.so, not {args.output!r}")
    if getattr(args, "specialize", None):
        raise UnsupportedError("--specialize builds shape variants into an .rvk for relax_vk's runtime; --runtime tvm builds the generic program only")
    tvm_runtime.library_compiler(args.host, args.cc)  # (a missing cross compiler fails before the compile)
    print(f"[1/2] compiling {args.model} for {args.target or 'opencl'} under TVM's VM, host {args.host or 'this machine'} ...", flush=True)
    mod, _ = _load_with_source(args.model, args)
    executable = tvm_runtime.compile(mod, _target(args), host=args.host, registry=_registry(args), options=_options(args))
    tvm_runtime.export_library(executable, args.output, host=args.host, cc=args.cc)
    print(f"[2/2] wrote {args.output}: load it with relax_vk.load_vm(path, tvm.opencl(0)) or TVM's C++ API (examples/)")
    if not tvm_runtime.has_runtime("opencl"):
        print("      note: this machine's TVM runtime has no OpenCL; run the library with a libtvm_runtime built with USE_OPENCL=ON")
    return 0


def _quantize_first(args) -> None:
    """``build --quantize``: the ONNX model quantized by onnxruntime's tools
    (:mod:`relax_vk.frontends.quantize`), written to a file the build then reads as its model
    (so the artifact names the quantized model, which ``run --check`` rebuilds)."""
    from ..core.errors import UnsupportedError
    from ..frontends.loader import is_checkpoint
    from ..frontends.quantize import quantize_onnx, read_calibration
    from ..zoo.packaged import PACKAGED, packaged_model_path

    if args.calibrate and args.quantize != "int8":
        raise UnsupportedError(f"--calibrate goes with --quantize int8; {'--quantize ' + args.quantize if args.quantize else 'a float build'} takes no calibration samples")
    if not args.quantize:
        return
    if is_checkpoint(args.model):  # a decoder quantizes its own weights as it is built
        if args.quantize != "int4":
            raise UnsupportedError(f"--quantize {args.quantize}: a decoder checkpoint takes --quantize int4 (4-bit weights); int8 applies to ONNX models")
        args.int4 = True
        return
    if args.model in PACKAGED:
        if not args.input_shape:
            args.input_shape = [f"{k}={','.join(map(str, v))}" for k, v in PACKAGED[args.model].input_shapes.items()]
        path = packaged_model_path(args.model)
    elif args.model.endswith(".onnx"):
        path = args.model
    else:
        raise UnsupportedError(f"--quantize applies to ONNX models (a .onnx file or a packaged model), not {args.model!r}")
    import onnx

    stem = os.path.splitext(args.output.rstrip(os.sep))[0]
    out = args.quantized_model or f"{stem}.{args.quantize}.onnx"
    samples = read_calibration(args.calibrate, onnx.load(path, load_external_data=False)) if args.calibrate else None
    print(f"[0/2] quantizing {args.model} ({args.quantize}) with onnxruntime's tools -> {out}", flush=True)
    args.model = quantize_onnx(path, out, args.quantize, samples)


def cmd_build(args) -> int:
    _quantize_first(args)
    if args.runtime == "tvm":
        return _build_tvm_library(args)
    print(f"[1/2] building {args.model} for {args.target} ...", flush=True)
    compiled = _compile(args, args.model)
    timings = ", ".join(f"{k} {v:.2f}s" for k, v in compiled.stage_seconds.items())
    artifact = compiled.artifact(reuse=not args.no_reuse)
    print(f"      {_memory_line(artifact.program)}")
    from ..serialization.artifact import variant_artifact

    for i, entry in enumerate(artifact.program.get("variants", [])):
        label = ",".join(f"{k}={v}" for k, v in entry["dims"].items())
        variant = variant_artifact(artifact, i)
        print(f"      variant {label}: {len(variant.program['kernels'])} kernels; {_memory_line(variant.program)}")
    if args.output.endswith(".rvk"):
        artifact.write(args.output)
        print(f"[2/2] wrote {args.output}: {len(compiled.kernels)} kernels ({timings})")
        return 0
    _write_atomically(
        args.output,
        {
            ("kernels.wgsl" if compiled.backend == "vulkan" else "kernels.cl"): compiled.source,
            "plan.json": json.dumps(compiled.plan().to_json(), indent=2),
            "module.py": compiled.lowered.script(show_meta=False),
            "model.rvk": artifact.to_bytes(),
        },
    )
    print(f"[2/2] wrote {args.output}: {len(compiled.kernels)} kernels ({timings})")
    return 0


def _memory_line(program: dict) -> str:
    """The artifact's storage planning in one line (relax_vk.storage)."""
    m, mib = program.get("memory") or {}, 1 << 20
    if not m:
        return "memory: no storage plan (every tensor its own allocation)"
    if set(m["strategies"].values()) <= {"none"}:
        return f"intermediates: {m['without_reuse_bytes'] / mib:.2f} MiB, reuse off; lower bound {m['lower_bound_bytes'] / mib:.2f} MiB"
    pools = m.get("pools") or {}
    kinds = "; ".join(_pool_line(pool, numbers) for pool, numbers in sorted(pools.items())) if len(pools) > 1 else ""
    return (f"intermediates: {m['without_reuse_bytes'] / mib:.2f} MiB without reuse, {m['with_reuse_bytes'] / mib:.2f} MiB with reuse "
            f"({m['shared_objects']} allocations), lower bound {m['lower_bound_bytes'] / mib:.2f} MiB" + (f" (by kind: {kinds})" if kinds else ""))  # fmt: skip


def _pool_line(pool: str, numbers: dict) -> str:
    """One kind of memory (a pool of the plan: buffers, textures of one texel format): held against its bound."""
    mib, held, bound = 1 << 20, numbers["with_reuse_bytes"], numbers["lower_bound_bytes"]
    ratio = f" ({held / bound:.2f}x)" if bound else ""
    return f"{pool} {held / mib:.2f} MiB held, bound {bound / mib:.2f} MiB{ratio}"


def _inputs(args, session):
    import numpy as np

    if args.inputs:
        return [np.load(path) for path in args.inputs]
    from .profile import seeded_inputs

    return seeded_inputs(session, args.seed)


def _model_spec(artifact):
    """``(model name or file the artifact was built from, its source record)``."""
    source = artifact.program.get("model", {})
    return source.get("example") or source.get("zoo") or source.get("packaged") or source.get("onnx") or source.get("pt2"), source


def _reference(artifact, inputs):
    """CPU reference outputs (TVM llvm) for the artifact's model, or (None, reason)."""
    try:
        import tvm  # noqa: F401
    except ImportError:
        return None, "skipped: TVM is not installed here (the reference runs TVM's llvm target)"
    spec, source = _model_spec(artifact)
    if artifact.program.get("states"):
        return None, "skipped: the model keeps states between runs (a decoder: its tests compare it with transformers step by step)"
    if not spec:
        return None, "skipped: the artifact does not say which model it was built from"
    from ..frontends import load_model
    from ..analysis.reference import run_on_cpu

    dims = {k: tuple(v) for k, v in source.get("dims", {}).items()}
    return run_on_cpu(load_model(spec, source.get("input_shapes"), dims)[0], inputs), ""


def _runtime_options(args) -> dict:
    """``load``'s runtime choices from ``run``'s flags: a profiling session (``--profile``), wgpu's
    shader checks (``--shader-checks``, Vulkan)."""
    options = {}
    if getattr(args, "profile", False):
        options["profile"] = True
    if getattr(args, "shader_checks", None):
        options["shader_checks"] = args.shader_checks
    return options


def _load_or_replan(artifact, args):
    """A session for ``artifact`` on the selected device; an artifact planned for larger limits than
    the device has is re-planned for the device (when TVM and the model it came from are here)."""
    from ..runtime import DeviceLimitError, load

    try:
        return load(artifact, device=args.run_device, **_runtime_options(args))
    except DeviceLimitError as err:
        spec, _ = _model_spec(artifact)
        try:
            import tvm  # noqa: F401
        except ImportError:
            spec = None
        if not spec:
            raise DeviceLimitError(f"{err}; rebuild the model for this device: relax-vk build MODEL --device {args.device or '...'}") from None
        print(f"note: {args.model} does not fit this device ({err}); re-planning {spec} for its limits ...", file=sys.stderr, flush=True)
        model = artifact.program.get("model", {})
        args.input_shape = [f"{k}={','.join(map(str, v))}" for k, v in model.get("input_shapes", {}).items()]
        return load(_compile(args, spec).artifact(), device=args.run_device, **_runtime_options(args))


def _read_or_build(args, reuse: bool = True, announce: bool = True):
    """``(artifact, read)``: ``args.model`` read (an ``.rvk``: its own target, which ``--target`` must
    not contradict) or built for the selected device (the plan is made for the device that runs it)."""
    from ..serialization.artifact import Artifact

    if args.model.endswith(".rvk"):
        artifact = Artifact.read(args.model)
        built_for = artifact.program.get("target", "opencl")
        if args.target is not None and args.target != built_for:
            raise UnsupportedError(f"{args.model} was built for {built_for}; rebuild it with --target {args.target}")
        args.target = built_for
        _select_device(args, default=True)
        return artifact, True
    args.target = args.target or "opencl"
    _select_device(args, default=True)
    if announce:
        print(f"building {args.model} for {args.target} ({args.device_limits.source}) ...", file=sys.stderr, flush=True)
    return _compile(args, args.model).artifact(reuse=reuse), False


def cmd_run(args) -> int:
    from ..runtime import load

    artifact, read = _read_or_build(args, reuse=not args.no_reuse)
    session = _load_or_replan(artifact, args) if read else load(artifact, device=args.run_device, **_runtime_options(args))
    inputs = _inputs(args, session)
    outputs = session.run(inputs)
    result = {"backend": args.target, "device": session.device_name, "ok": None, "max_abs_err": None, "max_rel_err": None}
    if "arithmetic" in artifact.program:  # --fp16-arith: the kernels that stay float32, and why
        result["arithmetic"] = artifact.program["arithmetic"]
    if session.dims:  # run-time dims: the run's values, and the shape variant that ran (None: the generic program)
        result["dims"], result["variant"] = session.dim_values, session.variant
    note = ""
    if args.check:
        reference, note = _reference(artifact, inputs)
        if reference is not None:
            rtol, atol = _check_tolerances(artifact.program, reference, args.rtol, args.atol)
            ok, abs_err, rel_err = _compare(outputs, reference, rtol, atol)
            result.update(ok=ok, max_abs_err=abs_err, max_rel_err=rel_err)
    result["latency_ms"] = session.time(inputs, repeat=args.repeat)  # unprofiled runs
    # with --profile: the kernels of a profiled run after the timed ones (warm), and the device span they tile
    result["kernels"], result["device_ms"] = _warm_profile(session, inputs) if args.profile else ([], None)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"device: {result['device']}")
        if args.check:
            if result["ok"] is None:
                print(f"check: {note}")
            else:
                print(f"check: {'OK' if result['ok'] else 'MISMATCH'}  max abs err {result['max_abs_err']:.3g}  max rel err {result['max_rel_err']:.3g}")
        print(f"device memory: {session.device_bytes / (1 << 20):.2f} MiB allocated; {_memory_line(artifact.program)}")
        if "arithmetic" in result:
            kept = result["arithmetic"]["float32"]
            print(f"half arithmetic: {len(kept)} kernel(s) kept in float32" + "".join(f"\n  {k}: {why}" for k, why in kept.items()))
        lat = result["latency_ms"]
        print(f"latency over {args.repeat} runs: median {lat['median']:.3f} ms (min {lat['min']:.3f}, max {lat['max']:.3f})")
        if args.profile:
            _print_profile(result["kernels"], result["device_ms"])
    return 0 if result["ok"] in (None, True) else 1


def _streamer(tokenizer):
    """A callback printing each new token as it is made: the new part of the text decoded so far
    (a character may take several tokens), or the id."""
    made: List[int] = []
    shown = [""]

    def on_token(token: int) -> None:
        made.append(token)
        if tokenizer is None:
            print(("," if len(made) > 1 else "") + str(token), end="", flush=True)
            return
        from .tokenizer import decode

        text = decode(tokenizer, made)
        if not text.endswith("\ufffd") and text.startswith(shown[0]):  # (a partial character waits for its next token)
            print(text[len(shown[0]) :], end="", flush=True)
            shown[0] = text

    return on_token


def cmd_generate(args) -> int:
    """Generation, greedy or sampled, with a decoder (a checkpoint directory, built here, or its .rvk)."""
    from ..runtime import load
    from ..runtime.generate import Generator

    if (args.int4 or args.fp16 or args.logits) and args.model.endswith(".rvk"):
        raise UnsupportedError(f"--int4, --fp16 and --logits apply when building from a checkpoint; {args.model} is built already")
    if args.logits is None:  # (generation reads each call's last token only: the head on one row)
        args.logits = "last"
    tokenizer = None
    if args.prompt is not None or args.tokenizer:  # (text: the checkpoint's own tokenizer, relax_vk.tools.tokenizer)
        from .tokenizer import encode, load_tokenizer

        if not args.tokenizer and args.model.endswith(".rvk"):
            raise UnsupportedError(f"--prompt: {args.model} holds no tokenizer; give --tokenizer DIR (the checkpoint's directory) or --prompt-ids")
        tokenizer = load_tokenizer(args.tokenizer or args.model)
    if args.prompt is not None:
        prompt = encode(tokenizer, args.prompt, chat=args.chat)
    else:
        if args.chat:
            raise UnsupportedError("--chat applies to a text --prompt")
        try:
            prompt = [int(t) for t in args.prompt_ids.split(",") if t.strip()]
        except ValueError:
            raise ValueError(f"--prompt-ids {args.prompt_ids!r} is not a comma-separated list of token ids") from None
    try:
        stops = [int(t) for t in (args.stop_ids or "").split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"--stop-ids {args.stop_ids!r} is not a comma-separated list of token ids") from None
    sampler = None
    if args.temperature:  # (0: greedy, whatever --top-k, --top-p and --seed say)
        from ..runtime.sampling import Sampler

        sampler = Sampler(args.temperature, args.top_k, args.top_p, args.seed)
    elif args.top_k is not None or args.top_p is not None:
        raise UnsupportedError("--top-k and --top-p sample: give --temperature above 0 too (0 is greedy)")
    on_token = None
    if args.stream:  # (each token as it is made: its text where a tokenizer decodes, else its id)
        if args.json:
            raise UnsupportedError("--stream prints the tokens as they come; --json prints one record at the end")
        on_token = _streamer(tokenizer)
    artifact, _ = _read_or_build(args, announce=not args.json)  # (after the arguments are checked: a build takes a while)
    if args.stop_at_eos:
        eos = artifact.program.get("model", {}).get("eos_token_ids")
        if not eos:
            raise UnsupportedError(f"--stop-at-eos: {args.model} names no end-of-sequence token (eos_token_id in its config); give --stop-ids")
        stops += eos
    generator = Generator(load(artifact, device=args.run_device))
    result = generator.generate(prompt, args.new_tokens, stop_tokens=stops, sampler=sampler, on_token=on_token)
    if args.stream:
        print(flush=True)
    record = {"backend": args.target, "device": generator.session.device_name, **result.to_json()}
    if sampler is not None:
        record["sampling"] = sampler.to_json()
    if tokenizer is not None:  # (the prompt's ids and the new tokens as text)
        from .tokenizer import decode

        record["prompt_ids"], record["text"] = prompt, decode(tokenizer, result.tokens)
    if args.json:
        print(json.dumps(record, indent=2))
    else:
        print(f"device: {record['device']}")
        print(f"tokens: {','.join(map(str, result.tokens))}")
        if "text" in record:
            print(f"text: {record['text']}")
        print(f"prefill: {result.prompt_tokens} tokens, {result.prefill_tokens_per_s:.1f} tokens/s; "
              f"decode: {result.decode_runs} tokens, {result.decode_tokens_per_s:.1f} tokens/s")  # fmt: skip
    return 0


# ---- profile / bisect (relax_vk.tools.profile, relax_vk.tools.bisect) ----
def _built_session(args, reuse: bool = True, profile: bool = False):
    """``(session, artifact)``: an ``.rvk`` as built, else the model built for the selected device."""
    from ..compiler import build
    from ..runtime import load
    from ..serialization.artifact import Artifact

    if args.model.endswith(".rvk"):
        artifact = Artifact.read(args.model)
        args.target = artifact.program.get("target", "opencl")
    else:
        args.target = args.target or "opencl"
        _select_device(args, default=True)
        mod, source = _load_with_source(args.model, args)
        artifact = build(mod, _target(args), registry=_registry(args), options=_options(args), model=source).artifact(reuse=reuse)
    _select_device(args, default=True)
    return load(artifact, device=args.run_device, profile=profile), artifact


def cmd_profile(args) -> int:
    from .profile import profile_session

    session, _ = _built_session(args, profile=True)
    result = profile_session(session, _inputs(args, session), args.repeat, args.model)
    if args.plot:
        result.plot(args.plot)
    print(json.dumps(result.to_json(), indent=2) if args.json else result.table(args.top))
    return 0


def cmd_bisect(args) -> int:
    from .bisect import bisect_session

    if args.model.endswith(".rvk"):
        raise UnsupportedError("relax-vk bisect: give the model (name, .onnx or .pt2), not an .rvk: it builds the model keeping every tensor")
    if getattr(args, "specialize", None):  # (a variant's tensors are its own: bisect a size by fixing it, --input-shape)
        print("note: bisect checks the generic program; --specialize is ignored", file=sys.stderr, flush=True)
        args.specialize = None
    session, _ = _built_session(args, reuse=False)
    result = bisect_session(session, _load(args.model, args), _inputs(args, session), args.model, args.rtol)
    print(json.dumps(result.to_json(), indent=2) if args.json else result.table())
    return 0 if result.ok else 1


def _add_profile_commands(sub) -> None:
    p = sub.add_parser("profile", help="time per op of the model on a device (fused kernels mapped back to the model's ops)")
    _add_model_args(p)
    p.add_argument("--repeat", type=_positive_int, default=10, help="warm runs; the run of median device time is reported")
    p.add_argument("--plot", metavar="FILE.png", help="write a bar chart of the top ops and the timeline (the notebook extra)")
    p.add_argument("--top", type=int, default=None, help="print only the N slowest rows")
    p.add_argument("--inputs", nargs="*", help=".npy files, one per model input (default: seeded random)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="machine-readable output (stable contract)")
    p.set_defaults(func=cmd_profile)
    p = sub.add_parser("bisect", help="compare every op's output on the device with TVM llvm; name the first bad one")
    _add_model_args(p)
    p.add_argument("--rtol", type=float, default=None, help="bound, relative to max(1, |reference|) (default 1e-4; fp16 textures 1e-2)")
    p.add_argument("--inputs", nargs="*", help=".npy files, one per model input (default: seeded random)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="machine-readable output (stable contract)")
    p.set_defaults(func=cmd_bisect)


def _device_rows():
    """OpenCL devices then Vulkan adapters, one row shape (see the module docstring), and a note
    per API that could not be listed."""
    from ..runtime import list_devices

    rows, notes = [], []
    for api, label in (("opencl", "OpenCL"), ("vulkan", "Vulkan")):
        try:
            rows += list_devices(api)
        except Exception as err:  # no library, no ICD loader, no platform, no adapter: say so, list the other API anyway
            notes.append(f"{label}: {err}")
    return rows, notes


def cmd_devices(args) -> int:
    rows, notes = _device_rows()
    for note in notes:
        print(f"relax-vk: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        limits = f"image2d {r['image2d_max'][0]}x{r['image2d_max'][1]}, {r['image_max_array_size']} layers" if r["image_support"] else "no images"
        state = "usable" if r["usable"] else f"unusable: {r['problem']}"
        print(f"{r['api']:<6} {r['index']:>5}  {r['type']:<4} {r['device']} [{r['platform']}]  {limits}  ({state})")
        half = r.get("fp16") or {}
        if half:
            print(f"{'':14}fp16: half texels {'yes' if half['half_images'] else 'no (--fp16 falls back to float32)'}, "
                  f"half arithmetic {'yes' if half['half_arithmetic'] else 'no'}")  # fmt: skip
        lim = r.get("limits") or {}
        if lim:
            print(f"{'':14}buffer binding {lim['max_buffer_bytes']} B, allocation {lim['max_alloc_bytes']} B, memory {lim['memory_bytes']} B, "
                  f"{lim['max_workgroups']} workgroups/dim, {lim['max_workgroup_size']} invocations/group, {lim['max_shared_bytes']} B shared")  # fmt: skip
    return 0


def cmd_tune(args) -> int:
    """Three steps that may run on two machines (relax_vk.tools.tune): MODEL... --bundle DIR
    builds candidates (TVM); --measure DIR times them on a device (no TVM); --import FILE merges
    results into the tuning database. MODEL... --device D does all three locally."""
    apis = args.apis or ["opencl", "vulkan"]
    log = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else (lambda line: print(line, flush=True))
    if args.import_results:
        from .tune import import_results

        summary: dict = {}
        for path in args.import_results:  # several files: the chunks of one split measurement
            with open(path) as f:
                results = json.load(f)
            if isinstance(results, list):  # whole-model plan timings (benchmarks/gpu_benchmark.py --run --json)
                from .tune import import_plan_timings

                for device, kept in import_plan_timings(results, args.db, evidence=os.path.basename(path)).items():
                    log(f"{device}: whole-model timings of {kept} (model, API) pairs kept")
                continue
            if results.get("complete") is False:
                log(f"{path}: an unfinished measurement ({results.get('remaining')} cases remain); importing what it measured")
            for device, (kept, offered) in import_results(results, args.db).items():
                k0, o0 = summary.get(device, (0, 0))
                summary[device] = (k0 + kept, o0 + offered)
        for device, (kept, offered) in summary.items():
            log(f"{device}: {kept} of {offered} records kept (faster than or new to the database)")
        if args.json:
            print(json.dumps({d: {"kept": k, "offered": o} for d, (k, o) in summary.items()}, indent=2))
        return 0
    bundle = args.measure or args.bundle
    if not args.measure:
        if not args.models:
            raise ValueError("relax-vk tune: name the models to tune (or --measure BUNDLE / --import RESULTS)")
        from .tune import write_bundle

        local = bundle is None
        if local:
            if args.device is None:
                raise ValueError("relax-vk tune: give --bundle DIR (to measure elsewhere) or --device D (to measure here)")
            import tempfile

            bundle = os.path.join(tempfile.mkdtemp(prefix="relax-vk-tune-"), "bundle")
        index = write_bundle([_load(m, args) for m in args.models], bundle, apis, args.memory, tuple(args.threads), log, args.missing_for,
                             winograd=not args.no_winograd)  # fmt: skip
        log(f"bundle: {len(index['cases'])} cases in {index['seconds']:.0f} s -> {bundle}")
        if not local:
            return 0
    from ..runtime.measure import measure_bundle, write_results

    from ..runtime import select_device

    devices = {api: select_device(api, args.device) for api in apis}
    resume = None
    if args.resume:
        if not args.output:
            raise ValueError("relax-vk tune --resume: give -o RESULTS (the file an earlier --measure call wrote)")
        if os.path.exists(args.output):
            with open(args.output) as f:
                resume = json.load(f)
    checkpoint = (lambda doc: write_results(doc, args.output)) if args.output else None
    results = measure_bundle(bundle, devices, repeat=args.repeat, log=log, resume=resume, budget_s=args.budget, checkpoint=checkpoint)
    if args.output:
        write_results(results, args.output)
    if not args.measure or args.db:  # measured here: straight into the database
        from .tune import import_results

        for device, (kept, offered) in import_results(results, args.db).items():
            log(f"{device}: {kept} of {offered} records kept")
    if not results["complete"]:
        log(f"{results['remaining']} cases remain: run the same command again (with --resume) to measure them")
    if args.json:
        print(json.dumps({"records": results["records"], "failures": results["failures"], "complete": results["complete"],
                          "remaining": results["remaining"]}, indent=2))  # fmt: skip
    return 1 if results["failures"] else 0


def cmd_models(_args) -> int:
    from ..models import EXAMPLES
    from ..zoo import ZOO

    for name, (_, description) in sorted(EXAMPLES.items()):
        print(f"{name:18s} {description}")
    for name, entry in sorted(ZOO.items()):
        print(f"{name:18s} [zoo] {entry.note}")
    from ..zoo.packaged import PACKAGED

    for name, entry in sorted(PACKAGED.items()):
        print(f"{name:18s} [{entry.package}] {entry.note}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="relax-vk", description="Texture memory scoping for TVM Relax")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="print the memory plan of a model")
    _add_model_args(p)
    p.add_argument("--json", action="store_true", help="machine-readable output (stable contract)")
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser("show", help="print the module after each layout and scope stage (the ones plan and build run)")
    _add_model_args(p)
    p.add_argument("--lowering", action="store_true", help="also print the module after each lowering stage (what build runs next)")
    p.set_defaults(func=cmd_show)
    p = sub.add_parser("build", help="compile a model to OpenCL texture kernels or Vulkan (WGSL) shaders")
    _add_model_args(p)
    p.add_argument("-o", "--output", required=True, help="output folder (an earlier output there is replaced; a folder of other files is refused), FILE.rvk, or (--runtime tvm) FILE.so")
    p.add_argument("--no-reuse", action="store_true", help="give every tensor its own allocation (no storage planning)")
    p.add_argument("--runtime", choices=("relax_vk", "tvm"), default="relax_vk",
                   help="relax_vk: kernels and .rvk for relax_vk's runtime (default); tvm: a library for TVM's Relax VM (OpenCL)")
    p.add_argument("--host", default=None, metavar="TRIPLE",
                   help="(--runtime tvm) the VM's host, cross-compiled: aarch64-linux-gnu, aarch64-linux-android, ...")
    p.add_argument("--cc", default=None, help="(--runtime tvm) the C++ compiler that links the library (default: TRIPLE-g++; "
                   "Android: $TVM_NDK_CC)")
    p.add_argument("--quantize", choices=("int8", "int8-dynamic", "int4"), default=None,
                   help="quantize an ONNX model with onnxruntime's tools first: int8 (static QDQ, per-channel weights; needs "
                   "--calibrate), int8-dynamic, int4 (weight-only MatMulNBits); a decoder checkpoint: int4, its own 4-bit weights")
    p.add_argument("--calibrate", metavar="DIR", default=None,
                   help="(--quantize int8) calibration samples: .npy files (one-input models) or .npz files (an array per input)")
    p.add_argument("--logits", choices=("all", "last"), default=None,
                   help="(a decoder checkpoint) the logits of every token of a call (default) or of its last only: the head on one row")
    p.add_argument("--quantized-model", metavar="FILE.onnx", default=None,
                   help="(--quantize) where the quantized ONNX model goes (default: beside the output, OUTPUT.MODE.onnx)")
    p.set_defaults(func=cmd_build)
    p = sub.add_parser("run", help="run a model or .rvk artifact on an OpenCL device or Vulkan adapter")
    _add_model_args(p)
    p.add_argument("--check", action="store_true", help="compare with TVM's llvm target on the CPU")
    p.add_argument("--repeat", type=_positive_int, default=10)
    p.add_argument("--inputs", nargs="*", help=".npy files, one per model input (default: seeded random)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rtol", type=float, default=None, help="default 1e-4 (fp16 textures: 1e-2)")
    p.add_argument("--atol", type=float, default=None, help="default 1e-4 (fp16 textures: 1e-2 of the largest output)")
    p.add_argument("--json", action="store_true", help="machine-readable output (stable contract)")
    p.add_argument("--no-reuse", action="store_true", help="(when building) give every tensor its own allocation")
    p.add_argument("--profile", action="store_true", help="also profile a warm run: per-kernel device times (a profiling queue / timestamp queries)")
    p.add_argument("--shader-checks", choices=("bounds", "loops", "none"), default=None,
                   help="Vulkan: wgpu's runtime checks in the shaders (default bounds; none: 5-7%% faster on the H100, "
                        "needs a driver with robust image access)")  # fmt: skip
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("generate", help="text generation (greedy, or sampled) with a Hugging Face decoder checkpoint (Llama, Mistral, Qwen2/3, Gemma 2/3, Phi-3) or its .rvk")
    _add_model_args(p)
    prompt = p.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt-ids", metavar="ID,ID,...", help="the prompt's token ids")
    prompt.add_argument("--prompt", metavar="TEXT", help="the prompt as text, encoded by the checkpoint's tokenizer (transformers); "
                        "the new tokens are decoded too (text in --json)")
    p.add_argument("--tokenizer", metavar="DIR", help="the tokenizer's directory (default: the checkpoint's; needed with an .rvk)")
    p.add_argument("--chat", action="store_true", help="with --prompt: the text as one user turn of the checkpoint's chat template")
    p.add_argument("--temperature", type=float, default=0.0, help="sample at this temperature (default 0: greedy, the arg-max)")
    p.add_argument("--top-k", type=int, default=None, help="sample among the K most likely tokens")
    p.add_argument("--top-p", type=float, default=None, help="sample among the most likely tokens whose probabilities sum past P")
    p.add_argument("--seed", type=int, default=None, help="the sampler's seed: the same seed, the same tokens")
    p.add_argument("--stream", action="store_true", help="print each token as it is made (its text with a tokenizer, else its id)")
    p.add_argument("--new-tokens", type=int, default=32, help="tokens to generate (default 32): all of them, unless a stop token comes first")
    p.add_argument("--stop-ids", default=None, metavar="ID,ID,...", help="stop after making one of these tokens (it ends the tokens)")
    p.add_argument("--stop-at-eos", action="store_true",
                   help="stop at the checkpoint's end-of-sequence tokens too (eos_token_id of its generation_config.json or config.json)")
    p.add_argument("--int4", action="store_true", help="(building from a checkpoint) 4-bit weights in blocks of 32, decoded in the kernels")
    p.add_argument("--logits", choices=("all", "last"), default=None,
                   help="(building from a checkpoint) the logits of every token of a call or of its last only (default: what generation reads)")
    p.add_argument("--json", action="store_true", help="machine-readable output (stable contract): tokens, prefill_tokens_per_s, "
                   "decode_tokens_per_s, ...")
    p.set_defaults(func=cmd_generate)
    p = sub.add_parser("devices", help="list OpenCL devices and Vulkan adapters")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_devices)
    p = sub.add_parser("demo", help="scope the built-in default model and print its plan")
    _add_model_args(p, model_default=DEFAULT_MODEL)
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("tune", help="time conv schedule candidates on a device; keep the best in the tuning database")
    p.add_argument("models", nargs="*", help="models whose convs to tune (built-in names, .onnx or .pt2 files)")
    p.add_argument("--target", "--backend", dest="apis", action="append", choices=("opencl", "vulkan"),
                   help="API to tune for (repeat; default both)")
    p.add_argument("--memory", nargs="+", choices=("texture", "buffer"), default=["texture", "buffer"], help="memory kinds to tune")
    p.add_argument("--threads", nargs="+", type=int, default=[32, 64, 128], help="workgroup sizes to try")
    p.add_argument("--missing-for", metavar="DEVICE_NAME", help="only the convs this device's tuning database has no record of")
    p.add_argument("--no-winograd", action="store_true",
                   help="no Winograd F(2,3)/F(4,3) candidates for 3x3 stride-1 convs (they compete with the direct ones by default)")
    p.add_argument("--bundle", help="write the candidates here (to measure on another machine) instead of measuring")
    p.add_argument("--measure", metavar="BUNDLE", help="time a bundle's candidates on this machine (no TVM needed)")
    p.add_argument("--import", dest="import_results", metavar="RESULTS", nargs="+",
                   help="merge measured results into the database (several files: the chunks of a split measurement; "
                        "a gpu_benchmark.py --run --json file: whole-model plan timings for the memory-kind decision)")
    p.add_argument("--budget", type=float, metavar="SECONDS",
                   help="with --measure: start no case after this many seconds (the results say how many remain)")
    p.add_argument("--resume", action="store_true",
                   help="with --measure -o RESULTS: keep the cases RESULTS already holds and measure the rest")
    p.add_argument("--device", default=None, help="the device to measure on (OpenCL: pocl, gpu, PLATFORM:DEVICE; Vulkan: lavapipe, gpu, N)")
    p.add_argument("--repeat", type=_positive_int, default=20, help="profiled runs per candidate (median)")
    p.add_argument("-o", "--output", help="write the measured results (JSON) here")
    p.add_argument("--db", help="database folder (default: the package's relax_vk/schedules/tuning_db)")
    p.add_argument("--input-shape", action="append", metavar="NAME=D0,D1,...", help="fix a symbolic ONNX input dimension")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_tune)
    p = sub.add_parser("models", help="list the built-in example models")
    p.set_defaults(func=cmd_models)
    _add_profile_commands(sub)
    return parser


def _quiet_third_party_warnings() -> None:
    """Only relax_vk's own warnings reach the terminal (PyTorch's and TVM's FutureWarnings and the
    like are about their APIs, not the user's model); ``$RELAX_VK_DEBUG`` keeps them all."""
    if os.environ.get("RELAX_VK_DEBUG"):
        return
    import warnings

    warnings.filterwarnings("ignore")
    warnings.filterwarnings("default", module=r"relax_vk(\.|$)")


def _positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (a run or repeat count)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: at least 1")
    return value


def main(argv: Optional[List[str]] = None) -> int:
    _quiet_third_party_warnings()
    args = build_parser().parse_args(argv)
    if getattr(args, "target", "") is None and args.func not in (cmd_run, cmd_profile, cmd_bisect, cmd_generate):
        args.target = "opencl"
    try:
        return args.func(args)
    except (RelaxVKError, ValueError, ImportError, OSError) as err:  # the input or the device: exit 2
        print(f"relax-vk: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("relax-vk: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # a relax_vk bug: say so, without a traceback unless asked
        if os.environ.get("RELAX_VK_DEBUG"):
            raise
        first = str(err).splitlines()[0] if str(err) else ""
        print(f"relax-vk: internal error ({type(err).__name__}: {first}); please report it with the model "
              "(RELAX_VK_DEBUG=1 shows the traceback)", file=sys.stderr)  # fmt: skip
        return 3


if __name__ == "__main__":
    sys.exit(main())
