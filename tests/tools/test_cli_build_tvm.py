"""``relax-vk build --runtime tvm``: a library for TVM's Relax VM, cross-compiled for phones."""

import shutil
import struct

import pytest

import relax_vk
from relax_vk.frontends import load_model
from relax_vk.tools.cli import main

EM_AARCH64 = 183


def _elf_machine(data: bytes) -> int:
    assert data[:4] == b"\x7fELF" and data[4] == 2, "not a 64-bit ELF file"  # EI_CLASS 2: 64-bit
    assert data[5] == 1  # little endian
    return struct.unpack_from("<H", data, 18)[0]  # e_machine


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-g++") is None, reason="needs g++-aarch64-linux-gnu (make setup installs it)")
def test_aarch64_library_carries_the_vm_program_and_the_opencl_kernels(tmp_path, capsys):
    path = tmp_path / "model.so"
    assert main(["build", "rfc-conv2d", "--runtime", "tvm", "--host", "aarch64-linux-gnu", "-o", str(path)]) == 0
    data = path.read_bytes()
    assert _elf_machine(data) == EM_AARCH64
    assert b"relax.VMExecutable" in data and b"relax_vk.vdevices=opencl:0:global;" in data  # the VM program, its devices
    kernels = relax_vk.build(load_model("rfc-conv2d")[0], "opencl").kernels
    assert kernels and all(f"__kernel void {name}(".encode() in data for name in kernels)
    assert b"image2d_array_t" in data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.so"]


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-g++") is None, reason="needs g++-aarch64-linux-gnu (make setup installs it)")
def test_android_host_code_links_with_a_given_compiler(tmp_path, capsys):
    # (no NDK here: the AArch64 g++ links LLVM's aarch64-linux-android host code into an ELF)
    path = tmp_path / "model.so"
    args = ["build", "conv-relu-pool", "--runtime", "tvm", "--host", "aarch64-linux-android", "--cc", "aarch64-linux-gnu-g++"]
    assert main(args + ["-o", str(path)]) == 0
    assert _elf_machine(path.read_bytes()) == EM_AARCH64


def test_missing_cross_compilers_are_named_before_compiling(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TVM_NDK_CC", raising=False)
    assert main(["build", "rfc-conv2d", "--runtime", "tvm", "--host", "aarch64-linux-android", "-o", str(tmp_path / "m.so")]) == 2
    out = capsys.readouterr()
    assert "TVM_NDK_CC" in out.err and "compiling" not in out.out
    assert main(["build", "rfc-conv2d", "--runtime", "tvm", "--host", "riscv64-linux-gnu", "-o", str(tmp_path / "m.so")]) == 2
    assert "--cc" in capsys.readouterr().err
    assert main(["build", "rfc-conv2d", "--runtime", "tvm", "-o", str(tmp_path / "m.rvk")]) == 2
    assert "MODEL.so" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
