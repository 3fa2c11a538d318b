"""Shape variants: a model of run-time dims also built fixed to declared sizes, in one artifact. A
run at a variant's dims runs the fixed build (packed into textures, NCHW4c schedules), any other
run the generic program; both right against PyTorch on pocl and lavapipe, nothing compiled or
allocated at a run, and artifacts whose variants disagree with their program refused by name."""

import json

import numpy as np
import pytest
from tvm import relax, tirx

import relax_vk
from relax_vk.codegen.shape_variants import specialize
from relax_vk.core.dims import with_dim_ranges
from relax_vk.runtime import Session, validate
from relax_vk.serialization.artifact import Artifact, ArtifactError, variant_artifact, with_variants

torch = pytest.importorskip("torch")

H, W = tirx.Var("H", "int64"), tirx.Var("W", "int64")
RNG = np.random.default_rng(3)
W1, B1 = RNG.standard_normal((8, 4, 3, 3)).astype("float32") * 0.3, RNG.standard_normal(8).astype("float32")
W2, B2 = RNG.standard_normal((8, 8, 3, 3)).astype("float32") * 0.2, RNG.standard_normal(8).astype("float32")


def _module():
    """conv 3x3 (4 -> 8) + bias + relu, conv 3x3 stride 2 (8 -> 8) + bias, over H x W in 6..24 x 6..40."""
    x = relax.Var("x", relax.TensorType((1, 4, H, W), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, relax.const(W1), padding=1))
            y = bb.emit(relax.op.nn.relu(bb.emit(relax.op.add(y, relax.const(B1.reshape(1, -1, 1, 1))))))
            y = bb.emit(relax.op.nn.conv2d(y, relax.const(W2), strides=2, padding=1))
            out = bb.emit_output(bb.emit(relax.op.add(y, relax.const(B2.reshape(1, -1, 1, 1)))))
        bb.emit_func_output(out)
    return with_dim_ranges(bb.get(), {"H": (6, 24), "W": (6, 40)})


def _reference(x: np.ndarray) -> np.ndarray:
    y = torch.relu(torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(W1), torch.tensor(B1), padding=1))
    return torch.nn.functional.conv2d(y, torch.tensor(W2), torch.tensor(B2), stride=2, padding=1).numpy()


@pytest.fixture(scope="module")
def artifacts():
    """Per target: the generic artifact and the one with variants at 16 x 16 and 8 x 40."""
    mod = _module()
    out = {}
    for target in ("opencl", "vulkan"):
        compiled = relax_vk.build(mod, target, specialize=[{"H": 16, "W": 16}, {"H": 8, "W": 40}])
        out[target] = compiled.artifact()
    return out


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_a_run_at_a_variants_dims_runs_it_and_every_run_is_right(target, device, artifacts, request):
    request.getfixturevalue(device)
    artifact = artifacts[target]
    assert [v["dims"] for v in artifact.program["variants"]] == [{"H": 16, "W": 16}, {"H": 8, "W": 40}]
    fixed = variant_artifact(artifact, 0)
    assert not fixed.program.get("dims") and any(t.get("image") for t in fixed.program["tensors"]), "the variant is a fixed, texture build"
    session = Session(artifact, device=device)
    objects = session.device_objects
    for h, w, variant in [(16, 16, {"H": 16, "W": 16}), (9, 33, None), (8, 40, {"H": 8, "W": 40}), (6, 6, None), (16, 16, {"H": 16, "W": 16}), (24, 40, None)]:
        x = RNG.standard_normal((1, 4, h, w)).astype("float32")
        (y,) = session.run([x])
        assert session.variant == variant, (h, w)
        assert session.dim_values == {"H": h, "W": w}
        ref = _reference(x)
        assert y.shape == ref.shape
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * float(np.abs(ref).max()))
    assert session.device_objects == objects, "a run made device memory"
    generic = Session(artifact_without_variants(artifact), device=device)
    assert session.device_bytes > generic.device_bytes  # (each variant holds its own storage)


def artifact_without_variants(artifact: Artifact) -> Artifact:
    program = {k: v for k, v in artifact.program.items() if k != "variants"}
    return Artifact(program, artifact.source, {k: v for k, v in artifact.constants.items() if not k.startswith("variant")})


def test_a_size_outside_the_range_or_off_a_dim_is_refused_before_anything_is_built():
    mod = _module()
    for values, words in [({"H": 16}, "W has none"), ({"H": 16, "W": 41}, "outside its declared range 6..40"),
                          ({"H": 16, "W": 16, "C": 4}, "C is no run-time dim"), ({"H": 16.0, "W": 16}, "not an integer")]:  # fmt: skip
        with pytest.raises(ValueError, match=words):
            relax_vk.build(mod, "opencl", specialize=[values])
    with pytest.raises(ValueError, match="nothing to specialize"):
        specialize(specialize(mod, {"H": 8, "W": 8}), {"H": 8, "W": 8})


def test_a_variant_that_is_not_the_program_at_its_dims_is_refused_by_the_library(artifacts):
    generic = artifact_without_variants(artifacts["opencl"])
    fixed = variant_artifact(artifacts["opencl"], 0)  # (16 x 16)
    validate(with_variants(generic, [({"H": 16, "W": 16}, fixed)]))
    with pytest.raises(ArtifactError, match=r"variant 0: input 0 is \[1, 4, 16, 16\] float32, the program's is \[1, 4, 16, 24\]"):
        validate(with_variants(generic, [({"H": 16, "W": 24}, fixed)]))
    with pytest.raises(ValueError, match="given twice"):
        with_variants(generic, [({"H": 16, "W": 16}, fixed), ({"W": 16, "H": 16}, fixed)])
    tampered = with_variants(generic, [({"H": 16, "W": 16}, fixed)])
    tampered.program["variants"][0]["dims"]["W"] = 41
    with pytest.raises(ArtifactError, match="W = 41 is outside its range 6..40"):
        validate(tampered)


def test_the_cli_specializes_an_onnx_model_of_stepped_dims(tmp_path, pocl, capsys):
    """``relax-vk build model.onnx --dim H=4:64:4 --dim W=8:96:8 --specialize H=32,W=48``: the
    variant's stepped dims (``H_div4``) are derived from the values; right against onnxruntime at
    the variant's size and off it; a malformed ``--specialize`` is a clear error."""
    ort = pytest.importorskip("onnxruntime")
    from relax_vk.tools.cli import main

    from ..frontends.test_stepped_dims import _fpn

    model = _fpn()
    onnx_path, rvk = str(tmp_path / "fpn.onnx"), str(tmp_path / "fpn.rvk")
    with open(onnx_path, "wb") as f:
        f.write(model.SerializeToString())
    common = ["build", onnx_path, "--input-shape", "x=1,2,H,W", "--dim", "H=4:64:4", "--dim", "W=8:96:8", "-o", rvk]
    assert main([*common, "--specialize", "H=32,W=48"]) == 0
    session = Session(rvk, device="pocl")
    reference = ort.InferenceSession(model.SerializeToString())
    for h, w, variant in ((32, 48, {"H": 32, "W": 48}), (36, 16, None), (32, 48, {"H": 32, "W": 48})):
        x = RNG.standard_normal((1, 2, h, w)).astype(np.float32)
        (got,) = session.run([x])
        assert session.variant == variant
        np.testing.assert_allclose(got, reference.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)
    np.save(tmp_path / "x.npy", RNG.standard_normal((1, 2, 32, 48)).astype(np.float32))
    capsys.readouterr()
    assert main(["run", rvk, "--device", "pocl", "--inputs", str(tmp_path / "x.npy"), "--repeat", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dims"] == {"H": 32, "W": 48} and report["variant"] == {"H": 32, "W": 48}, report
    assert main([*common, "--specialize", "H=32;W=48"]) == 2
    assert main([*common, "--specialize", "H=30,W=48"]) == 2  # (off H's step 4)


def test_a_profile_of_a_variants_run_names_the_variants_kernels(artifacts, pocl):
    """``relax-vk profile`` reads the steps of the program that ran: a variant's, where one ran."""
    from relax_vk.tools.profile import profile_session

    session = Session(artifacts["opencl"], device="pocl", profile=True)
    for (h, w), index in [((16, 16), 0), ((9, 33), None)]:
        x = RNG.standard_normal((1, 4, h, w)).astype("float32")
        result = profile_session(session, [x], repeat=2)
        program = session.program if index is None else variant_artifact(artifacts["opencl"], index).program
        assert session.last_program["kernels"] == program["kernels"]
        launched = {s["kernel"] for s in program["steps"] if s["op"] == "launch"}
        assert {k["name"] for k in result.kernels} == launched, (result.kernels, launched)


def test_tvms_runtime_refuses_shape_variants_by_name(tmp_path):
    from relax_vk.tools.cli import main

    from ..frontends.test_stepped_dims import _fpn

    onnx_path = tmp_path / "fpn.onnx"
    onnx_path.write_bytes(_fpn().SerializeToString())
    args = ["build", str(onnx_path), "--input-shape", "x=1,2,H,W", "--dim", "H=4:64:4", "--dim", "W=8:96:8", "--specialize", "H=32,W=48"]
    assert main([*args, "--runtime", "tvm", "-o", str(tmp_path / "fpn.so")]) == 2
    assert not (tmp_path / "fpn.so").exists()


def test_a_quantized_matmuls_kernel_is_specialized_with_main(pocl):
    """A 4-bit MatMulNBits model over a run-time T (its matmul a kernel the import made over T
    itself): specialized at T=8 beside the generic program, right against onnxruntime at 8 and at
    sizes of the generic one (FuseTIR failed, its argument fixed and its buffer not)."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    from relax_vk.frontends.onnx import from_onnx

    rng = np.random.default_rng(0)
    packed = rng.integers(0, 256, size=(32, 2, 16), dtype=np.uint8)  # N=32, K=64 in blocks of 32: 16 bytes a block
    node = helper.make_node("MatMulNBits", ["x", "b", "scales"], ["y"], domain="com.microsoft", K=64, N=32, bits=4, block_size=32)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "T", 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "T", 32])],
                              [numpy_helper.from_array(packed, "b"), numpy_helper.from_array((rng.random(64) * 0.1).astype(np.float32), "scales")])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    mod = from_onnx(model, {"x": (1, "T", 64)}, dims={"T": (1, 16)})
    session = Session(relax_vk.build(mod, "opencl", specialize=[{"T": 8}]).artifact(), device="pocl")
    reference = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for t, variant in ((8, {"T": 8}), (5, None)):
        x = rng.standard_normal((1, t, 64)).astype(np.float32)
        want = reference.run(None, {"x": x})[0]
        np.testing.assert_allclose(session.run([x])[0], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
        assert session.variant == variant
