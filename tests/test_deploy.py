"""relax_vk.compile / load_vm / tvm_runtime.export_library: TVM's own runtime (the PyPI runtime has no
OpenCL, so OpenCL executables are checked for their device list and the clear error; CPU builds run).

Where TVM's runtime has OpenCL (a libtvm_runtime built with it, or ``$RELAX_VK_TVM_OPENCL_LIB``
naming a library with TVM's OpenCL runtime to load first), the OpenCL tests run the VM on pocl and
compare it with relax_vk's own runtime."""

import ctypes
import os

import numpy as np
import pytest
import tvm

import relax_vk
from relax_vk import tvm_runtime
from relax_vk.analysis.reference import run_on_cpu
from relax_vk.codegen.opencl import kernel_names, opencl_source
from relax_vk.compiler import UnsupportedTargetError
from relax_vk.frontends import load_model
from relax_vk.passes.lower.record_vdevices import decode, encode, vdevice_table


if os.environ.get("RELAX_VK_TVM_OPENCL_LIB"):
    ctypes.CDLL(os.environ["RELAX_VK_TVM_OPENCL_LIB"], mode=ctypes.RTLD_GLOBAL)


@pytest.fixture(scope="module")
def rfc():
    return load_model("rfc-conv2d")[0]


@pytest.fixture(scope="module")
def opencl_executable(rfc):
    return relax_vk.compile(rfc, "opencl")


def _inputs(mod, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal([int(d) for d in p.ty.shape.values]).astype(str(p.ty.dtype)) for p in mod["main"].params]


def test_compile_is_builds_executable(rfc, opencl_executable):
    compiled = relax_vk.build(rfc, "opencl")
    assert isinstance(opencl_executable, tvm.runtime.Executable)
    # same plan, kernels and tuning; the artifact's kernels address textures at origins, the VM's
    # (each texture an image of its own) do not
    assert kernel_names(opencl_source(opencl_executable)) == kernel_names(compiled.opencl_source)
    assert "_origin" in compiled.opencl_source and "_origin" not in opencl_source(opencl_executable)
    assert tvm_runtime.vdevice_table(opencl_executable) == vdevice_table(compiled.vm_module)


def test_device_list_is_one_device_per_vdevice_then_the_cpu(opencl_executable):
    table = tvm_runtime.vdevice_table(opencl_executable)
    assert [row["memory_scope"] for row in table][0] == "global" and any("texture" in r["memory_scope"] for r in table)
    devices = tvm_runtime.vm_devices(table, tvm.opencl(0))
    assert devices == [tvm.opencl(0)] * len(table) + [tvm.cpu()]
    assert tvm_runtime.vm_devices(table, tvm.opencl(1)) == [tvm.opencl(1)] * len(table) + [tvm.cpu()]
    assert tvm_runtime.vm_devices([], tvm.cpu()) == [tvm.cpu(), tvm.cpu()]


def test_table_round_trips():
    table = [{"kind": "opencl", "vdevice_id": 0, "memory_scope": "global"}, {"kind": "opencl", "vdevice_id": 1, "memory_scope": "global.texture-nhwc"}]
    assert decode("stats: [" + encode(table) + '", other]') == table
    assert decode(encode([])) == [] and decode("no table") is None


@pytest.mark.skipif(tvm_runtime.has_runtime("opencl"), reason="this TVM runtime has OpenCL")
def test_load_vm_names_the_missing_opencl_runtime(opencl_executable, tmp_path):
    with pytest.raises(tvm_runtime.RuntimeUnavailableError, match="USE_OPENCL=ON"):
        relax_vk.load_vm(opencl_executable, tvm.opencl(0))
    path = str(tmp_path / "m.so")
    tvm_runtime.export_library(opencl_executable, path)
    with pytest.raises(tvm_runtime.RuntimeUnavailableError, match="opencl"):
        relax_vk.load_vm(path)


def test_cpu_build_runs_from_the_executable_and_the_library(rfc, tmp_path):
    inputs = _inputs(rfc)
    expected = run_on_cpu(rfc, inputs)[0]
    executable = relax_vk.compile(rfc, "llvm")
    vm = relax_vk.load_vm(executable)
    got = vm["main"](*[tvm.runtime.tensor(a) for a in inputs]).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    path = str(tmp_path / "out" / "model.so")
    tvm_runtime.export_library(executable, path)
    tvm_runtime.export_library(executable, path)  # replaces the file whole
    assert [f for f in os.listdir(tmp_path / "out")] == ["model.so"]  # no staging file left
    got = relax_vk.load_vm(path)["main"](*[tvm.runtime.tensor(a) for a in inputs]).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_pools_are_cleared_before_a_vm_starts_and_after_it_goes(rfc, monkeypatch):
    # a VM gone leaves its texture constants in TVM's pooled allocator, where a later buffer would get
    # one (docs/tvm_runtime.md): load_vm clears the pools first, and the VM clears them once it is freed
    import gc

    cleared = []
    monkeypatch.setattr(tvm_runtime, "clear_allocator_pools", lambda: cleared.append(len(cleared)))
    vm = relax_vk.load_vm(relax_vk.compile(rfc, "llvm"))
    assert cleared == [0]
    vm["main"](*[tvm.runtime.tensor(a) for a in _inputs(rfc)])
    del vm
    gc.collect()
    assert cleared == [0, 1]


def test_failed_export_leaves_nothing(rfc, tmp_path):
    executable = relax_vk.compile(rfc, "llvm")
    with pytest.raises(tvm_runtime.RuntimeUnavailableError, match="not installed"):
        tvm_runtime.export_library(executable, str(tmp_path / "m.so"), host="aarch64-linux-gnu", cc="no-such-compiler-g++")
    with pytest.raises(tvm_runtime.RuntimeUnavailableError, match="TVM_NDK_CC"):
        os.environ.pop("TVM_NDK_CC", None)
        tvm_runtime.export_library(executable, str(tmp_path / "m.so"), host="aarch64-linux-android")
    assert os.listdir(tmp_path) == []


def test_allocators_are_naive_for_texture_vdevices_pooled_else():
    naive, pooled = tvm.relax.VirtualMachine.NAIVE_ALLOCATOR, tvm.relax.VirtualMachine.POOLED_ALLOCATOR
    table = decode(encode([{"kind": "opencl", "vdevice_id": 0, "memory_scope": "global"},
                           {"kind": "opencl", "vdevice_id": 0, "memory_scope": "global.texture"},
                           {"kind": "opencl", "vdevice_id": 0, "memory_scope": "global.texture-weight"}]))  # fmt: skip
    assert tvm_runtime.allocator_types(table, 4) == [pooled, naive, naive, pooled]  # ... then the CPU's
    assert tvm_runtime.allocator_types([], 2) == [pooled, pooled]


def test_unsupported_targets_are_named(rfc):
    with pytest.raises(UnsupportedTargetError, match="vulkan"):
        relax_vk.compile(rfc, "vulkan")
    with pytest.raises(UnsupportedTargetError):
        relax_vk.compile(rfc, "cuda")


@pytest.mark.skipif(not tvm_runtime.has_runtime("opencl"), reason="this TVM runtime has no OpenCL (the PyPI wheel's)")
@pytest.mark.parametrize("model", ["rfc-conv2d", "mixed-consumers"])
def test_vm_on_pocl_equals_the_own_runtime(model, pocl, tmp_path):
    from relax_vk.analysis.reference import random_inputs
    from relax_vk.runtime import load

    mod = load_model(model)[0]
    compiled = relax_vk.build(mod, relax_vk.target.opencl(opencl_device=pocl))
    path = str(tmp_path / "m.so")
    tvm_runtime.export_library(compiled.executable, path)
    inputs = random_inputs(mod)
    vm = relax_vk.load_vm(path, tvm.opencl(0))
    assert vm.hoisted("main")  # images allocated once for the VM (HoistImageStorage)
    expected = load(compiled.artifact(), device="pocl").run(inputs)
    # twice through the held images (the second call reuses the first's images and pooled buffers),
    # then through plain main (images per call), then the held images again
    for run in (vm["main"], vm["main"], vm.module["main"], vm["main"]):
        result = run(*[tvm.runtime.tensor(x, device=tvm.opencl(0)) for x in inputs])
        outputs = [result.numpy()] if hasattr(result, "numpy") else [r.numpy() for r in result]
        for got, own in zip(outputs, expected):
            np.testing.assert_allclose(got, own, rtol=1e-5, atol=1e-6)
