"""Lifetimes of an artifact's program and the lower bound (relax_vk.storage.lifetimes)."""

import pytest

from relax_vk.storage.lifetimes import Lifetime, lower_bound, program_lifetimes


def _program():
    def t(i, kind, nbytes=64, image=None):
        return {"id": i, "name": f"t{i}", "shape": [nbytes // 4], "dtype": "float32", "scope": "global", "image": image,
                "kind": kind, "bytes": nbytes}  # fmt: skip

    tensors = [t(0, "input"), t(1, "constant"), t(2, "intermediate"), t(3, "workspace"), t(4, "intermediate"), t(5, "intermediate"),
               t(6, "intermediate")]  # fmt: skip
    steps = [
        {"op": "launch", "kernel": "k", "args": [0, 1, 2]},
        {"op": "launch", "kernel": "k", "args": [2, 3, 4]},
        {"op": "copy", "src": 4, "dst": 5},
        {"op": "launch", "kernel": "k", "args": [5, 2, 6]},
    ]
    return {"tensors": tensors, "steps": steps, "inputs": [0], "outputs": [6]}


def test_program_lifetimes_cover_intermediates_and_workspaces_but_not_inputs_outputs_constants():
    spans = {lt.tensor: (lt.first, lt.last) for lt in program_lifetimes(_program())}
    assert spans == {2: (0, 3), 3: (1, 1), 4: (1, 2), 5: (2, 3)}


def test_lower_bound_is_the_most_bytes_live_at_one_step():
    lts = [Lifetime(0, "a", 0, 1, 100), Lifetime(1, "b", 1, 2, 50), Lifetime(2, "c", 2, 3, 70), Lifetime(3, "d", 4, 4, 10)]
    assert lower_bound(lts) == 150  # step 1: a + b; step 2: b + c = 120
    assert lower_bound([]) == 0


def test_lifetimes_overlap_inclusively_and_pools_separate_formats():
    a, b = Lifetime(0, "a", 0, 2, 16), Lifetime(1, "b", 2, 3, 16)
    assert a.overlaps(b) and b.overlaps(a)  # step 2 reads a and writes b: both live
    assert not a.overlaps(Lifetime(2, "c", 3, 4, 16))
    assert a.pool == "buffer"
    assert Lifetime(3, "t", 0, 0, 64, (2, 2, 1), "float32").pool == "texture:float32"
    assert Lifetime(4, "h", 0, 0, 32, (2, 2, 1), "float16").pool == "texture:float16"


def test_malformed_lifetimes_are_refused():
    with pytest.raises(ValueError, match="first step"):
        Lifetime(0, "a", 3, 1, 16)
    with pytest.raises(ValueError, match="not 100 bytes"):
        Lifetime(0, "a", 0, 1, 100, (2, 2, 1), "float32")
