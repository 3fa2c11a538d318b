"""relax_vk.tools.bisect: healthy runs pass; planted faults (a wrong kernel, an fp16 overflow) are
found at the op that carries them, on OpenCL (pocl) and Vulkan (lavapipe)."""

import copy
import re

import numpy as np
import pytest

from relax_vk.tools.bisect import bisect, build_unshared, to_model_layout

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from onnx_chain import APIS, chain_model, onnx_chain  # noqa: E402


@pytest.fixture(scope="module")
def model():
    return chain_model()


@pytest.mark.parametrize("target,device", APIS)
def test_a_healthy_build_has_no_bad_op(model, target, device):
    result = bisect(model, device=device, target=target)
    assert result.first_bad is None, result.table()
    assert [r["op"] for r in result.compared] == ["first_relu", "middle_relu", "squash"]  # every kernel's last op, in model order
    assert result.to_json()["first_bad"] is None


def _perturb_stores(code: str, call: str) -> str:
    """``code`` with the value every ``call(..., VALUE)`` stores replaced by ``VALUE * 1.5 + 0.25``."""
    out, i = [], 0
    while True:
        j = code.find(call + "(", i)
        if j < 0:
            return "".join(out) + code[i:]
        depth, k, last_comma = 0, j + len(call), None
        while True:
            ch = code[k]
            depth += ch == "("
            depth -= ch == ")"
            if ch == "," and depth == 1:
                last_comma = k
            if depth == 0:
                break
            k += 1
        value = code[last_comma + 1 : k]
        scale = "(float4)(1.5f)" if call == "write_imagef" else "vec4<f32>(1.5)"
        shift = "(float4)(0.25f)" if call == "write_imagef" else "vec4<f32>(0.25)"
        out.append(code[i : last_comma + 1] + f" ({value}) * {scale} + {shift})")
        i = k + 1


def wrong_kernel(artifact, kernel_name: str):
    """A copy of ``artifact`` whose kernel ``kernel_name`` stores wrong values (test-only build)."""
    from relax_vk.serialization.artifact import Artifact

    program = copy.deepcopy(artifact.program)
    source = artifact.source
    if program["target"] == "opencl":
        start = re.search(rf"__kernel void {kernel_name}\([^;{{]*\)\s*{{", source).start()  # its definition, not a prototype
        end = source.index("\n}\n", start)
        source = source[:start] + _perturb_stores(source[start:end], "write_imagef") + source[end:]
    else:
        kernels = sorted(program["kernels"], key=lambda k: k["shader"]["offset"])
        parts = [source[k["shader"]["offset"] : k["shader"]["offset"] + k["shader"]["length"]] for k in kernels]
        source, offset = "", 0
        for k, code in zip(kernels, parts):
            if k["name"] == kernel_name:
                code = _perturb_stores(code, "textureStore")
            k["shader"] = {"offset": len(source), "length": len(code)}
            source += code
    assert source != artifact.source
    return Artifact(program, source, artifact.constants)


@pytest.mark.parametrize("target,device", APIS)
@pytest.mark.parametrize("victim", ["middle", "last"])
def test_a_kernel_made_wrong_is_named(model, target, device, victim):
    """Plant a fault in the kernel of one conv (its stores scaled and shifted): bisect names that
    op's kernel, not an earlier or a later one."""
    artifact = build_unshared(model, target)
    step = next(s for s in artifact.program["steps"] if s["op"] == "launch" and victim in s.get("ops", []))
    result = bisect(model, device=device, artifact=wrong_kernel(artifact, step["kernel"]))
    assert result.first_bad is not None, result.table()
    assert victim in result.first_bad["fused"] and result.first_bad["op"] == step["ops"][-1]
    assert result.first_bad["kernel"] == step["kernel"]
    assert result.first_bad["max_abs_err"] > result.first_bad["bound"]


@pytest.mark.parametrize("target,device", APIS)
def test_an_fp16_overflow_is_named(target, device):
    """The first conv's outputs exceed 65504 (stored as half texels: inf); the middle conv scales
    them back, so on the CPU every later value is ordinary. A build calibrates by default and keeps
    that texture float32 (nothing to find); built without calibration, bisect names the overflow."""
    from relax_vk.tools.profile import _device

    if target == "opencl":
        if not _device(target, device).fp16["half_images"]:
            pytest.skip(f"{device} has no half-float images (fp16 builds store float32 there)")
    mod = chain_model(scale=1e4)
    healthy = bisect(mod, device=device, target=target)  # fp32 textures hold it
    assert healthy.first_bad is None, healthy.table()
    first = next(r for r in healthy.compared if r["op"] == "first_relu")
    assert first["bound"] / 1e-4 > 65504  # (the bound scales with the largest value: the overflow is real)
    calibrated = bisect(mod, device=device, target=target, fp16=True)
    assert calibrated.first_bad is None, calibrated.table()
    import relax_vk
    from relax_vk.analysis.reference import random_inputs
    from relax_vk.core.options import ScopeOptions
    from relax_vk.runtime import load
    from relax_vk.tools.bisect import bisect_session

    unchecked = relax_vk.build(mod, target, options=ScopeOptions(precision="fp16"), calibration=False).artifact(reuse=False)
    result = bisect_session(load(unchecked, device=device), mod, random_inputs(mod))
    assert result.first_bad is not None and result.first_bad["op"] == "first_relu", result.table()
    # (an overflowing half store gives inf on pocl; lavapipe saturates it at 65504)
    assert result.first_bad["max_abs_err"] > result.first_bad["bound"]
    assert result.first_bad["scope"].startswith("global.texture")


def test_packed_tensors_are_read_back_in_the_model_layout():
    x = np.arange(1 * 6 * 2 * 3, dtype=np.float32).reshape(1, 6, 2, 3)
    packed = np.zeros((1, 2, 2, 3, 4), np.float32)
    for c in range(6):
        packed[:, c // 4, :, :, c % 4] = x[:, c]
    np.testing.assert_array_equal(to_model_layout(packed, x.shape), x)
    tokens = np.arange(2 * 3 * 6, dtype=np.float32).reshape(2, 3, 6)  # [B, T, C]: 6 rows of 6 channels
    packed = np.zeros((1, 2, 1, 6, 4), np.float32)
    for c in range(6):
        packed[0, c // 4, 0, :, c % 4] = tokens.reshape(6, 6)[:, c]
    np.testing.assert_array_equal(to_model_layout(packed, tokens.shape), tokens)
    assert to_model_layout(np.zeros((6,), np.float32), (2, 3)) is None  # the same elements in an unknown order: no guess


def test_cli_exit_codes(tmp_path, capsys):
    import json

    from relax_vk.tools.cli import main

    path = str(tmp_path / "chain.onnx")
    rng = np.random.default_rng(1)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="only", pads=[1, 1, 1, 1])], "one",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), "w")],
    )  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert main(["bisect", path, "--device", "pocl", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["first_bad"] is None and [r["op"] for r in out["compared"]] == ["only"]
    assert main(["bisect", str(tmp_path / "missing.onnx"), "--device", "pocl"]) == 2
    overflow = str(tmp_path / "overflow.onnx")
    onnx.save(onnx_chain(scale=1e4), overflow)
    # (the overflow is kept float32 by the build's calibration: every op matches)
    assert main(["bisect", overflow, "--device", "lavapipe", "--backend", "vulkan", "--fp16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["first_bad"] is None and "first_relu" in [r["op"] for r in out["compared"]]
    # an op past the tolerance: half texels' rounding against a tolerance of 1e-9
    assert main(["bisect", path, "--device", "pocl", "--fp16", "--rtol", "1e-9", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["first_bad"]["op"] == "only" and out["first_bad"]["max_abs_err"] > out["first_bad"]["bound"]


def test_cli_bisect_of_a_half_arithmetic_build(tmp_path, capsys):
    """--fp16-arith builds compare at the fp16 tolerance: a healthy one has no bad op; the
    planted overflow is kept in float32 by calibration, so it has none either."""
    import json

    from relax_vk.tools.cli import main

    for scale in (1.0, 1e4):
        path = str(tmp_path / f"chain{scale:g}.onnx")
        onnx.save(onnx_chain(scale=scale), path)
        assert main(["bisect", path, "--device", "lavapipe", "--backend", "vulkan", "--fp16-arith", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["first_bad"] is None and out["tolerance"] == 1e-2


def test_a_constant_reference_is_no_evidence_of_a_wrong_provenance(monkeypatch):
    """A tensor that misses its op's reference but equals another op's is that op's output (a wrong
    provenance), unless that reference is a constant: a kernel that wrote nothing leaves zeros, which
    equal every all-zero reference (a LayerNorm over one channel). Such a kernel is the bad one."""
    import relax_vk.tools.bisect as b

    ref = {"zeros": np.zeros((2, 3), np.float32), "a": np.arange(6, dtype=np.float32).reshape(2, 3),
           "b": np.arange(6, dtype=np.float32).reshape(2, 3) * 2}  # fmt: skip
    monkeypatch.setattr(b, "model_outputs", lambda mod: ["zeros", "a", "b"])
    monkeypatch.setattr(b, "reference_outputs", lambda mod, inputs, order: ref)
    monkeypatch.setattr(b, "with_states", lambda mod, inputs: list(inputs))
    monkeypatch.setattr(b, "device_outputs", lambda s: [{"op": "a", "tid": 0, "scope": "global", "kernel": "k", "fused": ["a"]}])

    class Session:
        program = {"target": "opencl", "tensors": [{"shape": [2, 3], "dtype": "float32"}], "steps": [{"op": "launch", "ops": ["a"]}]}
        device_name = "fake"
        tensors = program["tensors"]
        held = np.zeros((2, 3), np.float32)  # (what the kernel left: nothing written)

        def run(self, inputs):
            pass

        def read_tensor(self, tid):
            return self.held

    result = b.bisect_session(Session(), None, [])
    assert result.first_bad is not None and result.first_bad["op"] == "a" and "claimed_op" not in result.first_bad
    # (the ops no kernel names are listed as not compared, with the reason, not left out)
    assert {r["op"] for r in result.skipped} == {"zeros", "b"} and all("no kernel of the artifact names it" in r["why"] for r in result.skipped)
    Session.held = ref["b"]  # another op's values, not a constant: a wrong provenance, not a wrong kernel
    result = b.bisect_session(Session(), None, [])
    assert result.first_bad is None and result.compared[0]["claimed_op"] == "a" and result.compared[0]["op"] == "b"
