"""Both runtimes honour the artifact's storage assignment (relax_vk.storage): shared images,
buffer arenas bound at offsets, and the fallback for offsets a device cannot bind."""

import numpy as np
import pytest

import relax_vk
from relax_vk.core.options import ScopeOptions
from relax_vk.runtime import load
from relax_vk.serialization.artifact import Artifact
from relax_vk.storage import assign_storage

from ..helpers_build import BACKENDS


@pytest.fixture(scope="module")
def builds():
    """The zoo's SqueezeNet (fire modules: concats, tensors of many sizes) built for ``(api,
    prefer)``: texture or buffer plans, each built at its first use (a worker builds only what its
    tests run)."""
    from relax_vk.frontends import from_torch
    from relax_vk.zoo import build_zoo_model

    mod = from_torch(*(lambda m, x: (m, (x,)))(*build_zoo_model("squeezenet")))
    made = {}

    def build(api, prefer):
        if (api, prefer) not in made:
            made[(api, prefer)] = relax_vk.build(mod, api, options=ScopeOptions(prefer=prefer))
        return made[(api, prefer)]

    return build


def _run(artifact, device):
    session = load(artifact, device=device)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(session.tensors[i]["shape"]).astype("float32") for i in artifact.program["inputs"]]
    return session.run(inputs), session


@pytest.mark.one_api("api")
@pytest.mark.parametrize("prefer", ["texture", "buffer"])
@pytest.mark.parametrize("api, device", BACKENDS)
def test_shared_allocations_give_the_same_outputs_in_less_memory(builds, api, device, prefer, request, monkeypatch):
    request.getfixturevalue({"pocl": "pocl", "lavapipe": "lavapipe"}[device])
    compiled = builds(api, prefer)
    shared, alone = compiled.artifact(), compiled.artifact(reuse=False)
    assert len(shared.program["storage"]) < len(alone.program["storage"]) == len(alone.program["tensors"])
    if prefer == "buffer":  # intermediates at offsets of one arena
        assert any(t["offset"] for t in shared.program["tensors"])
    got, session = _run(shared, device)
    want, baseline = _run(alone, device)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    if api == "opencl" and prefer == "buffer":  # pocl: the arena's tensors passed to kernels by their shared-virtual-memory address
        assert session.buffer_binding == "svm"
        monkeypatch.setenv("RVK_OPENCL_SVM", "0")
        objects, as_objects = _run(shared, device)
        assert as_objects.buffer_binding == "memory objects"
        for g, w in zip(objects, want):
            np.testing.assert_array_equal(g, w)
    memory = shared.program["memory"]
    assert memory["with_reuse_bytes"] < memory["without_reuse_bytes"]
    saved = memory["without_reuse_bytes"] - memory["with_reuse_bytes"]
    assert baseline.device_bytes - session.device_bytes == saved


@pytest.mark.parametrize("api, device", BACKENDS)
def test_offsets_the_device_cannot_bind_get_buffers_of_their_own(builds, api, device, request):
    request.getfixturevalue({"pocl": "pocl", "lavapipe": "lavapipe"}[device])
    artifact = builds(api, "buffer").artifact(reuse=False)
    # the arena shifted by 16 bytes: every offset finer than the device binds (pocl: 128-byte
    # sub-buffer alignment; lavapipe: 32-byte binding offsets), none overlapping another
    program, _ = assign_storage(artifact.program)
    (arena,) = [a for a in program["storage"] if a["image"] is None and sum(t["storage"] == a["id"] for t in program["tensors"]) > 1]
    arena.update(bytes=arena["bytes"] + 16, alignment=16)
    for t in program["tensors"]:
        if t["storage"] == arena["id"]:
            t["offset"] += 16
    fine = Artifact(program, artifact.source, artifact.constants)
    relax_vk.runtime.validate(fine)
    got, session = _run(fine, device)
    want, _ = _run(artifact, device)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert session.device_bytes > sum(a["bytes"] for a in program["storage"])
