"""relax_vk and its peers side by side on one GPU, in one run: ResNet-18, MobileNetV2, a ViT and a
detector, every engine fed the same input and checked against the same reference.

    python benchmarks/peers.py --build DIR --mnn-python VENV/bin/python --pnnx VENV/.../pnnx/pnnx --mnn-dist MNN_DIR --ocl-icd-deb ocl-icd-libopencl1_*.deb \\
        --wheels ncnn-*-cp312-*.whl --device-name "NVIDIA H100 80GB HBM3"        # here (TVM, torch, pnnx, MNN's PyPI converter)
    python3 benchmarks/peers.py --run DIR/part* [--rounds 5 --repeat 50] [--json out.json]   # GPU machine (no TVM)

Engines (each one a column; one that cannot run there is reported, not fatal):

- ``relax_vk/opencl``, ``relax_vk/vulkan``: the default plan (``auto``), built for ``--device-name``'s
  tuning records, on the Python runtimes (pyopencl, wgpu).
- ``mnn/image``, ``mnn/buffer``: MNN's OpenCL backend, fp32 (precision high), image or buffer memory,
  WIDE local-size tuning (``--mnn-tune``; cached in ``--mnn-cache`` by the first call, so later
  rounds and later runs on the same machine skip it), through ``../shared/peers/mnn/mnn_cl_bench``
  (its compiled binary and libMNN.so come from ``--mnn-dist``, a build of MNN's public source made
  outside this repository; models converted from ONNX by the ``mnn`` PyPI wheel's converter, called
  directly as ``_tools.mnnconvert`` from ``--mnn-python``).
- ``ncnn/vulkan-fp32``, ``ncnn/vulkan-fp16``: ncnn's Vulkan compute (the ``ncnn`` wheel), fp32 with
  every fp16 option off, or fp16 storage + packed + arithmetic; models converted from the same ONNX
  by the ``pnnx`` wheel's executable (``--pnnx``) with fp32 weights (``fp16=0``).
- ``torch/cuda``: PyTorch eager fp32 on CUDA (cuDNN benchmark mode, TF32 off), zoo models only
  (the packaged ONNX detector has no PyTorch module).
- ``iree/vulkan``: IREE's Vulkan HAL (the ``iree-base-runtime`` wheel), modules compiled here from
  the same ONNX by the ``iree-base-compiler`` wheel for ``--iree-target`` (:data:`IREE_MODELS`); its
  files fill parts of their own, so a run without those parts loses only this column.

Each timed iteration is an upload of the input, one inference and a blocking download of the output.
An engine is timed in ``--rounds`` rounds of ``--repeat`` iterations (each round after warm-up runs of
its own); the rounds of all engines of a model alternate (engine order rotated each round), and the
figure reported is the median of the rounds' medians. MNN runs as a child process per round (its own
process, as the C++ API is its interface; OpenCL contexts are not shared between processes anyway).
Outputs are compared with the reference of the build (PyTorch's CPU output; onnxruntime's for the
packaged ONNX model): ``rel err`` = max |out - ref| / max |ref|; fp32 engines must stay within
:data:`FP32_TOL`, fp16 ones within :data:`FP16_TOL`, else the table says ``BAD``.

Bundle: ``--build`` writes everything under ``DIR/full`` (relax_vk's transport bundle in the format of
``gpu_benchmark.py``, ``.mnn`` / ncnn files, MNN's binaries, wheels, inputs and references) and then
packs those files into ``DIR/part1``, ``DIR/part2``, ... of at most ``--part-mib`` each (a device call
carries 64 MiB at most); ``--run`` takes the parts and finds each file in whichever part holds it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

MODELS = ("resnet18", "mobilenet_v2", "vit_small", "ppocr_det@224")
ENGINES = ("relax_vk/opencl", "relax_vk/vulkan", "mnn/image", "mnn/buffer", "ncnn/vulkan-fp32", "ncnn/vulkan-fp16", "torch/cuda", "iree/vulkan")
IREE_MODELS = ("mobilenet_v2", "vit_small", "ppocr_det")  # (resnet18: 45 ms there before, and its 42.7 MiB module would need a part of its own)
SEPARATE = ("iree/",)  # packed into parts of their own, after the others: a run without them loses only IREE
FP16_ENGINES = ("ncnn/vulkan-fp16",)
FP32_TOL = 1e-3  # max |out - ref| / max |ref| for an fp32 engine (reassociation in convs and GEMMs: ~1e-6)
FP16_TOL = 5e-2
INDEX = "peers.json"


# ----------------------------------------------------------------------------------------------
# build (here)


def build(outdir: str, specs, args) -> None:
    """Compile relax_vk's default plan, convert every model for the peers and write the bundle."""
    import gpu_benchmark

    full = os.path.join(outdir, "full")
    for sub in ("rvk", "mnn/models", "ncnn", "io"):
        os.makedirs(os.path.join(full, sub), exist_ok=True)
    rvk = os.path.join(full, "rvk")
    if _built(rvk, [gpu_benchmark._model_size(s)[0] for s in specs], args.device_name):
        print(f"reusing relax_vk's bundle in {rvk}")
    else:
        gpu_benchmark.build(rvk, specs, args.device_name, ["auto"], gpu_benchmark.APIS)
        with open(os.path.join(rvk, "built_for.json"), "w") as f:
            json.dump({"device_name": args.device_name}, f)
    scratch = tempfile.mkdtemp(prefix="peers-")
    models = []
    for spec in specs:
        name, size = gpu_benchmark._model_size(spec)
        x, y = _reference(name, size, gpu_benchmark)
        np.savez(os.path.join(rvk, f"{name}.io.npz"), x=x, y=y)  # (the same as gpu_benchmark's; rewritten when its bundle is reused)
        onnx_path = os.path.join(scratch, f"{name}.onnx")
        _export_onnx(name, x, onnx_path, gpu_benchmark._is_packaged(name))
        x.astype(np.float32).tofile(os.path.join(full, "io", f"{name}.in.bin"))  # (mnn_cl_bench's raw float32 files)
        y.astype(np.float32).tofile(os.path.join(full, "io", f"{name}.ref.bin"))
        entry = {"model": name, "shape": list(x.shape), "out_shape": list(y.shape), "torch": not gpu_benchmark._is_packaged(name),
                 "rvk": "rvk", "io": {"in": f"io/{name}.in.bin", "ref": f"io/{name}.ref.bin"}}  # fmt: skip
        entry["mnn"] = _convert_mnn(onnx_path, os.path.join(full, "mnn/models", f"{name}.mnn"), args.mnn_python)
        entry["ncnn"] = _convert_ncnn(onnx_path, x.shape, os.path.join(full, "ncnn", name), scratch, args.pnnx)
        entry["iree"] = _compile_iree(onnx_path, os.path.join(full, "iree", f"{name}.vmfb"), args) if name in args.iree_models else None
        for key in ("mnn", "ncnn", "iree"):
            if entry[key] is None:
                continue
            if isinstance(entry[key], dict) and "error" in entry[key]:
                print(f"{name}: {key}: {entry[key]['error']}")
            elif isinstance(entry[key], str):
                entry[key] = os.path.relpath(entry[key], full)
            else:
                entry[key] = {k: os.path.relpath(v, full) for k, v in entry[key].items()}
        models.append(entry)
        print(f"converted {name}", flush=True)
    tools = {}
    if args.mnn_dist:
        tools["mnn"] = _copy_mnn(args.mnn_dist, args.ocl_icd_deb, os.path.join(full, "mnn"))
    for wheel in args.wheels or ():  # (IREE's runtime with IREE's modules)
        where = os.path.join(full, "iree" if os.path.basename(wheel).startswith("iree") else "", "whl")
        os.makedirs(where, exist_ok=True)
        shutil.copy(wheel, where)
    with open(os.path.join(full, INDEX), "w") as f:
        json.dump({"models": models, "tools": tools, "device_name": args.device_name}, f, indent=1)
    shutil.rmtree(scratch, ignore_errors=True)
    parts = pack(full, outdir, args.part_mib)
    for part, mib in parts:
        print(f"{part}: {mib:.1f} MiB")


def _reference(name: str, size, gpu_benchmark):
    """``(input, reference output)``: the zoo's seeded example input and PyTorch's CPU output, or a
    packaged ONNX model's example input and onnxruntime's output."""
    if gpu_benchmark._is_packaged(name):
        import onnxruntime

        from relax_vk.zoo.packaged import PACKAGED, example_input, packaged_model_path

        ((input_name, shape),) = PACKAGED[name].input_shapes.items()
        x = example_input(name, shape=tuple(size or shape))
        session = onnxruntime.InferenceSession(packaged_model_path(name), providers=["CPUExecutionProvider"])
        return x, session.run(None, {input_name: x})[0]
    import torch

    from relax_vk.zoo import build_zoo_model

    model, x = build_zoo_model(name, input_shape=size)
    with torch.no_grad():
        return x.numpy(), model(x).numpy()


def _built(rvk: str, names, device_name) -> bool:
    """Whether ``rvk`` already holds the default plan of every model for both APIs, built for
    ``device_name`` (an earlier ``--build`` into the same folder: the peers' files are redone)."""
    try:
        with open(os.path.join(rvk, "built_for.json")) as f:
            if json.load(f)["device_name"] != device_name:
                return False
        with gzip.open(os.path.join(rvk, "index.json.gz"), "rt") as f:
            have = {(e["model"], e["api"]) for e in json.load(f) if e["plan"] == "auto"}
    except (OSError, ValueError, KeyError):
        return False
    return all((n, api) in have for n in names for api in ("opencl", "vulkan"))


def _export_onnx(name: str, x: np.ndarray, path: str, packaged: bool) -> None:
    """The model as a static-shape ONNX file at ``x``'s shape (the peers' converters' input)."""
    import onnx

    if packaged:
        from relax_vk.zoo.packaged import packaged_model_path

        model = onnx.load(packaged_model_path(name))
        (graph_input,) = [i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
        for dim, value in zip(graph_input.type.tensor_type.shape.dim, x.shape):
            dim.ClearField("dim_param")
            dim.dim_value = int(value)
        onnx.save(model, path)
        return
    import torch

    from relax_vk.zoo import build_zoo_model

    model, example = build_zoo_model(name, input_shape=x.shape)
    if not np.array_equal(example.numpy(), x):
        raise RuntimeError(f"{name}: the zoo's example input differs from the bundle's")
    torch.onnx.export(model, (example,), path, dynamo=False, opset_version=17, input_names=["input"], output_names=["output"])


def _convert_mnn(onnx_path: str, out: str, python: str):
    """ONNX -> .mnn with the PyPI ``mnn`` wheel's compiled converter, in that wheel's own
    interpreter (``python``): never through ``mnnconvert`` or ``MNN.tools``, whose log helper
    installs and calls home (../shared/peers/mnn/README.md)."""
    if not python:
        return {"error": "no --mnn-python"}
    code = "import sys, _tools; _tools.mnnconvert(['mnnconvert', '-f', 'ONNX', '--modelFile', sys.argv[1], '--MNNModel', sys.argv[2], '--bizCode', 'MNN'])"
    proc = subprocess.run([python, "-c", code, onnx_path, out], capture_output=True, text=True)
    if proc.returncode or not os.path.exists(out) or "Converted Success" not in proc.stdout:
        return {"error": f"MNN converter failed: {(proc.stdout + proc.stderr).strip().splitlines()[-3:]}"}
    return out


def _convert_ncnn(onnx_path: str, shape, stem: str, scratch: str, exe: str):
    """ONNX -> ncnn ``.param``/``.bin`` with the ``pnnx`` wheel's executable, weights kept fp32
    (``fp16=0``; the wheel's Python ``convert`` drops that flag for ONNX input)."""
    if not exe:
        return {"error": "no --pnnx"}
    junk = os.path.join(scratch, os.path.basename(stem))
    files = {"param": f"{stem}.ncnn.param", "bin": f"{stem}.ncnn.bin"}
    cmd = [exe, onnx_path, f"inputshape=[{','.join(map(str, shape))}]f32", "fp16=0", f"ncnnparam={files['param']}", f"ncnnbin={files['bin']}",
           f"pnnxparam={junk}.pnnx.param", f"pnnxbin={junk}.pnnx.bin", f"pnnxpy={junk}_pnnx.py", f"pnnxonnx={junk}.pnnx.onnx", f"ncnnpy={junk}_ncnn.py"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=scratch)
    if proc.returncode or not all(os.path.exists(p) for p in files.values()):
        return {"error": f"pnnx failed: {(proc.stdout + proc.stderr).strip().splitlines()[-3:]}"}
    return files


def _compile_iree(onnx_path: str, out: str, args):
    """ONNX -> IREE Vulkan module: ``iree-import-onnx``, then ``iree-compile`` for
    ``--iree-target`` (the iree-base-compiler wheel's tools, from ``--iree-bin``)."""
    if not args.iree_bin:
        return {"error": "no --iree-bin"}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    mlir = out[: -len(".vmfb")] + ".mlir"
    for cmd in ([os.path.join(args.iree_bin, "iree-import-onnx"), onnx_path, "-o", mlir],
                [os.path.join(args.iree_bin, "iree-compile"), mlir, "--iree-hal-target-device=vulkan", f"--iree-vulkan-target={args.iree_target}", "-o", out]):  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            if os.path.exists(mlir):
                os.remove(mlir)
            first = next((line for line in (proc.stdout + proc.stderr).splitlines() if "error" in line), "")
            return {"error": f"{os.path.basename(cmd[0])} failed: {first.strip()[:300]}"}
    os.remove(mlir)
    return out


def _copy_mnn(dist: str, deb: str, dest: str) -> dict:
    """MNN's binaries (``dist``/bin/mnn_cl_bench, ``dist``/lib/*.so*: built elsewhere from MNN's
    public source) and the ocl-icd loader they dlopen (libOpenCL.so, from Debian's package)."""
    for sub in ("bin", "lib", "compat"):  # (compat: libstdc++/libgcc_s for a machine whose own are older; optional)
        if sub != "compat" or os.path.isdir(os.path.join(dist, sub)):
            shutil.copytree(os.path.join(dist, sub), os.path.join(dest, sub), dirs_exist_ok=True)
    if deb:
        unpacked = tempfile.mkdtemp(prefix="ocl-icd-")
        subprocess.run(["dpkg", "-x", deb, unpacked], check=True)
        lib = os.path.join(unpacked, "usr/lib/x86_64-linux-gnu/libOpenCL.so.1")
        os.makedirs(os.path.join(dest, "ocl"), exist_ok=True)
        for alias in ("libOpenCL.so", "libOpenCL.so.1"):
            shutil.copyfile(os.path.realpath(lib), os.path.join(dest, "ocl", alias))
        shutil.rmtree(unpacked)
    info = os.path.join(dist, "BUILD_INFO.txt")
    return {"bin": "mnn/bin/mnn_cl_bench", "lib": "mnn/lib", "ocl": "mnn/ocl", "compat": "mnn/compat", "build_info": open(info).read().strip() if os.path.exists(info) else ""}


def pack(full: str, outdir: str, part_mib: float, separate=SEPARATE):
    """Hard-link the files under ``full`` into ``outdir/partN`` folders of at most ``part_mib``
    MiB each (largest first, first fit), the index in every part; files under the ``separate``
    prefixes fill parts of their own after the others. Returns ``[(part, MiB)]``."""
    limit = part_mib * (1 << 20)
    files = []
    for root, _, names in os.walk(full):
        for n in names:
            rel = os.path.relpath(os.path.join(root, n), full)
            if rel != INDEX:
                files.append((os.path.getsize(os.path.join(full, rel)), rel))
    index_bytes = os.path.getsize(os.path.join(full, INDEX))
    parts = []  # [size, [rel]]
    rest = len(parts)
    ordered = sorted(files, key=lambda f: (f[1].startswith(tuple(separate)), -f[0]))
    for size, rel in ordered:
        if rel.startswith(tuple(separate)) and not any(r.startswith(tuple(separate)) for p in parts for r in p[1]):
            rest = len(parts)  # (the first separate file: later ones go to new parts only)
        if size + index_bytes > limit:
            raise RuntimeError(f"{rel} ({size / (1 << 20):.1f} MiB) is larger than a part ({part_mib} MiB)")
        part = next((p for p in parts[rest if rel.startswith(tuple(separate)) else 0 :] if p[0] + size <= limit), None)
        if part is None:
            part = [index_bytes, []]
            parts.append(part)
        part[0] += size
        part[1].append(rel)
    out = []
    for k, (size, rels) in enumerate(parts, 1):
        root = os.path.join(outdir, f"part{k}")
        shutil.rmtree(root, ignore_errors=True)
        for rel in rels + [INDEX]:
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            os.link(os.path.join(full, rel), os.path.join(root, rel))
        out.append((root, size / (1 << 20)))
    return out


# ----------------------------------------------------------------------------------------------
# run (GPU machine)


class Bundle:
    """The parts of a bundle as one folder: :meth:`path` finds a file in whichever part holds it."""

    def __init__(self, parts):
        self.parts = list(parts)
        with open(os.path.join(self.parts[0], INDEX)) as f:
            self.index = json.load(f)

    def path(self, rel: str) -> str:
        for part in self.parts:
            p = os.path.join(part, rel)
            if os.path.exists(p):
                return p
        raise FileNotFoundError(f"{rel} is in none of the bundle's parts {self.parts} (was every part carried?)")


class Engine:
    """One engine on one model: :meth:`round` times ``repeat`` iterations (after its own warm-up)
    and returns their median ms; :attr:`output` is the output of the engine's first run."""

    output = None
    max_abs_err = None  # (engines that compare outside this process set it)

    def round(self, repeat: int) -> float:  # pragma: no cover - abstract
        raise NotImplementedError


class InProcess(Engine):
    def __init__(self, step, warmup: int = 5):
        self.step = step
        self.output = np.asarray(step())
        self.warmup = warmup

    def round(self, repeat: int) -> float:
        for _ in range(self.warmup):
            self.step()
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            self.step()
            times.append((time.perf_counter() - t0) * 1e3)
        return float(np.median(times))


class RelaxVK(InProcess):
    """relax_vk's default plan on its Python runtime (``Session.time``: unprofiled runs)."""

    def __init__(self, bundle: Bundle, model: str, api: str, device):
        from relax_vk.runtime import load
        from relax_vk.serialization.artifact import Artifact

        with gzip.open(bundle.path("rvk/index.json.gz"), "rt") as f:
            (entry,) = [e for e in json.load(f) if e["model"] == model and e["api"] == api and e["plan"] == "auto"]
        constants = {k: np.load(bundle.path(f"rvk/blobs/{d}.npy")) for k, d in entry["constants"].items()}
        self.session = load(Artifact(entry["program"], entry["source"], constants), device=device)
        self.session.profiling = False
        self.rule = entry.get("scope_rule") or {}
        self.x = np.load(bundle.path(f"rvk/{model}.io.npz"))["x"]
        self.output = self.session.run([self.x])[0]

    def round(self, repeat: int) -> float:
        return self.session.time([self.x], repeat)["median"]


class MNN(Engine):
    """MNN's OpenCL backend through mnn_cl_bench, one child process per round; the local-size
    tuning of the first round is cached in a file, so later rounds only load it."""

    def __init__(self, bundle: Bundle, entry: dict, mem: str, forward: str, cache_dir: str, tune: str = "wide"):
        tools = bundle.index["tools"].get("mnn")
        if not tools:
            raise RuntimeError("no MNN binaries in the bundle")
        if not isinstance(entry.get("mnn"), str):
            raise RuntimeError(f"no .mnn model: {entry.get('mnn')}")
        self.cmd = [bundle.path(tools["bin"]), "--model", bundle.path(entry["mnn"]), "--input", bundle.path(entry["io"]["in"]),
                    "--ref", bundle.path(entry["io"]["ref"]), "--forward", forward, "--mem", mem, "--tune", tune, "--precision", "high",
                    "--cache", os.path.join(cache_dir, f"{entry['model']}.{mem}.{forward}.{tune}.cache")]  # fmt: skip
        if forward == "cpu":
            self.cmd += ["--threads", "2"]
        env = dict(os.environ)
        libs = [bundle.path(tools["lib"])] + ([bundle.path(tools["ocl"])] if _exists(bundle, tools["ocl"]) else [])
        env["LD_LIBRARY_PATH"] = ":".join(libs + [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p] + _icd_dirs(env))
        self.env = env
        self._loadable(bundle, tools)
        first = self._call(warmup=1, loops=1)
        self.create_ms = first["create_session_ms"]
        self.max_abs_err = first["max_abs_err"]
        self.finite = first["finite"] == 1

    def _loadable(self, bundle: Bundle, tools: dict) -> None:
        """Check that mnn_cl_bench loads here (adding the bundled libstdc++/libgcc_s when the
        machine's own are too old, as run_mnn.sh does) and, for OpenCL, sees a platform."""
        probe = lambda: subprocess.run([self.cmd[0], "--list-devices"], capture_output=True, text=True, env=self.env, timeout=120)  # noqa: E731
        proc = probe()
        if re.search(r"GLIBCXX_|CXXABI_|libstdc\+\+|libgcc_s", proc.stderr) and _exists(bundle, tools.get("compat", "mnn/compat")):
            self.env["LD_LIBRARY_PATH"] += ":" + bundle.path(tools.get("compat", "mnn/compat"))
            proc = probe()
        if "error while loading" in proc.stderr or (self.cmd[self.cmd.index("--forward") + 1] == "opencl" and proc.returncode):
            raise RuntimeError(f"mnn_cl_bench --list-devices: {(proc.stdout + proc.stderr).strip().splitlines()[-2:]}")

    def _call(self, warmup: int, loops: int) -> dict:
        proc = subprocess.run(self.cmd + ["--warmup", str(warmup), "--loops", str(loops)], capture_output=True, text=True, env=self.env, timeout=900)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode or not lines:
            raise RuntimeError(f"mnn_cl_bench rc={proc.returncode}: {(proc.stdout + proc.stderr).strip().splitlines()[-2:]}")
        fields = dict(kv.split("=", 1) for kv in lines[-1].split()[1:])
        out = {}
        for k, v in fields.items():
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v
        if out["max_abs_err"] < 0:
            raise RuntimeError("mnn_cl_bench could not compare its output with the reference (shape?)")
        return out

    def round(self, repeat: int) -> float:
        result = self._call(warmup=10, loops=repeat)
        self.max_abs_err = max(self.max_abs_err, result["max_abs_err"])
        return result["median_ms"]


def _icd_dirs(env) -> list:
    """The folders of the OpenCL ICD libraries that ``OCL_ICD_VENDORS`` names (NVIDIA's ICD needs its
    sibling libcuda.so.1 on the search path, as run_mnn.sh arranges)."""
    vendors, dirs = env.get("OCL_ICD_VENDORS", ""), []
    for icd in [os.path.join(vendors, n) for n in sorted(os.listdir(vendors))] if os.path.isdir(vendors) else []:
        with open(icd) as f:
            lib = f.read().strip()
        if os.path.isabs(lib) and os.path.dirname(lib) not in dirs:
            dirs.append(os.path.dirname(lib))
    return dirs


def _exists(bundle: Bundle, rel: str) -> bool:
    try:
        bundle.path(rel)
        return True
    except FileNotFoundError:
        return False


def ncnn_engine(bundle: Bundle, entry: dict, fp16: bool, gpu: bool) -> Engine:
    """ncnn on Vulkan (``gpu``; else its CPU path, for testing without a GPU): one extractor per
    inference, as ncnn's examples do; the extractor uploads the input and downloads the output."""
    import ncnn

    if not isinstance(entry.get("ncnn"), dict) or "param" not in entry["ncnn"]:
        raise RuntimeError(f"no ncnn model: {entry.get('ncnn')}")
    if gpu and ncnn.get_gpu_count() == 0:
        raise RuntimeError("ncnn sees no Vulkan device")
    net = ncnn.Net()
    net.opt.use_vulkan_compute = gpu
    for option in ("use_fp16_packed", "use_fp16_storage", "use_fp16_arithmetic"):
        setattr(net.opt, option, fp16)
    if not fp16:
        net.opt.use_bf16_storage = False
    if net.load_param(bundle.path(entry["ncnn"]["param"])) or net.load_model(bundle.path(entry["ncnn"]["bin"])):
        raise RuntimeError("ncnn could not load the model")
    x = np.fromfile(bundle.path(entry["io"]["in"]), np.float32).reshape(entry["shape"])
    shape = entry["out_shape"]

    def step():
        ex = net.create_extractor()
        ex.input("in0", ncnn.Mat(x[0]))
        ret, out = ex.extract("out0")
        if ret:
            raise RuntimeError(f"ncnn extract failed ({ret})")
        return np.array(out).reshape(shape)

    engine = InProcess(step)
    engine.net = net  # (keeps the net alive with the closure)
    return engine


def torch_engine(bundle: Bundle, entry: dict, device: str) -> Engine:
    """PyTorch eager fp32 (cuDNN benchmark mode on CUDA; TF32 off, so it computes in fp32)."""
    import torch

    from relax_vk.zoo import build_zoo_model

    if not entry["torch"]:
        raise RuntimeError("no PyTorch module (an ONNX model)")
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device")
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    model, example = build_zoo_model(entry["model"], input_shape=tuple(entry["shape"]))
    x = np.fromfile(bundle.path(entry["io"]["in"]), np.float32).reshape(entry["shape"])
    if not np.array_equal(example.numpy(), x):
        raise RuntimeError("the zoo's example input differs from the bundle's (another zoo version?)")
    model = model.to(device).eval()

    def step():
        with torch.no_grad():
            return model(torch.from_numpy(x).to(device)).cpu().numpy()

    return InProcess(step)


def iree_engine(bundle: Bundle, entry: dict) -> Engine:
    """IREE's Vulkan HAL (the iree-base-runtime wheel): the numpy input goes in with the call; the
    output is copied into a host-visible staging buffer allocated once and read from its mapping
    (IREE 3.13's ``DeviceArray.to_host()`` fails on Vulkan: it imports host memory that Vulkan's
    4096-byte import alignment refuses)."""
    import iree.runtime as rt

    if not isinstance(entry.get("iree"), str):
        raise RuntimeError(f"no IREE module: {entry.get('iree') or 'not built for this model (--iree-models)'}")
    config = rt.Config("vulkan")
    device = config.device
    context = rt.SystemContext(config=config)
    with open(bundle.path(entry["iree"]), "rb") as f:
        context.add_vm_module(rt.VmModule.copy_buffer(context.instance, f.read()))
    function = context.modules.module["main_graph"]
    x = np.fromfile(bundle.path(entry["io"]["in"]), np.float32).reshape(entry["shape"])
    first = function(x)
    staging = device.allocator.allocate_buffer(memory_type=int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE),
                                               allowed_usage=int(rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED),
                                               allocation_size=first._buffer_view.get_buffer().byte_length())  # fmt: skip
    semaphore, count = device.create_semaphore(0), [0]

    def step():
        view = function(x)._buffer_view
        count[0] += 1
        device.queue_copy(view.get_buffer(), staging, wait_semaphores=rt.HalFence.create_at(semaphore, count[0] - 1),
                          signal_semaphores=rt.HalFence.create_at(semaphore, count[0]))  # fmt: skip
        rt.HalFence.create_at(semaphore, count[0]).wait()
        return np.array(staging.map().asarray(view.shape, np.dtype(np.float32))).reshape(entry["out_shape"])

    engine = InProcess(step)
    engine.keep = (context, staging)
    return engine


def make_engine(name: str, bundle: Bundle, entry: dict, args, devices, cache_dir: str) -> Engine:
    kind, _, variant = name.partition("/")
    if kind == "relax_vk":
        return RelaxVK(bundle, entry["model"], variant, devices[variant])
    if kind == "mnn":
        return MNN(bundle, entry, variant, args.mnn_forward, cache_dir, args.mnn_tune)
    if kind == "ncnn":
        return ncnn_engine(bundle, entry, fp16=variant.endswith("fp16"), gpu=not args.ncnn_cpu)
    if kind == "torch":
        return torch_engine(bundle, entry, args.torch_device)
    if kind == "iree":
        return iree_engine(bundle, entry)
    raise ValueError(f"unknown engine {name}")


def run(parts, args) -> dict:
    from relax_vk.runtime import select_device

    bundle = Bundle(parts)
    engines = [e for e in ENGINES if not args.engines or e in args.engines]
    devices = {}
    if "relax_vk/opencl" in engines:
        devices["opencl"] = select_device("opencl", args.opencl_device)
    if "relax_vk/vulkan" in engines:
        devices["vulkan"] = select_device("vulkan", args.vulkan_device)
    device = {"opencl": devices["opencl"].name.strip() if "opencl" in devices else None,
              "vulkan": devices["vulkan"].info["device"] if "vulkan" in devices else None}  # fmt: skip
    print(f"opencl: {device['opencl']}; vulkan: {device['vulkan']}; bundle built for {bundle.index.get('device_name')!r}")
    cache_dir = args.mnn_cache  # (kept: a later run on the same machine skips MNN's tuning)
    os.makedirs(cache_dir, exist_ok=True)
    report = {"device": device, "rounds": args.rounds, "repeat": args.repeat, "engines": engines, "models": [],
              "where": {"mnn_forward": args.mnn_forward, "ncnn": "cpu" if args.ncnn_cpu else "vulkan", "torch": args.torch_device}}  # fmt: skip
    for entry in bundle.index["models"]:
        if args.models and entry["model"] not in args.models:
            continue
        ref = np.fromfile(bundle.path(entry["io"]["ref"]), np.float32).reshape(entry["out_shape"])
        scale = float(np.max(np.abs(ref))) or 1.0
        results, live = {}, {}
        for name in engines:
            t0 = time.perf_counter()
            try:
                engine = make_engine(name, bundle, entry, args, devices, cache_dir)
            except Exception as err:  # a peer that cannot run here is reported, not fatal
                results[name] = {"error": f"{type(err).__name__}: {err}"[:300]}
                continue
            err = engine.max_abs_err if engine.output is None else float(np.max(np.abs(engine.output.reshape(ref.shape) - ref)))
            results[name] = {"max_abs_err": err, "rel_err": err / scale, "setup_s": time.perf_counter() - t0, "round_ms": []}
            live[name] = engine
        order = list(live)
        for r in range(args.rounds):  # engines alternate round by round, the order rotated each time
            for k in range(len(order)):
                name = order[(k + r) % len(order)]
                try:
                    results[name]["round_ms"].append(live[name].round(args.repeat))
                except Exception as err:
                    results[name]["error"] = f"{type(err).__name__}: {err}"[:300]
                    order.remove(name)  # (the rotation of later rounds skips it)
                    break
        for name, engine in live.items():
            res = results[name]
            if engine.output is None and engine.max_abs_err is not None:  # (MNN: worst error over its rounds)
                res["max_abs_err"] = engine.max_abs_err
                res["rel_err"] = engine.max_abs_err / scale
            if res["round_ms"]:
                res["ms"] = float(np.median(res["round_ms"]))
                res["min_round_ms"] = float(np.min(res["round_ms"]))
            res["ok"] = bool(res["rel_err"] <= (FP16_TOL if name in FP16_ENGINES else FP32_TOL))
            if isinstance(engine, RelaxVK):
                res["scope_rule"] = engine.rule
            if isinstance(engine, MNN):
                res["create_session_ms"] = engine.create_ms
        live.clear()
        report["models"].append({"model": entry["model"], "shape": entry["shape"], "results": results})
        _print_model(report["models"][-1], engines)
        if args.json:  # after every model: a run cut short by a time limit keeps what it measured
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1)
    _print_table(report, engines)
    return report


def _cell(res: dict) -> str:
    if not res or "ms" not in res:
        return "fail" if res and "error" in res else "-"
    return f"{res['ms']:.3f}" + ("" if res["ok"] else " BAD")


def _print_model(row: dict, engines) -> None:
    print(f"\n{row['model']} at {'x'.join(map(str, row['shape']))}")
    header = f"{'engine':<18} {'ms (med of med)':>15} {'min round':>10} {'rel err':>9}  rounds / note"
    print(header)
    print("-" * len(header))
    for name in engines:
        res = row["results"].get(name, {})
        if "ms" in res:
            print(f"{name:<18} {res['ms']:>15.3f} {res['min_round_ms']:>10.3f} {res['rel_err']:>9.1e}  "
                  f"{' '.join(f'{t:.3f}' for t in res['round_ms'])}{'' if res['ok'] else '  BAD OUTPUT'}")  # fmt: skip
        else:
            print(f"{name:<18} {'-':>15} {'-':>10} {'-':>9}  {res.get('error', 'not run')}")


def _print_table(report: dict, engines) -> None:
    print(f"\nms per inference (upload + run + download), median of {report['rounds']} rounds' medians of {report['repeat']} runs; "
          f"BAD = output off the reference")  # fmt: skip
    print("| model | " + " | ".join(engines) + " |")
    print("|---|" + "---|" * len(engines))
    for row in report["models"]:
        print(f"| {row['model']} | " + " | ".join(_cell(row["results"].get(e, {})) for e in engines) + " |")
    fp32 = [e for e in engines if not e.startswith("relax_vk") and e not in FP16_ENGINES]
    for row in report["models"]:
        res = row["results"]
        peers = [(res[e]["ms"], e) for e in fp32 if "ms" in res.get(e, {}) and res[e]["ok"]]
        notes = []
        for api in ("opencl", "vulkan"):
            ours = res.get(f"relax_vk/{api}", {})
            if "ms" in ours and peers:
                best, who = min(peers)
                notes.append(f"relax_vk/{api} / fastest fp32 peer ({who}) {ours['ms'] / best:.2f}")
        cl, vk = res.get("relax_vk/opencl", {}), res.get("relax_vk/vulkan", {})
        if "ms" in cl and "ms" in vk:
            notes.append(f"vulkan / opencl {vk['ms'] / cl['ms']:.2f}")
        if notes:
            print(f"{row['model']}: " + "; ".join(notes))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", metavar="DIR")
    p.add_argument("--run", metavar="PART", nargs="+", help="the bundle's part folders (all of them)")
    p.add_argument("--models", nargs="*", default=None, help=f"--build: default {' '.join(MODELS)}; --run: every model of the bundle")
    p.add_argument("--device-name", default=None, help="--build: relax_vk's plans for this device's tuning records (e.g. 'NVIDIA H100 80GB HBM3')")
    p.add_argument("--mnn-python", default=None, help="--build: the Python of a virtual environment with the mnn wheel (its converter)")
    p.add_argument("--pnnx", default=None, help="--build: the pnnx executable (inside the pnnx wheel's package folder)")
    p.add_argument("--mnn-dist", default=None, help="--build: folder with bin/mnn_cl_bench and lib/libMNN.so (built elsewhere)")
    p.add_argument("--ocl-icd-deb", default=None, help="--build: Debian's ocl-icd-libopencl1 package (MNN dlopens libOpenCL.so)")
    p.add_argument("--wheels", nargs="*", default=None, help="--build: cp312 wheels to carry (ncnn, iree-base-runtime)")
    p.add_argument("--iree-bin", default=None, help="--build: folder with iree-import-onnx and iree-compile (the iree-base-compiler wheel)")
    p.add_argument("--iree-target", default="ampere", help="--build: --iree-vulkan-target (ampere for the H100; vp_android_baseline_2022 runs on lavapipe)")
    p.add_argument("--iree-models", nargs="*", default=list(IREE_MODELS), help="--build: the models compiled for IREE")
    p.add_argument("--part-mib", type=float, default=55.0)
    p.add_argument("--engines", nargs="*", default=None, choices=ENGINES)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--opencl-device", default=None, help="--run: relax_vk's OpenCL device (default: a GPU; 'pocl' to test here)")
    p.add_argument("--vulkan-device", default=None, help="--run: relax_vk's Vulkan adapter (default: a GPU; 'lavapipe' to test here)")
    p.add_argument("--mnn-forward", default="opencl", choices=("opencl", "cpu"), help="--run: 'cpu' tests the MNN column without a GPU")
    p.add_argument("--mnn-tune", default="wide", choices=("wide", "normal", "fast", "heavy", "none"), help="--run: MNN's local-size tuning")
    p.add_argument("--mnn-cache", default=os.path.join(tempfile.gettempdir(), "peers-mnn-cache"),
                   help="--run: MNN's tuning cache files (kept, so a second run skips the tuning)")
    p.add_argument("--ncnn-cpu", action="store_true", help="--run: ncnn on its CPU path (tests the column without a GPU)")
    p.add_argument("--torch-device", default="cuda")
    p.add_argument("--json", default="")
    args = p.parse_args()
    if args.build:
        build(args.build, args.models or MODELS, args)
    elif args.run:
        run(args.run, args)
    else:
        p.error("give --build DIR or --run PART [PART ...]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
