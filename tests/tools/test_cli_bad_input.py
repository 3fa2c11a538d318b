"""No input makes the CLI print a traceback: every bad model, file, flag or device answer is one
line naming the thing, with the documented exit code (2 for user error).

The command line runs in this process (``relax_vk.tools.cli.main``, what the ``relax-vk`` script
and ``python -m relax_vk`` call; ``tests/tools/test_cli.py`` runs those as processes): a bad
input is a return code and one stderr line either way, and an escaping exception fails the test
as a traceback would."""

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from helpers import assert_clear_error as _assert_clear  # noqa: E402
from helpers import cli_in_process as _cli  # noqa: E402


def test_broken_model_files(tmp_path):
    empty_pt2 = tmp_path / "empty.pt2"
    empty_pt2.write_bytes(b"")
    junk_pt2 = tmp_path / "junk.pt2"
    junk_pt2.write_bytes(b"PK\x03\x04 this is not a zip archive")
    junk_onnx = tmp_path / "junk.onnx"
    junk_onnx.write_bytes(b"\x08\x07garbage")
    empty_onnx = tmp_path / "empty.onnx"
    empty_onnx.write_bytes(b"")
    _assert_clear(_cli("plan", str(empty_pt2)), "empty.pt2", "empty file")
    _assert_clear(_cli("plan", str(junk_pt2)), "junk.pt2", "not a readable torch.export archive")
    _assert_clear(_cli("build", str(junk_onnx), "-o", str(tmp_path / "o.rvk")), "junk.onnx")
    _assert_clear(_cli("run", str(empty_onnx)), "empty.onnx")
    _assert_clear(_cli("plan", str(tmp_path / "missing.onnx")), "missing.onnx", "no such file")
    assert not (tmp_path / "o.rvk").exists()


def test_truncated_onnx_names_the_file(tmp_path):
    good = tmp_path / "good.onnx"
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3)).eval()
    torch.onnx.export(model, (torch.randn(1, 3, 8, 8),), str(good), dynamo=False, opset_version=17)
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    _assert_clear(_cli("plan", str(cut)), "cut.onnx")
    # (the model's rank, not 0; a repeat count of at least 1)
    _assert_clear(_cli("plan", str(good), "--input-shape", "input=1,3,8"), "has rank 4; --input-shape gives 3 dimensions")
    usage = _cli("run", "conv20", "--repeat", "0")
    assert usage.returncode == 2 and "argument --repeat: 0: at least 1" in usage.stderr


def test_custom_and_unsupported_ops_are_named(tmp_path):
    script = tmp_path / "make.py"
    script.write_text(
        "import torch\n"
        "@torch.library.custom_op('relax_vk_test::mystery', mutates_args=())\n"
        "def mystery(x: torch.Tensor) -> torch.Tensor:\n    return x * 2\n"
        "@mystery.register_fake\n"
        "def _(x):\n    return torch.empty_like(x)\n"
        "class M(torch.nn.Module):\n    def forward(self, x):\n        return torch.ops.relax_vk_test.mystery(torch.relu(x))\n"
        "torch.export.save(torch.export.export(M(), (torch.randn(1, 4, 8, 8),)), 'custom.pt2')\n"
        "class F(torch.nn.Module):\n    def forward(self, x):\n        return torch.fft.rfft(x).abs()\n"
        "torch.export.save(torch.export.export(F(), (torch.randn(4, 16),)), 'fft.pt2')\n"
    )
    subprocess.run([sys.executable, str(script)], check=True, cwd=tmp_path, capture_output=True, timeout=300)
    _assert_clear(_cli("plan", str(tmp_path / "custom.pt2")), "mystery")
    _assert_clear(_cli("plan", str(tmp_path / "fft.pt2")), "fft")


def test_bad_flags_and_names(tmp_path):
    _assert_clear(_cli("plan", "resnet9000"), "unknown model 'resnet9000'")
    _assert_clear(_cli("plan", "conv20", "--preset", "nokia"), "unknown device preset 'nokia'")
    _assert_clear(_cli("plan", "conv20", "--input-shape", "x=1,3"), "--input-shape and --dim apply to ONNX models")
    _assert_clear(_cli("build", "conv20", "--max-buffer-bytes", "1000", "-o", str(tmp_path / "c.rvk")), "conv2d weight [32, 32, 3, 3]", "1000-byte")
    _assert_clear(_cli("build", "conv20", "--max-buffer-bytes", "50000", "-o", str(tmp_path / "c.rvk")), "tensor x", "50000 bytes")
    _assert_clear(_cli("run", "conv20", "--device", "9:9"), "no OpenCL device 9:9")
    bad = tmp_path / "bad.rvk"
    bad.write_bytes(b"RELAXVK\0" + b"\0" * 100)
    _assert_clear(_cli("run", str(bad)), "bad.rvk")
