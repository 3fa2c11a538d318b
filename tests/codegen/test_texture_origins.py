"""Activation textures at origins of shared images (relax_vk.codegen.texture_origins with
relax_vk.storage.rectangles): a downsampling residual CNN runs right on both APIs with tensors that
are live together side by side in one image (two a kernel reads among them), in less memory than whole images took; a file whose
origins would make two live tensors overlap, or whose kernel would read a texture at an origin it
is not given, is refused at load."""

import copy

import numpy as np
import pytest
import torch

import relax_vk
from relax_vk.codegen.opencl import opencl_source
from relax_vk.core.scope import MAX_ORIGINS
from relax_vk.frontends import from_torch
from relax_vk.runtime import load
from relax_vk.serialization.artifact import Artifact, ArtifactError
from relax_vk.storage import storage_problem
from relax_vk.storage.lifetimes import program_lifetimes


class _Residual(torch.nn.Module):
    """Two stages of residual blocks, the second at half the size and twice the channels: the
    extents change from stage to stage, and each block keeps its input live across three convs
    (the middle one binds neither the block's input nor its output)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.a = torch.nn.ModuleList(torch.nn.Conv2d(8, 8, 3, padding=1) for _ in range(3))
        self.down = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.b = torch.nn.ModuleList(torch.nn.Conv2d(16, 16, 3, padding=1) for _ in range(3))
        self.head = torch.nn.Conv2d(16, 4, 1)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        x = torch.relu(x + self.a[2](torch.relu(self.a[1](torch.relu(self.a[0](x))))))
        x = torch.relu(self.down(x))
        x = torch.relu(x + self.b[2](torch.relu(self.b[1](torch.relu(self.b[0](x))))))
        return self.head(x)


@pytest.fixture(scope="module")
def model():
    net = _Residual().eval()
    x = torch.randn(1, 3, 24, 24)
    return from_torch(net, (x,)), x.numpy(), net(x).detach().numpy()


def _side_by_side(program):
    """Pairs of textures live at one step in one image (at different origins)."""
    tensors = program["tensors"]
    lts = [lt for lt in program_lifetimes(program) if lt.image]
    return [(a, b) for i, a in enumerate(lts) for b in lts[i + 1 :] if a.overlaps(b) and tensors[a.tensor]["storage"] == tensors[b.tensor]["storage"]]


def _shifted(artifact, dx=3, dy=5):
    """The artifact with every folded texture moved by (dx, dy) in an image grown by as much: the
    same plan, at origins that are not zero on either axis."""
    program = copy.deepcopy(artifact.program)
    grown = set()
    for t in program["tensors"]:
        if "origin" in t:
            t["origin"] = [t["origin"][0] + dx, t["origin"][1] + dy]
            grown.add(t["storage"])
    for k in grown:
        a = program["storage"][k]
        a["image"] = [a["image"][0] + dx, a["image"][1] + dy, a["image"][2]]
        a["bytes"] = a["image"][0] * a["image"][1] * a["image"][2] * 16
    return Artifact(program, artifact.source, dict(artifact.constants))


@pytest.mark.parametrize("api, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_a_residual_cnn_runs_right_with_its_textures_at_origins(model, api, device, request):
    request.getfixturevalue(device)
    mod, x, want = model
    artifact = relax_vk.build(mod, api).artifact()
    program = artifact.program
    assert storage_problem(program) is None
    folded = [t for t in program["tensors"] if "origin" in t]
    assert folded and all(t["image"][2] == 1 for t in folded)
    # rows side by side (core.scope.folded_width: the second stage's 12x12x4 texels are 24 x 24) and one a line
    assert {t["image"][0] // t["shape"][-2] for t in folded if t["kind"] == "intermediate"} >= {1, 2}
    # every launch passes the origin of each folded texture it binds, at most MAX_ORIGINS a kernel
    for step in (s for s in program["steps"] if s["op"] == "launch"):
        given = [sc["origin"] for sc in step.get("scalars", []) if "origin" in sc]
        assert len(given) <= MAX_ORIGINS[api]
        assert set(given) <= set(step["args"])
    assert program["memory"]["with_reuse_bytes"] < program["memory"]["without_reuse_bytes"]
    # a residual conv reads its input and the skip it adds side by side in one image (it only reads both)
    tensors = program["tensors"]
    images = [[tensors[a]["storage"] for a in s["args"] if tensors[a].get("image") and tensors[a]["kind"] == "intermediate"] for s in program["steps"]]
    assert any(len(set(used)) < len(used) for used in images)
    shifted = _shifted(artifact)
    assert storage_problem(shifted.program) is None
    got = load(artifact, device=device).run([x])[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
    np.testing.assert_array_equal(load(shifted, device=device).run([x])[0], got)  # kernels and copies honour the origins
    np.testing.assert_array_equal(load(relax_vk.build(mod, api).artifact(reuse=False), device=device).run([x])[0], got)


def test_tvm_vm_kernels_take_no_origins(model):
    """TVM's VM lays each texture out in an image of its own: its kernels are compiled unfolded."""
    mod, _, _ = model
    compiled = relax_vk.build(mod, "opencl")
    assert "_origin" in compiled.opencl_source  # the exported program's kernels
    vm_source = opencl_source(compiled.executable)
    assert "__kernel" in vm_source and "_origin" not in vm_source


def _damaged(artifact, change):
    program = copy.deepcopy(artifact.program)
    change(program)
    return Artifact(program, artifact.source, dict(artifact.constants))


def test_origins_that_overlap_or_are_not_passed_are_refused(model):
    mod, _, _ = model
    artifact = _shifted(relax_vk.build(mod, "opencl").artifact())
    program = artifact.program
    tensors = program["tensors"]
    pair = next((a, b) for a, b in ((a, b) for a in program_lifetimes(program) for b in program_lifetimes(program))
                if a.tensor < b.tensor and a.image and b.image and a.overlaps(b) and "origin" in tensors[b.tensor])  # fmt: skip

    def overlap(p):  # two live textures in one image, at one origin
        p["tensors"][b.tensor]["storage"] = p["tensors"][a.tensor]["storage"]
        p["tensors"][b.tensor]["origin"] = list(p["tensors"][a.tensor].get("origin", [0, 0]))

    a, b = pair
    with pytest.raises(ArtifactError, match="both live|does not fit"):
        relax_vk.runtime.validate(_damaged(artifact, overlap))

    def unpassed(p):
        moved = next(t for t in p["tensors"] if "origin" in t)
        for step in p["steps"]:
            for sc in step.get("scalars", []):
                if sc.get("origin") == moved["id"]:
                    del sc["origin"]
                    sc["value"] = 0

    with pytest.raises(ArtifactError, match="at an origin it does not pass"):
        relax_vk.runtime.validate(_damaged(artifact, unpassed))

    def misfolded(width, height):  # 48 rows of 12 texels: three a line, or each over three lines, is no power of two
        def change(p):
            t = next(t for t in p["tensors"] if "origin" in t and t["shape"][-2] == 12 and t["shape"][1] == 4)
            t["image"] = [width, height, 1]

        return change

    for width, height in ((36, 16), (4, 144)):
        with pytest.raises(ArtifactError, match="does not match"):
            relax_vk.runtime.validate(_damaged(artifact, misfolded(width, height)))
