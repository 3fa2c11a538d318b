"""The native command-line tools and the Android-shaped example, built by CMake and run on pocl and
(Vulkan, through wgpu-native) lavapipe: rvk-run (no Python: .npy in, .npy out, median ms), the
example's top-5, and the sanitizer build's bad-artifact and byte-flip fuzz runs (a clear error, no
crash, no sanitizer report)."""

import os
import re
import subprocess

import numpy as np
import pytest

import relax_vk
from relax_vk.analysis.reference import random_inputs
from relax_vk.models import build_example
from relax_vk.runtime import library as native
from relax_vk.runtime import load

from ...serialization.test_validate import CASES
from .test_artifacts import damaged_bytes

# (no $RVK_WGPU_LIBRARY: each build folder has wgpu-native beside the library, where it looks first)
TOOL_ENV = {k: v for k, v in dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp")).items() if k != "RVK_WGPU_LIBRARY"}
#: a sanitizer report fails the run (ASan/UBSan exit non-zero and print their SUMMARY line); leaks
#: inside the driver stack only (tests/lsan.supp: one allocation of wgpu-native's adapter enumeration, lavapipe's own) are suppressed;
#: intercept_tls_get_addr=0 as in native/tests/fuzz.sh (GCC 12's LeakSanitizer otherwise dies on some heap layouts: native/README.md)
SANITIZER_ENV = dict(TOOL_ENV, ASAN_OPTIONS="detect_leaks=1:intercept_tls_get_addr=0", UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1",
                     LSAN_OPTIONS=f"suppressions={native.SOURCE_DIR / 'tests' / 'lsan.supp'}")  # fmt: skip


def run(args, env=TOOL_ENV, timeout=300):
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, timeout=timeout)
    assert "Sanitizer" not in done.stderr and "runtime error:" not in done.stderr, done.stderr[-4000:]
    return done


@pytest.fixture(scope="module", params=[("opencl", "pocl"), ("vulkan", "lavapipe")], ids=["pocl", "lavapipe"])
def backend(request):
    """(target, device) of a backend: pocl through the ICD loader, lavapipe through wgpu-native."""
    return request.param


@pytest.fixture(scope="module")
def model(tmp_path_factory, backend):
    """conv-relu-pool as a file for the backend, its inputs as .npy and the Python runtime's outputs."""
    target, device = backend
    folder = tmp_path_factory.mktemp("rvk")
    mod = build_example("conv-relu-pool")
    artifact = relax_vk.build(mod, target=target).artifact()
    path = folder / "model.rvk"
    artifact.write(str(path))
    inputs = random_inputs(mod)
    files = []
    for i, x in enumerate(inputs):
        files.append(folder / f"in{i}.npy")
        np.save(files[-1], x)
    return path, files, load(artifact, device=device).run(inputs), artifact


def test_rvk_run_matches_the_python_runtime(native_build, model, backend, tmp_path):
    path, inputs, expected, _ = model
    out = tmp_path / "y.npy"
    args = [native_build / "rvk-run", path, "--device", backend[1], "--output", out, "--repeat", "3", "--profile"]
    for f in inputs:
        args += ["--input", f]
    done = run(args)
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(np.load(out), expected[0])
    assert re.search(r"median \d+\.\d+ ms per inference \(3 runs", done.stdout)
    assert "load to first output" in done.stdout and "te_layout_transform_kernel" in done.stdout


@pytest.mark.parametrize("checks", ["loops", "none"])
def test_rvk_run_shader_checks(native_build, model, backend, tmp_path, checks):
    """--shader-checks: wgpu's checks in the Vulkan shaders dropped, the same outputs; a value that
    is not a mode is a usage error."""
    path, inputs, expected, _ = model
    if backend[0] != "vulkan":
        pytest.skip("shader checks are wgpu's (Vulkan)")
    out = tmp_path / "y.npy"
    args = [native_build / "rvk-run", path, "--device", backend[1], "--output", out, "--shader-checks", checks]
    for f in inputs:
        args += ["--input", f]
    done = run(args)
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(np.load(out), expected[0])
    bad = run([native_build / "rvk-run", path, "--device", backend[1], "--shader-checks", "off"])
    assert bad.returncode == 2 and "usage: rvk-run" in bad.stderr


def test_rvk_run_errors(native_build, model, backend, tmp_path):
    path, inputs, _, _ = model
    done = run([native_build / "rvk-run", path, "--device", backend[1], "--input", inputs[0]])
    assert done.returncode == 1 and "the model takes 2 inputs, got 1" in done.stderr
    np.save(tmp_path / "x64.npy", np.load(inputs[0]).astype("float64"))
    done = run([native_build / "rvk-run", path, "--device", backend[1], "--input", tmp_path / "x64.npy", "--input", inputs[1]])
    assert done.returncode == 1 and "RVK_ERROR_ARGUMENT: input x: dtype float64, expected float32" in done.stderr
    np.save(tmp_path / "objects.npy", np.array([None, 1], dtype=object), allow_pickle=True)  # (its descr is '|O')
    done = run([native_build / "rvk-run", path, "--device", backend[1], "--input", tmp_path / "objects.npy", "--input", inputs[1]])
    assert done.returncode != 0 and "objects.npy: dtype '|O' is not supported" in done.stderr
    (tmp_path / "bad.rvk").write_bytes(path.read_bytes()[:100])
    done = run([native_build / "rvk-run", tmp_path / "bad.rvk"])
    assert done.returncode == 1 and "RVK_ERROR_ARTIFACT" in done.stderr and "truncated?" in done.stderr


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_the_android_shaped_example_prints_the_python_top5(native_build, zoo_artifact, tmp_path, target, device):
    import torch

    artifact, example, model = zoo_artifact("squeezenet", target)
    path = tmp_path / "squeezenet.rvk"
    artifact.write(str(path))
    frame = example.astype("<f4")
    frame.tofile(tmp_path / "frame.f32")
    scores = load(artifact, device=device).run([frame])[0].ravel()
    top5 = np.argsort(-scores, kind="stable")[:5]
    with torch.no_grad():
        assert list(np.argsort(-model(torch.from_numpy(example)).numpy().ravel(), kind="stable")[:1]) == list(top5[:1])
    done = run([native_build / "examples" / "android_classifier" / "android_classifier", path, "--device", device, "--frame", tmp_path / "frame.f32"])
    assert done.returncode == 0, done.stderr
    printed = [int(c) for c in re.findall(r"class (\d+):", done.stdout)]
    assert printed == list(top5), done.stdout


def test_the_c_generation_example_prints_the_tokens_of_transformers(native_build, tmp_path):
    """examples/llm_generate: greedy decoding of a decoder artifact through the C ABI alone (states,
    run-time dims, chunked prompts) gives transformers' tokens and the Python generator's record;
    sampled, it keeps to top-k and reproduces its tokens from a seed."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from relax_vk.frontends import load_model
    from relax_vk.runtime import Session
    from relax_vk.runtime.generate import Generator

    from ...frontends.test_hf_decoder import PROMPT, _checkpoint

    model = _checkpoint(tmp_path / "llama", "llama")
    mod, _ = load_model(str(tmp_path / "llama"), dims={"T": (1, 24), "S": (1, 4)})  # the 7-token prompt in two chunks
    artifact = relax_vk.build(mod, "opencl").artifact()
    path = tmp_path / "llama.rvk"
    artifact.write(str(path))
    generation = Generator(Session(artifact, device="pocl")).generate(PROMPT, 12)
    with torch.no_grad():
        expected = model.generate(torch.tensor([PROMPT]), attention_mask=torch.ones(1, len(PROMPT), dtype=torch.long),
                                  max_new_tokens=12, do_sample=False, pad_token_id=0)[0, len(PROMPT):].tolist()  # fmt: skip
    assert generation.tokens == expected
    exe = native_build / "examples" / "llm_generate" / "llm_generate"
    prompt = ",".join(str(t) for t in PROMPT)
    done = run([exe, path, "--device", "pocl", "--prompt-ids", prompt, "--new-tokens", "12", "--json"])
    assert done.returncode == 0, done.stderr
    record = __import__("json").loads(done.stdout)
    assert record["tokens"] == expected and record["prompt_tokens"] == len(PROMPT)
    assert sorted(record) == sorted(generation.to_json()) and record["decode_tokens_per_s"] > 0
    assert record["finish_reason"] == "length"
    # a stop token ends the tokens, as the Python generator's stop_tokens do
    stop = expected[4]
    done = run([exe, path, "--device", "pocl", "--prompt-ids", prompt, "--new-tokens", "12", "--stop-ids", f"9999,{stop}", "--json"])
    record = __import__("json").loads(done.stdout)
    stopped = Generator(Session(artifact, device="pocl")).generate(PROMPT, 12, stop_tokens=[9999, stop])
    assert record["tokens"] == stopped.tokens == expected[: expected.index(stop) + 1]
    assert record["finish_reason"] == stopped.finish_reason == "stop"
    done = run([exe, path, "--device", "pocl", "--prompt-ids", prompt, "--new-tokens", "2"])
    assert done.returncode == 0 and done.stdout.split()[:3] == ["tokens:", *map(str, expected[:2])], done.stdout
    # what the Python generator refuses, the example refuses by name, before running
    done = run([exe, path, "--device", "pocl", "--prompt-ids", prompt, "--new-tokens", "19"])
    assert done.returncode == 1 and "need 25 cache rows; the artifact holds 24" in done.stderr
    done = run([exe, path, "--device", "pocl", "--prompt-ids", "3,160", "--new-tokens", "2"])
    assert done.returncode == 1 and "token id 160 is outside the vocabulary (0..159)" in done.stderr
    done = run([exe, path, "--prompt-ids", "3,x"])
    assert done.returncode == 2 and "usage:" in done.stderr
    # sampled: top-k of 1 is the arg-max whatever the temperature; top-k of 2 picks one of each
    # step's two largest logits; the same seed gives the same tokens; bad values are refused
    sampled = lambda *flags: __import__("json").loads(run([exe, path, "--device", "pocl", "--prompt-ids", prompt, "--new-tokens", "12", "--json", *flags]).stdout)  # noqa: E731
    record = sampled("--temperature", "1.7", "--top-k", "1", "--seed", "3")
    assert record["tokens"] == expected and record["sampling"] == {"temperature": 1.7, "top_k": 1, "top_p": None, "seed": 3}
    assert sampled("--temperature", "1e-38", "--top-p", "0.5")["tokens"] == expected  # (the largest logits overflow: greedy)
    first, again = (sampled("--temperature", "2", "--top-k", "2", "--top-p", "0.95", "--seed", "11") for _ in range(2))
    assert first["tokens"] == again["tokens"] != expected and first["sampling"]["top_p"] == 0.95  # (drawn, not the arg-max)
    logits = Generator(Session(artifact, device="pocl")).forward(PROMPT + first["tokens"][:-1])
    for step, token in enumerate(first["tokens"]):
        assert token in np.argsort(logits[len(PROMPT) - 1 + step])[-2:], step
    for flags in (["--top-p", "0"], ["--top-k", "0"], ["--temperature", "-1"], ["--seed", "x"]):
        done = run([exe, path, "--prompt-ids", prompt, *flags])
        assert done.returncode == 2 and "--top-p P (in (0, 1])" in done.stderr, flags


def test_the_jni_glue_from_java(native_build, zoo_artifact, tmp_path):
    """Classifier.java -> classifier_jni.c -> the C ABI: the Kotlin/Java side of an app, on pocl."""
    import shutil

    jni = native_build / "examples" / "android_classifier" / "libclassifier_jni.so"
    if not (shutil.which("javac") and shutil.which("java") and jni.exists()):
        pytest.skip("no JDK (javac, java and jni.h)")
    artifact, example, _ = zoo_artifact("squeezenet")
    artifact.write(str(tmp_path / "model.rvk"))
    example.astype("<f4").tofile(tmp_path / "frame.f32")
    top5 = np.argsort(-load(artifact, device="pocl").run([example])[0].ravel(), kind="stable")[:5]
    sources = sorted((native.SOURCE_DIR.parent / "examples" / "android_classifier" / "java").rglob("*.java"))
    assert run(["javac", "-d", tmp_path / "classes", *sources]).returncode == 0
    done = run(["java", f"-Drelaxvk.jni={jni}", "-cp", tmp_path / "classes", "org.relaxvk.example.Main", tmp_path / "model.rvk",
                tmp_path / "frame.f32", "pocl"])  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.split() == ["top-5:"] + [str(k) for k in top5]
    # a damaged model is a Java exception carrying the runtime's message
    (tmp_path / "bad.rvk").write_bytes(b"RELAXVK\0" + bytes(100))
    done = run(["java", f"-Drelaxvk.jni={jni}", "-cp", tmp_path / "classes", "org.relaxvk.example.Main", tmp_path / "bad.rvk",
                tmp_path / "frame.f32", "pocl"])  # fmt: skip
    assert done.returncode != 0 and "RuntimeException: loading the model: RVK_ERROR_ARTIFACT: model: format version 0" in done.stderr


def test_a_missing_wgpu_library_is_a_clear_error(native_build, tmp_path):
    from ...runtime_helpers import copy_program

    path = tmp_path / "copy.rvk"
    copy_program((1, 1, 1, 2, 4), "global.texture", target="vulkan").write(str(path))
    env = dict(TOOL_ENV, RVK_WGPU_LIBRARY=str(tmp_path / "missing.so"), LD_LIBRARY_PATH="")
    done = run([native_build / "rvk-run", path, "--device", "lavapipe"], env=env)
    assert done.returncode == 1 and "RVK_ERROR_DEVICE: no wgpu-native library could be loaded (tried " in done.stderr and "missing.so" in done.stderr


def test_bad_artifacts_under_the_sanitizers(asan_build, model, backend, tmp_path):
    path, inputs, _, artifact = model
    files = []
    for name, (change, _) in sorted(CASES.items()):
        files.append(tmp_path / f"{len(files)}.rvk")
        files[-1].write_bytes(damaged_bytes(artifact, change))
    data = path.read_bytes()
    for cut in (0, 10, 95, len(data) // 2, len(data) - 1):
        files.append(tmp_path / f"cut{cut}.rvk")
        files[-1].write_bytes(data[:cut])
    for f in files:
        done = run([asan_build / "rvk-run", f, "--device", backend[1], "--input", inputs[0], "--input", inputs[1]], env=SANITIZER_ENV)
        assert done.returncode == 1 and "RVK_ERROR_ARTIFACT" in done.stderr, (f, done.stderr[-2000:])
    # and a valid run under the sanitizers, outputs and all
    done = run([asan_build / "rvk-run", path, "--device", backend[1], "--input", inputs[0], "--input", inputs[1], "--repeat", "1"], env=SANITIZER_ENV)
    assert done.returncode == 0, done.stderr[-4000:]


def test_byte_flip_fuzz_under_the_sanitizers(asan_build, model, backend):
    """A slice of the campaign (native/tests/fuzz.sh runs 1,000 mutations per seed): every mutant
    refused with RVK_ERROR_ARTIFACT and a message, or loaded and run on the device, with no report."""
    path = model[0]
    done = run([asan_build / "rvk-fuzz", path, "--mutations", "300", "--seed", "1", "--quiet"], env=SANITIZER_ENV)
    assert done.returncode == 0 and "0 misbehaved" in done.stdout, done.stdout[-4000:] + done.stderr[-4000:]
    done = run([asan_build / "rvk-fuzz", path, "--mutations", "60", "--seed", "2", "--device", backend[1], "--quiet"], env=SANITIZER_ENV)
    assert done.returncode == 0 and "0 misbehaved" in done.stdout, done.stdout[-4000:] + done.stderr[-4000:]
    assert int(re.search(r"(\d+) sessions run", done.stdout).group(1)) > 0


def test_cross_build_for_aarch64(tmp_path):
    """The library cross-builds for 64-bit ARM with Debian's cross compiler (no OpenCL or wgpu-native
    library needed: both are dlopen()ed on the target). Unoptimised, library only: a build check, kept cheap."""
    import shutil

    from relax_vk.runtime import library as native

    if not shutil.which("aarch64-linux-gnu-g++"):
        pytest.skip("no aarch64 cross compiler (Debian: g++-aarch64-linux-gnu)")
    toolchain = native.SOURCE_DIR / "cmake" / "aarch64-linux-gnu.cmake"
    configure = ["cmake", "-S", native.SOURCE_DIR, "-B", tmp_path, f"-DCMAKE_TOOLCHAIN_FILE={toolchain}", "-DCMAKE_BUILD_TYPE=None",
                 "-DRVK_BUILD_EXAMPLES=OFF", "-DRVK_BUILD_TOOLS=OFF"]  # fmt: skip
    assert run(configure).returncode == 0
    done = run(["cmake", "--build", tmp_path, "-j2"])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    library = (tmp_path / "librelax_vk_native.so").read_bytes()
    assert library[:4] == b"\x7fELF" and int.from_bytes(library[18:20], "little") == 183  # EM_AARCH64
    if __import__("importlib.util").util.find_spec("wgpu"):  # the Vulkan backend is in (wgpu-native's headers only: its library is dlopen()ed)
        assert b"wgpuDeviceCreateShaderModuleTrusted" in library and b"libwgpu_native.so" in library


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_relax_vk_run_checks_against_the_reference(native_build, capsys, target, device):
    """`relax-vk run --profile` runs the model on the library, checks it against TVM llvm and
    profiles a warm run (the CLI names the device by its index)."""
    import json as _json

    from relax_vk.tools.cli import main

    assert main(["run", "rfc-conv2d", "--target", target, "--device", device, "--profile", "--check", "--repeat", "2", "--json"]) == 0
    result = _json.loads(capsys.readouterr().out)
    assert result["ok"] is True and result["backend"] == target and result["max_abs_err"] < 1e-3
    assert result["kernels"] and all(k["ms"] > 0 for k in result["kernels"])
