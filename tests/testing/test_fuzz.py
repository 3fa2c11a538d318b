"""The differential fuzzer: its generator, its classification, the shrunk regressions it found, and
a fixed slice of seeds (the long campaigns run with ``python -m relax_vk.testing.fuzz``)."""

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the fuzzer needs the torch extra")

from relax_vk.testing.fuzz import GraphSpec, close_enough, infer_shapes, random_graph, run_spec, shrink, to_torch  # noqa: E402
from relax_vk.testing.fuzz.campaign import campaign, summary  # noqa: E402
from relax_vk.testing.fuzz.graph import Node  # noqa: E402
from relax_vk.testing.fuzz.shrink import remove_node  # noqa: E402

REGRESSIONS = json.load(open(os.path.join(os.path.dirname(__file__), "fuzz_regressions.json")))


def test_graphs_are_seeded_valid_and_round_trip():
    for seed in range(40):
        spec = random_graph(seed)
        assert spec.dumps() == random_graph(seed).dumps()  # the same seed, the same graph
        shapes = infer_shapes(spec)
        again = GraphSpec.from_json(json.loads(spec.dumps()))
        assert infer_shapes(again) == shapes
        model, example = to_torch(spec)
        with torch.no_grad():
            out = model(example)
        outs = out if isinstance(out, tuple) else (out,)
        assert [tuple(o.shape) for o in outs] == [shapes[i] for i in spec.outputs]
    ops = {n.op for s in range(300) for n in random_graph(s).nodes}
    assert {"conv", "conv_transpose", "pool", "resize", "pad", "se", "concat", "split", "softmax_c", "act", "bn"} <= ops


def test_close_enough_catches_gross_and_nonfinite_errors():
    ref = np.linspace(-3, 3, 100).astype("float32")
    assert close_enough(ref + 1e-6, ref)
    assert not close_enough(ref + 0.1, ref)
    bad = ref.copy()
    bad[3] = np.nan
    assert not close_enough(bad, ref)
    assert not close_enough(ref[:50], ref)


def test_shrink_finds_the_culprit_node():
    spec = GraphSpec(
        (1, 4, 8, 8),
        [Node("act", [0], {"kind": "relu"}), Node("conv", [1], {"kernel": 3, "stride": 1, "dilation": 1, "padding": 1, "groups": 1, "out": 4, "bias": True}),
         Node("softmax_c", [2]), Node("act", [3], {"kind": "tanh"})],
        [4],
    )  # fmt: skip
    small = shrink(spec, lambda s: any(n.op == "softmax_c" for n in s.nodes))
    assert [n.op for n in small.nodes] == ["softmax_c"]
    assert remove_node(GraphSpec((1, 4, 8, 8), [Node("act", [0], {"kind": "relu"})], [1]), 0) is None


def test_a_broken_compiler_is_reported_as_a_miscompile(monkeypatch):
    """The comparison is real: a device result perturbed after the run is a miscompile."""
    from relax_vk.runtime.opencl import session as cl_session

    real_run = cl_session.OpenCLSession.run
    monkeypatch.setattr(cl_session.OpenCLSession, "run", lambda self, xs: [o + 0.5 for o in real_run(self, xs)])
    spec = GraphSpec((1, 4, 6, 6), [Node("act", [0], {"kind": "relu"})], [1])
    assert run_spec(spec, "torch", "opencl").status == "miscompile"


@pytest.mark.parametrize("case", REGRESSIONS, ids=[c["name"] for c in REGRESSIONS])
def test_shrunk_regressions_run_right(case):
    """Each minimal reproducer the fuzzer found (``found`` says what was wrong) now matches PyTorch."""
    outcome = run_spec(GraphSpec.from_json(case["spec"]), case["front_door"], case["backend"])
    assert outcome.status == "ok", f"{case['found']}: now {outcome.status} ({outcome.detail})"


@pytest.mark.parametrize("limits, seeds", [(None, range(1000, 1012)), ("cut", range(2000, 2008))], ids=["default-limits", "cut-limits"])
def test_a_fixed_slice_of_seeds_has_no_miscompile_or_crash(limits, seeds):
    from relax_vk.testing.fuzz.runner import CUT_LIMITS

    counts = campaign(seeds, jobs=2, timeout=600, do_shrink=False, log=None, limits=CUT_LIMITS if limits else None)
    line = summary(counts)
    assert line.startswith(f"fuzz: {len(seeds)} seeds")
    assert counts["miscompile"] == 0 and counts["crash"] == 0, line
