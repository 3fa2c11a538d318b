import json
import subprocess
import sys

import pytest

from relax_vk.serialization.artifact import Artifact
from relax_vk.tools.cli import main


def test_plan_json_is_the_plan_contract(capsys):
    assert main(["plan", "rfc-conv2d", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"tensors", "texture_bytes", "buffer_bytes", "copies", "copy_bytes"} <= set(data)
    assert any(t["scope"] == "global.texture-weight" for t in data["tensors"])


def test_plan_options(capsys):
    assert main(["plan", "rfc-conv2d", "--json", "--weights-in-buffers"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert not any(t["scope"] == "global.texture-weight" for t in data["tensors"])
    assert main(["plan", "rfc-conv2d", "--json", "--no-textures"]) == 0
    assert json.loads(capsys.readouterr().out)["texture_bytes"] == 0
    assert main(["plan", "rfc-conv2d", "--json", "--target", "vulkan", "--spatial-limit", "32"]) == 0
    data = json.loads(capsys.readouterr().out)
    act = [t for t in data["tensors"] if t["shape"] == [2, 16, 56, 56, 4]][0]
    assert act["scope"] == "global"  # 56 > 32: no mapping fits the 32-texel limit


def test_unknown_model_is_a_clear_error(capsys):
    assert main(["plan", "resnet9000"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'resnet9000'" in err and "rfc-conv2d" in err


def test_demo_runs_as_a_console_script():
    proc = subprocess.run([sys.executable, "-m", "relax_vk.tools.cli", "demo"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "global.texture-weight" in proc.stdout and "texture share" in proc.stdout


def test_python_dash_m_relax_vk_is_the_command_line(capsys):
    """``python -m relax_vk`` prints what ``relax-vk`` prints and exits with its code."""
    proc = subprocess.run([sys.executable, "-m", "relax_vk", "plan", "rfc-conv2d", "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert main(["plan", "rfc-conv2d", "--json"]) == 0
    assert json.loads(proc.stdout) == json.loads(capsys.readouterr().out)
    assert main(["plan", "resnet9000"]) == 2 and "unknown model 'resnet9000'" in capsys.readouterr().err  # (the exit code python -m passes on)


def test_show_prints_every_layout_and_scope_stage(capsys):
    from relax_vk.pipeline import STAGES

    assert main(["show", "conv-relu-pool"]) == 0
    out = capsys.readouterr().out
    for stage in STAGES:
        assert (f"after stage {stage.number}: {stage.name} =====" in out) == (stage.group in ("layout", "scope"))
    assert "R.hint_on_device" in out


def test_models_lists_examples(capsys):
    assert main(["models"]) == 0
    assert "rfc-conv2d" in capsys.readouterr().out


def test_build_rvk_then_run_with_check_json(tmp_path, capsys):
    path = str(tmp_path / "m.rvk")
    assert main(["build", "conv-relu-pool", "-o", path]) == 0
    capsys.readouterr()
    assert main(["run", path, "--device", "pocl", "--check", "--repeat", "2", "--json", "--profile"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"backend", "device", "ok", "max_abs_err", "max_rel_err", "latency_ms", "kernels", "device_ms"}
    assert result["ok"] is True and result["max_abs_err"] < 1e-4
    assert set(result["latency_ms"]) == {"median", "min", "max"}
    assert_kernels_tile_the_device_time(result, Artifact.read(path).program)
    # without --profile: the same keys, unprofiled latency only
    assert main(["run", path, "--device", "pocl", "--repeat", "2", "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert set(plain) == set(result) and plain["kernels"] == [] and plain["device_ms"] is None and plain["latency_ms"]["median"] > 0


def assert_kernels_tile_the_device_time(result: dict, program=None):
    """``run --json``'s profile: one positive time per step of the program (kernel launches by
    name), adding up to no more than the device time of that profiled run."""
    kernels = result["kernels"]
    assert kernels and all({"name", "ms"} <= set(k) and k["ms"] > 0 for k in kernels)  # (keys may be added: start_ms)
    assert sum(k["ms"] for k in kernels) <= result["device_ms"] * (1 + 1e-9)
    if program is not None:
        assert [k["name"] for k in kernels if not k["name"].startswith("copy ")] == [s["kernel"] for s in program["steps"] if s["op"] == "launch"]
        assert len(kernels) == len(program["steps"])


def test_build_folder_holds_the_artifact_too(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["build", "rfc-conv2d", "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["kernels.cl", "model.rvk", "module.py", "plan.json"]


def test_run_a_model_name_and_text_output(capsys):
    assert main(["run", "rfc-conv2d", "--device", "pocl", "--check", "--repeat", "2", "--profile"]) == 0
    out = capsys.readouterr().out
    assert "check: OK" in out and "latency over 2 runs" in out and "conv2d_NCHWc_OIHWo" in out


def test_run_refuses_a_corrupt_artifact(tmp_path, capsys):
    bad = tmp_path / "bad.rvk"
    bad.write_bytes(b"RELAXVK\0" + b"\0" * 10)
    assert main(["run", str(bad)]) == 2
    assert "truncated" in capsys.readouterr().err


def test_devices_lists_a_usable_device(capsys):
    assert main(["devices", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert any(r["usable"] and r["image_support"] for r in rows)


def test_devices_lists_opencl_devices_and_vulkan_adapters(capsys):
    assert main(["devices", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    apis = {r["api"] for r in rows if r["usable"]}
    assert apis == {"opencl", "vulkan"}
    vulkan = [r for r in rows if r["api"] == "vulkan"]
    assert any("llvmpipe" in r["device"] and r["type"] == "CPU" for r in vulkan)  # lavapipe
    assert all(set(r) == set(rows[0]) for r in rows)  # one row shape for both APIs
    assert main(["devices"]) == 0
    assert "vulkan" in capsys.readouterr().out


def test_run_on_vulkan_has_the_same_json_contract(capsys):
    assert main(["run", "conv-relu-pool", "--backend", "vulkan", "--device", "lavapipe", "--check", "--repeat", "2", "--json", "--profile"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"backend", "device", "ok", "max_abs_err", "max_rel_err", "latency_ms", "kernels", "device_ms"}
    assert result["backend"] == "vulkan" and "llvmpipe" in result["device"]
    assert result["ok"] is True and result["max_abs_err"] < 1e-4
    assert_kernels_tile_the_device_time(result)
    assert not any("opencl" in k["name"] for k in result["kernels"])  # Vulkan kernels are named for Vulkan


def test_demo_checks_half_texels_at_the_fp16_bound(capsys):
    """``demo --fp16`` checks at the fp16 bound (it exited 1 at the fp32 one) and prints warm
    profiles with the device time their steps add up to."""
    assert main(["demo", "--fp16", "--model", "conv-relu-pool"]) == 0
    out = capsys.readouterr().out
    assert out.count("check vs TVM llvm: OK") == 2 and "rtol 0.01" in out
    assert out.count("warm profiled run: device time") == 2


def test_vulkan_build_folder_and_rvk_runs_on_its_own_backend(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["build", "rfc-conv2d", "--target", "vulkan", "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["kernels.wgsl", "model.rvk", "module.py", "plan.json"]
    assert "texture_storage_2d_array<rgba32float, write>" in (out / "kernels.wgsl").read_text()
    capsys.readouterr()
    assert main(["run", str(out / "model.rvk"), "--device", "lavapipe", "--check", "--repeat", "1"]) == 0
    assert "check: OK" in capsys.readouterr().out
    assert main(["run", str(out / "model.rvk"), "--backend", "opencl"]) == 2
    assert "was built for vulkan; rebuild it with --target opencl" in capsys.readouterr().err


def _small_lavapipe(monkeypatch, **limits) -> None:
    """``--device small``: lavapipe as the library reads it, with ``limits`` overridden."""
    import dataclasses

    import relax_vk.runtime as runtime

    select = runtime.select_device
    real = select("vulkan", "lavapipe")
    small = dataclasses.replace(real, limits=dataclasses.replace(real.limits, **limits))
    monkeypatch.setattr(runtime, "select_device", lambda api="opencl", spec=None: small if spec == "small" else select(api, spec))


def test_plan_takes_vulkan_limits_from_the_adapter(capsys, monkeypatch):
    _small_lavapipe(monkeypatch, image_width=32, image_height=32)  # lavapipe with a 32-texel 2D texture limit

    def activation_scope(args):
        assert main(["plan", "rfc-conv2d", "--json", "--target", "vulkan", *args]) == 0
        return [t for t in json.loads(capsys.readouterr().out)["tensors"] if t["shape"] == [2, 16, 56, 56, 4]][0]["scope"]

    assert activation_scope([]) == "global.texture"  # the target's default limits
    assert activation_scope(["--device", "lavapipe"]) == "global.texture"  # 16384 x 2048
    assert activation_scope(["--device", "small"]) == "global"  # 56 > 32: no mapping fits
    assert activation_scope(["--device", "small", "--spatial-limit", "64"]) == "global.texture"  # explicit wins


def test_fp16_and_no_reuse_builds_run_and_say_what_they_hold(tmp_path, capsys):
    import json

    from relax_vk.serialization.artifact import Artifact

    half, whole = str(tmp_path / "half.rvk"), str(tmp_path / "whole.rvk")
    assert main(["build", "conv-relu-pool", "--fp16", "-o", half]) == 0
    assert "with reuse" in capsys.readouterr().out
    assert main(["build", "conv-relu-pool", "--no-reuse", "-o", whole]) == 0
    assert "reuse off" in capsys.readouterr().out
    assert {t.get("texel") for t in Artifact.read(half).program["tensors"] if t["image"]} == {"float16"}
    program = Artifact.read(whole).program
    assert len(program["storage"]) == len(program["tensors"])
    assert main(["run", half, "--device", "pocl", "--check", "--repeat", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["ok"] is True and 1e-7 < result["max_abs_err"] < 1e-1  # checked at the fp16 bound, and really half
    assert main(["plan", "conv-relu-pool", "--fp16", "--json"]) == 0
    assert "texture:float16" in json.loads(capsys.readouterr().out)["memory"]["strategies"]
    assert main(["devices", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all({"half_images", "half_arithmetic"} <= set(r["fp16"]) for r in rows)


def test_build_for_a_vulkan_device_splits_weights_over_its_binding(tmp_path, capsys, monkeypatch):
    """`build --device` takes the adapter's real storage binding (not the target's default): an
    adapter binding a third of an ONNX Gemm's weight gets it split, and the build still runs right."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    from relax_vk.serialization.artifact import Artifact

    torch.manual_seed(0)
    model, onnx_path, rvk = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(200, 96)).eval(), str(tmp_path / "fc.onnx"), str(tmp_path / "fc.rvk")
    torch.onnx.export(model, (torch.randn(1, 8, 5, 5),), onnx_path, dynamo=False, opset_version=13)
    binding = 200 * 96 * 4 // 3
    _small_lavapipe(monkeypatch, max_buffer_bytes=binding)  # lavapipe with a binding a third of the Gemm's weight
    assert main(["build", onnx_path, "--target", "vulkan", "--device", "small", "-o", rvk]) == 0
    constants = [t["bytes"] for t in Artifact.read(rvk).program["tensors"] if t["kind"] == "constant"]
    assert max(constants) <= binding and len(constants) >= 4  # the weight in three parts or more, and the bias
    capsys.readouterr()
    assert main(["run", rvk, "--device", "lavapipe", "--check", "--repeat", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def test_run_vulkan_without_shader_checks_checks_against_the_reference(capsys):
    """`relax-vk run --shader-checks none` (wgpu's bounds checks dropped) gives the reference's numbers."""
    assert main(["run", "rfc-conv2d", "--backend", "vulkan", "--device", "lavapipe", "--shader-checks", "none", "--check",
                 "--repeat", "1", "--json"]) == 0  # fmt: skip
    result = json.loads(capsys.readouterr().out)
    assert result["ok"] is True and result["backend"] == "vulkan"
    assert main(["run", "rfc-conv2d", "--device", "pocl", "--shader-checks", "none", "--repeat", "1"]) == 2  # OpenCL: refused, named


def test_run_fp16_arith_keeps_named_ops_in_float32(tmp_path, capsys):
    """--fp16-arith (half texels and half arithmetic) checks at the fp16 bound and reports the
    kernels --fp32-op kept in float32."""
    pytest.importorskip("onnx")
    import onnx

    from onnx_chain import onnx_chain

    path = str(tmp_path / "chain.onnx")
    onnx.save(onnx_chain(), path)
    assert main(["run", path, "--backend", "vulkan", "--device", "lavapipe", "--fp16-arith", "--fp32-op", "squash",
                 "--check", "--json", "--repeat", "1"]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is True and 0 < out["max_abs_err"]
    assert list(out["arithmetic"]["float32"].values()) == ["fp32_ops: 'squash' names squash"]


def test_the_memory_line_states_each_kind_held_against_its_bound():
    from relax_vk.tools.cli import _memory_line

    mib = 1 << 20
    pools = {"buffer": {"without_reuse_bytes": 2 * mib, "with_reuse_bytes": mib, "lower_bound_bytes": mib},
             "texture:float32": {"without_reuse_bytes": 4 * mib, "with_reuse_bytes": 3 * mib, "lower_bound_bytes": 2 * mib}}  # fmt: skip
    memory = {"without_reuse_bytes": 6 * mib, "with_reuse_bytes": 4 * mib, "lower_bound_bytes": 3 * mib, "shared_objects": 3,
              "strategies": {"buffer": "greedy_by_size", "texture:float32": "exact"}, "pools": pools}  # fmt: skip
    line = _memory_line({"memory": memory})
    assert line.endswith("(by kind: buffer 1.00 MiB held, bound 1.00 MiB (1.00x); texture:float32 3.00 MiB held, bound 2.00 MiB (1.50x))"), line
    del pools["buffer"]  # (one kind: the totals say it all)
    assert "by kind" not in _memory_line({"memory": memory})


def test_the_check_takes_nan_where_the_reference_has_nan_and_seeds_bool_inputs_half_true():
    """``relax-vk run --check``: a NaN where the reference has one too agrees (a fully masked
    attention row is NaN on both sides), a NaN on one side is an infinite error; seeded bool inputs
    are half true (cast from a normal draw they were all true: a key padding mask masking every key,
    and the check then reported MISMATCH on right outputs)."""
    import numpy as np

    from relax_vk.tools.cli import _compare
    from relax_vk.tools.profile import seeded_inputs

    ref = np.array([1.0, np.nan, 3.0], np.float32)
    assert _compare([ref.copy()], [ref], 1e-4, 1e-4) == (True, 0.0, 0.0)
    ok, abs_err, _ = _compare([np.array([1.0, 2.0, 3.0], np.float32)], [ref], 1e-4, 1e-4)
    assert not ok and abs_err == float("inf")

    class _Session:
        program = {"inputs": [0, 1]}
        tensors = [{"shape": [2, 3], "dtype": "float32"}, {"shape": [4, 64], "dtype": "bool"}]

    x, mask = seeded_inputs(_Session())
    assert x.dtype == np.float32 and mask.dtype == bool and 0.3 < mask.mean() < 0.7
