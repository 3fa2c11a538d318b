"""The storage assignment recorded in an artifact's program (relax_vk.storage.program): the
planner's assignments keep the invariant, and the library refuses one that breaks it at load."""

import copy

import pytest

from relax_vk.serialization.artifact import Artifact, ArtifactError
from relax_vk.storage import allocated_bytes, allocations, assign_storage, storage_problem


def _chain(n=6, image=None):
    """input -> k0 -> t1 -> k1 -> t2 ... -> output: each launch reads one tensor, writes the next."""
    def t(i, kind):
        return {"id": i, "name": f"t{i}", "shape": [1, 1, 4, 4, 4] if image else [64], "dtype": "float32",
                "scope": "global.texture" if image else "global", "image": [4, 4, 1] if image else None, "kind": kind, "bytes": 256}  # fmt: skip

    tensors = [t(0, "input")] + [t(i, "intermediate") for i in range(1, n)]
    steps = [{"op": "launch", "kernel": "k", "args": [i, i + 1]} for i in range(n - 1)]
    program = {"format": "relax_vk.program", "target": "opencl", "model": {}, "tensors": tensors,
               "kernels": [{"name": "k", "global": [1, 1, 1], "local": [1, 1, 1]}], "steps": steps, "inputs": [0], "outputs": [n - 1]}  # fmt: skip
    return program


@pytest.mark.parametrize("image", [False, True], ids=["buffers", "textures"])
def test_a_chain_needs_two_allocations_for_its_intermediates(image):
    program, plan = assign_storage(_chain(8, image))
    assert storage_problem(program) is None
    shared = {t["storage"] for t in program["tensors"] if t["kind"] == "intermediate" and t["id"] not in program["outputs"]}
    assert len(shared) == 2  # ping-pong between two allocations
    assert plan.lower_bound_bytes == plan.with_reuse_bytes == 512
    own = [t["storage"] for t in program["tensors"] if t["kind"] == "input" or t["id"] in program["outputs"]]
    assert len(set(own)) == 2 and not set(own) & shared  # inputs and outputs never alias an intermediate
    assert program["memory"]["with_reuse_bytes"] == plan.with_reuse_bytes
    assert allocated_bytes(program) < allocated_bytes(_chain(8, image))


def _pairs():
    """Two 2048-byte tensors live together, die, then one 4096-byte tensor takes their place."""
    program = _chain(6)
    for t, nbytes in zip(program["tensors"], [256, 2048, 2048, 256, 4096, 256]):
        t.update(bytes=nbytes, shape=[nbytes // 4])
    program["steps"] = [{"op": "launch", "kernel": "k", "args": args} for args in ([0, 1, 2], [1, 2, 3], [3, 4], [4, 5])]
    return program


def test_buffers_that_together_fill_a_later_one_share_an_arena():
    program, plan = assign_storage(_pairs())
    assert plan.strategies["buffer"].startswith("arena")
    arena = {t["storage"] for t in program["tensors"][1:5]}
    assert len(arena) == 1 and program["storage"][arena.pop()]["bytes"] == 4352 == plan.lower_bound_bytes
    assert [t["offset"] for t in program["tensors"][1:5]] == [0, 2048, 4096, 0]
    assert storage_problem(program) is None


def test_a_program_without_storage_allocates_every_tensor():
    program = _chain(4)
    objects, places = allocations(program)
    assert len(objects) == 4 and places == [(i, 0) for i in range(4)]
    assert storage_problem(program) is None


@pytest.mark.parametrize(
    "corrupt, message",
    [
        (lambda p: p["tensors"][2].update(offset=p["tensors"][1]["offset"]), "both live"),
        (lambda p: p["tensors"][5].update(storage=p["tensors"][4]["storage"], offset=0), "only intermediates may"),
        (lambda p: p["tensors"][0].update(storage=p["tensors"][1]["storage"]), "only intermediates may"),
        (lambda p: p["tensors"][1].update(storage=99), "does not exist"),
        (lambda p: p["tensors"][1].update(offset=100), "aligned offset"),
        (lambda p: p["tensors"][1].update(offset=2560), "does not fit"),
        (lambda p: p["storage"][0].update(bytes=-1), "malformed"),
        (lambda p: p["storage"][0].update(bytes=0), "does not fit"),  # (empty allocations hold only empty tensors)
    ],
)
def test_unsafe_assignments_are_refused_when_an_artifact_loads(corrupt, message):
    program, _ = assign_storage(_pairs())
    bad = copy.deepcopy(program)
    corrupt(bad)
    assert message in storage_problem(bad)
    from relax_vk.runtime import validate

    artifact = Artifact(bad, "__kernel void k(void) {}")
    with pytest.raises(ArtifactError, match=r"storage assignment: .*" + message):
        validate(artifact.to_bytes())


def test_a_texture_cannot_use_a_smaller_image_or_another_format():
    program, _ = assign_storage(_chain(6, image=True))
    k = program["tensors"][1]["storage"]
    small = copy.deepcopy(program)
    small["storage"][k].update(image=[2, 4, 1], bytes=2 * 4 * 16)
    assert "does not fit" in storage_problem(small)
    half = copy.deepcopy(program)
    half["storage"][k].update(dtype="float16", bytes=4 * 4 * 8)
    assert "does not fit" in storage_problem(half)


def _residual_textures():
    """A residual block on textures: ``t1 = k(x)``, ``t2 = k(t1)``, ``t3 = k(t2)``, ``t4 = k(t3, t1)``
    (the conv that adds its skip ``t1``), ``t5 = k(t4)``, ``t6 = k(t5)``."""
    program = _chain(7, image=True)
    program["steps"] = [{"op": "launch", "kernel": "k", "args": args} for args in ([0, 1], [1, 2], [2, 3], [3, 1, 4], [4, 5], [5, 6])]
    return program


def test_tensors_a_step_only_reads_may_share_an_image_but_never_one_it_writes():
    from relax_vk.storage.lifetimes import partners_of, program_lifetimes, step_writes

    program = _residual_textures()
    assert step_writes(program)[3] == ([3, 1, 4], {4})
    partners = {lt.tensor: lt.partners for lt in program_lifetimes(program)}
    assert 1 not in partners[3] and 3 not in partners[1]  # only read together (by step 3)
    assert {1, 3} <= partners[4] and 4 in partners[1]  # what step 3 writes conflicts with what it reads
    assert partners_of([([7, 8, 9], {9})]) == {7: frozenset({9}), 8: frozenset({9}), 9: frozenset({7, 8})}
    # a plan may put the two read ones in one image; never the written one with either
    same = copy.deepcopy(assign_storage(program)[0])
    for t in same["tensors"]:
        t.pop("origin", None)
    same["tensors"][3]["storage"] = same["tensors"][1]["storage"]  # live together: in one whole image they overlap
    assert "both live" in storage_problem(same)


def test_a_texture_a_step_writes_in_the_image_of_one_it_reads_is_refused_at_load():
    """Two textures side by side in one image, one read and one written by a step: refused by
    storage_problem and by the library at load, though their rectangles never overlap."""
    program = _residual_textures()
    for t in program["tensors"][1:6]:
        t["origin"] = [0, 0]
    for step in program["steps"]:  # (every launch passes the origins of the placed textures it binds)
        step["scalars"] = [{"index": 10 + i, "dtype": "int32", "origin": tid} for i, tid in enumerate(step["args"]) if 1 <= tid <= 5]
    program, _ = assign_storage(program)
    assert storage_problem(program) is None
    bad = copy.deepcopy(program)
    wide = {"id": len(bad["storage"]), "bytes": 8 * 4 * 16, "image": [8, 4, 1], "dtype": "float32"}
    bad["storage"].append(wide)
    bad["tensors"][1].update(storage=wide["id"], origin=[0, 0])
    bad["tensors"][2].update(storage=wide["id"], origin=[4, 0])  # step 1 reads t1 and writes t2
    assert storage_problem(bad) == f"step 1 writes t2 and binds t1 in one image (allocation {wide['id']})"
    from relax_vk.runtime import validate

    with pytest.raises(ArtifactError, match=r"storage assignment: step 1 writes t2 and binds t1 in one image"):
        validate(Artifact(bad, "__kernel void k(void) {}").to_bytes())
