"""examples/cpp_deploy: the C++ program loads an exported library with TVM's C++ API, runs ``main``
and prints outputs equal to the Python VM's (a CPU-target build: the PyPI runtime has no OpenCL)."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tvm

import relax_vk
from relax_vk import tvm_runtime
from relax_vk.frontends import load_model

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "cpp_deploy")


def _inputs(shapes):
    """What run_model feeds input k: 0.5 * sin(0.001 * i + k) over its flat index i."""
    return [(0.5 * np.sin(0.001 * np.arange(int(np.prod(s)), dtype=np.float32) + np.float32(k))).astype(np.float32).reshape(s)
            for k, s in enumerate(shapes)]  # fmt: skip


#: a library holding TVM's OpenCL runtime to link (tests/test_deploy.py says more)
OPENCL_LIB = os.environ.get("RELAX_VK_TVM_OPENCL_LIB")


@pytest.fixture(scope="module")
def run_model(tmp_path_factory):
    if shutil.which("g++") is None or shutil.which("make") is None:
        pytest.skip("needs g++ and make")
    out = str(tmp_path_factory.mktemp("cpp") / "run_model")
    extra = []
    if OPENCL_LIB:
        folder = os.path.dirname(os.path.abspath(OPENCL_LIB))
        name = os.path.basename(OPENCL_LIB)[3:].rsplit(".so", 1)[0]
        extra = [f"EXTRA_LIBS=-L{folder} -l{name} -Wl,-rpath,{folder}"]
    subprocess.run(["make", "-s", "-C", EXAMPLE, f"PYTHON={sys.executable}", f"OUT={out}", "OPT=-O0", *extra], check=True)
    return out


def _parse(stdout: str):
    rows = []
    for line in stdout.strip().splitlines():
        words = line.split()
        assert words[0] == "output" and words[2] == "shape" and words[4] == "sum" and words[6] == "values", line
        rows.append((tuple(int(d) for d in words[3].split(",")), float(words[5]), [float(v) for v in words[7:]]))
    return rows


@pytest.mark.parametrize("model", ["residual", "mixed-consumers"])
def test_cpp_program_prints_the_vms_outputs(run_model, model, tmp_path):
    mod = load_model(model)[0]
    path = str(tmp_path / "model.so")
    tvm_runtime.export_library(relax_vk.compile(mod, "llvm"), path)
    shapes = [tuple(int(d) for d in p.ty.shape.values) for p in mod["main"].params]
    run = subprocess.run([run_model, path, "cpu", *[",".join(map(str, s)) for s in shapes]], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    result = relax_vk.load_vm(path)["main"](*[tvm.runtime.tensor(x) for x in _inputs(shapes)])
    outputs = [result.numpy()] if hasattr(result, "numpy") else [r.numpy() for r in result]
    rows = _parse(run.stdout)
    assert len(rows) == len(outputs)
    for (shape, total, first), expected in zip(rows, outputs):
        assert shape == expected.shape
        np.testing.assert_allclose(first, expected.reshape(-1)[: len(first)], rtol=1e-6, atol=1e-7)
        assert abs(total - float(expected.astype(np.float64).sum())) <= 1e-5 * max(1.0, float(np.abs(expected).sum()))


@pytest.mark.skipif(not OPENCL_LIB, reason="needs TVM's OpenCL runtime ($RELAX_VK_TVM_OPENCL_LIB)")
def test_cpp_program_runs_textures_on_pocl(run_model, tmp_path):
    if OPENCL_LIB:
        import ctypes

        ctypes.CDLL(OPENCL_LIB, mode=ctypes.RTLD_GLOBAL)
    mod = load_model("residual")[0]
    path = str(tmp_path / "model.so")
    tvm_runtime.export_library(relax_vk.compile(mod, "opencl"), path)
    shapes = [tuple(int(d) for d in p.ty.shape.values) for p in mod["main"].params]
    run = subprocess.run([run_model, path, "opencl", *[",".join(map(str, s)) for s in shapes]], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    expected = relax_vk.load_vm(relax_vk.compile(mod, "llvm"))["main"](*[tvm.runtime.tensor(x) for x in _inputs(shapes)]).numpy()
    (shape, total, first), = _parse(run.stdout)
    assert shape == expected.shape
    np.testing.assert_allclose(first, expected.reshape(-1)[: len(first)], rtol=1e-5, atol=1e-6)


def test_cpp_program_names_a_missing_runtime(run_model, tmp_path):
    if tvm_runtime.has_runtime("opencl") or OPENCL_LIB:
        pytest.skip("this TVM runtime has OpenCL")
    path = str(tmp_path / "model.so")
    tvm_runtime.export_library(relax_vk.compile(load_model("rfc-conv2d")[0], "opencl"), path)
    run = subprocess.run([run_model, path, "opencl", "2,64,56,56", "32,64,3,3"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "opencl" in run.stderr and "error:" in run.stderr
