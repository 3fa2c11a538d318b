"""Artifacts are checked completely before anything runs, by the native library (the one
validator: every load, and relax_vk.runtime.validate without a device): a program whose checksums
are fine but whose content is not executable is refused, naming what is wrong."""

import copy

import pytest

import relax_vk
from relax_vk.models import build_example
from relax_vk.serialization.artifact import Artifact, ArtifactError


@pytest.fixture(scope="module")
def artifact():
    return relax_vk.build(build_example("conv-relu-pool")).artifact()


def _damaged(artifact, change):
    program = copy.deepcopy(artifact.program)
    change(program)
    return Artifact(program, artifact.source, dict(artifact.constants))


def _first_launch(program):
    return next(s for s in program["steps"] if s["op"] == "launch")


CASES = {
    "a step names a tensor that does not exist": (lambda p: _first_launch(p)["args"].append(999), r"names tensor 999, which does not exist"),
    "a step launches a missing kernel": (lambda p: _first_launch(p).update(kernel="nope"), r"launches kernel 'nope', which the program does not have"),
    "a kernel is not in the source": (lambda p: p["kernels"][0].update(name="ghost_kernel"), r"kernel ghost_kernel is not in the OpenCL source"),
    "a shape and its bytes disagree": (lambda p: p["tensors"][1].update(bytes=3), r"tensor 1 \(.*\): 3 bytes for shape"),
    "an image does not match its scope": (lambda p: next(t for t in p["tensors"] if t["image"]).update(image=[1, 1, 1]), r"image \[1, 1, 1\] does not match"),
    "an unknown dtype": (lambda p: p["tensors"][0].update(dtype="float33"), r"unknown dtype 'float33'"),
    "launch geometry": (lambda p: p["kernels"][0].update(local=[3, 1, 1], **{"global": [10, 1, 1]}), r"global size \[10, 1, 1\] is not a multiple"),
    "outputs that do not exist": (lambda p: p.update(outputs=[-1]), r"outputs names tensor -1"),
    "no outputs": (lambda p: p.update(outputs=[]), r"no outputs"),
    "a texture of no elements": (lambda p: next(t for t in p["tensors"] if t["image"]).update(shape=[1, 0, 4, 4, 4], bytes=0), r"a texture of shape \[1, 0, 4, 4, 4\]"),
    "a copy between sizes": (lambda p: p["steps"].append({"op": "copy", "src": 0, "dst": len(p["tensors"]) - 1}), r"copy step \d+: .* bytes\) -> "),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_damaged_programs_are_refused_at_load(artifact, case, tmp_path):
    change, message = CASES[case]
    damaged = _damaged(artifact, change)
    path = str(tmp_path / "bad.rvk")
    damaged.write(path)  # valid checksums: only the content is wrong
    from relax_vk.runtime import load, validate

    with pytest.raises(ArtifactError, match=message):
        validate(path)
    with pytest.raises(ArtifactError, match=message):
        load(damaged, device="pocl")


def test_missing_constant_data_is_named():
    artifact = relax_vk.build(build_example("residual")).artifact()
    constants = dict(artifact.constants)
    name = sorted(constants)[0]
    del constants[name]
    with pytest.raises(ArtifactError, match=rf"constant tensor {name[1:]} \(.*\) has no data"):
        __import__("relax_vk.runtime").runtime.validate(Artifact(artifact.program, artifact.source, constants))


def test_a_valid_artifact_round_trips(artifact, tmp_path):
    path = str(tmp_path / "ok.rvk")
    artifact.write(path)
    assert Artifact.read(path).program["steps"] == artifact.program["steps"]
    __import__("relax_vk.runtime").runtime.validate(path)  # (no error)


def test_a_buffer_bound_to_an_image_parameter_is_refused_before_it_reaches_the_driver(artifact):
    """pocl crashed the process inside clEnqueueNDRangeKernel on such a (CRC-valid) artifact."""
    def rewire(p):
        tensors = p["tensors"]
        step = next(s for s in p["steps"] if s["op"] == "launch" and any(tensors[a]["image"] for a in s["args"]))
        i = next(i for i, a in enumerate(step["args"]) if tensors[a]["image"])
        for sc in step.get("scalars", []):  # (its origin argument, if any, an integer like any other)
            if sc.get("origin") == step["args"][i]:
                del sc["origin"]
                sc["value"] = 0
        step["args"][i] = next(t["id"] for t in tensors if not t["image"])

    with pytest.raises(ArtifactError, match=r"as parameter \d+: a buffer for an image parameter"):
        __import__("relax_vk.runtime").runtime.validate(_damaged(artifact, rewire))
