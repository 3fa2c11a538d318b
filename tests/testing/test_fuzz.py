"""The differential fuzzer: its generator, its classification, the shrunk regressions it found, and
a fixed slice of seeds (the long campaigns run with ``python -m relax_vk.testing.fuzz``)."""

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the fuzzer needs the torch extra")

from relax_vk.testing.fuzz import GraphSpec, close_enough, infer_shapes, random_graph, run_spec, shrink, to_torch  # noqa: E402
from relax_vk.testing.fuzz.campaign import MIN_OK_SHARE, MIN_OK_SHARE_CUT, MIN_OK_SHARE_DIMS, campaign, ok_share, summary  # noqa: E402
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
    from relax_vk.runtime.session import Session

    real_run = Session.run
    monkeypatch.setattr(Session, "run", lambda self, xs: [o + 0.5 for o in real_run(self, xs)])
    spec = GraphSpec((1, 4, 6, 6), [Node("act", [0], {"kind": "relu"})], [1])
    assert run_spec(spec, "torch", "opencl").status == "miscompile"


RELU = GraphSpec((1, 4, 6, 6), [Node("act", [0], {"kind": "relu"})], [1])


def test_a_crash_in_a_relax_vk_converter_called_by_tvms_importer_is_a_crash(monkeypatch):
    """relax_vk's reflect-pad converter runs inside TVM's PyTorch importer, and the front door words
    any failure there as TVM's; the traceback says the converter failed (here: TVM's pad op refuses
    the widths it is given), so it is relax_vk's crash, not 'frontend'."""
    from tvm import relax

    real_pad = relax.op.nn.pad
    monkeypatch.setattr(relax.op.nn, "pad", lambda data, width, *a, **kw: real_pad(data, list(width)[:-1], *a, **kw))
    spec = GraphSpec((1, 4, 6, 6), [Node("pad", [0], {"mode": "reflect", "pads": [1, 1, 1, 1], "value": 0.0})], [1])
    outcome = run_spec(spec, "torch", "opencl")
    assert (outcome.status, outcome.stage, outcome.origin) == ("crash", "import", "relax_vk"), outcome.to_json()
    assert "TVM's PyTorch frontend" in outcome.detail  # what the front door says; the class does not believe it


def test_a_crash_in_a_relax_vk_fix_up_pass_of_the_onnx_front_door_is_a_crash(monkeypatch):
    from relax_vk.frontends import raise_prebuilt_binary

    def broken(call, mod):
        raise AssertionError

    monkeypatch.setattr(raise_prebuilt_binary, "_raised", broken)
    outcome = run_spec(RELU, "onnx", "opencl")
    assert (outcome.status, outcome.stage, outcome.origin) == ("crash", "import", "relax_vk"), outcome.to_json()


@pytest.mark.parametrize("front_door", ["onnx", "torch"])
def test_tvms_importer_refusing_a_model_is_frontend(front_door, monkeypatch):
    """TVM's importer converts the ReLU with its conv converter, which fails inside TVM's own code."""
    if front_door == "onnx":
        from tvm.relax.frontend.onnx import onnx_frontend

        real = onnx_frontend._get_convert_map
        monkeypatch.setattr(onnx_frontend, "_get_convert_map", lambda: {**real(), "Relu": real()["Conv"]})
    else:
        from tvm.relax.frontend.torch.exported_program_translator import ExportedProgramImporter

        real = ExportedProgramImporter.create_convert_map

        def broken(self):
            table = real(self)
            return {**table, "relu.default": table["conv2d.default"]}

        monkeypatch.setattr(ExportedProgramImporter, "create_convert_map", broken)
    outcome = run_spec(RELU, front_door, "opencl")
    assert (outcome.status, outcome.stage, outcome.origin) == ("frontend", "import", "tvm-importer"), outcome.to_json()


def test_the_exporter_refusing_a_model_is_frontend():
    outcome = run_spec(RELU, "onnx", "opencl", opset=99)
    assert (outcome.status, outcome.origin) == ("frontend", "torch"), outcome.to_json()
    assert set(outcome.to_json()) >= {"status", "front_door", "backend", "stage", "detail", "max_err", "origin"}


def test_blame_follows_the_chain_to_where_it_was_raised():
    from relax_vk.core.errors import UnsupportedError
    from relax_vk.core.limits import preset
    from relax_vk.testing.fuzz.blame import blame, owner_of

    with pytest.raises(UnsupportedError) as refused:  # relax_vk turns its own KeyError into a clear refusal
        preset("nokia")
    assert blame(refused.value) == ("clear-error", "relax_vk")
    with pytest.raises(ZeroDivisionError) as bug:
        1 / 0
    assert blame(bug.value) == ("crash", "unknown")  # nobody's: not excused as anyone else's
    import tvm
    import tvm.relax.frontend.onnx  # (imported here: alone, this test may run before anything imports it)

    assert owner_of(tvm.relax.frontend.onnx.__file__) == "tvm-importer" and owner_of(tvm.relax.op.__file__) is None
    assert owner_of(random_graph.__code__.co_filename) == "harness" and owner_of(preset.__code__.co_filename) == "relax_vk"


def test_a_model_tvms_own_build_also_gets_wrong_is_reference_disagrees(monkeypatch):
    """The imported module computes a tanh where PyTorch's model has a ReLU (an importer bug): the
    device matches TVM's llvm build of that module, so the fault is the import's."""
    from relax_vk.testing.fuzz import runner

    real_import = runner.import_model

    def wrong_import(spec, front_door, opset=17, dims=None):
        tanh = GraphSpec(spec.input_shape, [Node("act", [0], {"kind": "tanh"})], [1])
        return (real_import(tanh, front_door, opset, dims)[0], *real_import(spec, front_door, opset, dims)[1:])

    monkeypatch.setattr(runner, "import_model", wrong_import)
    outcome = run_spec(RELU, "torch", "opencl")
    assert outcome.status == "reference-disagrees", outcome.to_json()


@pytest.mark.parametrize("case", REGRESSIONS, ids=[c["name"] for c in REGRESSIONS])
def test_shrunk_regressions_run_right(case):
    """Each minimal reproducer the fuzzer found (``found`` says what was wrong) now matches PyTorch
    (at several sizes from one artifact for the run-time-dims cases)."""
    outcome = run_spec(GraphSpec.from_json(case["spec"]), case["front_door"], case["backend"], run_time_dims=case.get("run_time_dims", False))
    assert outcome.status == "ok", f"{case['found']}: now {outcome.status} ({outcome.detail})"


# (two slices run in the suite's process, which has TVM and PyTorch imported: a worker process
# imports both again, 8-10 s of a cold machine each; the cut-limits slice keeps two workers, for
# the campaign's several-worker path)
@pytest.mark.parametrize("limits, seeds, jobs", [(None, range(1000, 1005), 0), ("cut", range(2000, 2005), 2), ("dims", range(500000, 500002), 0)],
                         ids=["default-limits", "cut-limits", "run-time-dims"])  # fmt: skip
def test_a_fixed_slice_of_seeds_has_no_miscompile_or_crash(limits, seeds, jobs):
    from relax_vk.testing.fuzz.runner import CUT_LIMITS

    counts = campaign(seeds, jobs=jobs, timeout=600, do_shrink=False, log=None, limits=CUT_LIMITS if limits == "cut" else None,
                      run_time_dims=limits == "dims")  # fmt: skip
    line = summary(counts)
    assert line.startswith(f"fuzz: {len(seeds)} seeds")
    assert counts["miscompile"] == 0 and counts["crash"] == 0, line
    assert ok_share(counts) >= {None: MIN_OK_SHARE, "cut": MIN_OK_SHARE_CUT, "dims": MIN_OK_SHARE_DIMS}[limits], line  # refusing everything is no pass


def test_a_kernel_tvm_cannot_compact_at_run_time_sizes_is_refused_by_name():
    """Seed 891000 (cut limits, run-time dims), shrunk: a transposed conv, then a channels-last
    LayerNorm whose reshapes and GELU the safe schedule gets. TVM's buffer compaction cannot bound
    their intermediates' regions at run-time sizes and failed inside TVM's lowering (an
    InternalError: a crash); the safe schedule now checks it and the build refuses the kernel by
    name. (A schedule that fits such kernels would turn this into an ok.)"""
    from relax_vk.testing.fuzz.runner import CUT_LIMITS

    spec = GraphSpec((2, 3, 12, 5), [
        Node("conv_transpose", [0], {"bias": True, "dilation": 1, "groups": 1, "kernel": 4, "out": 16, "output_padding": 1, "padding": 0, "stride": 2}),
        Node("ln_nhwc", [1], {"hidden": 4})], [2])  # fmt: skip
    outcome = run_spec(spec, "torch", "opencl", limits=CUT_LIMITS, run_time_dims=True)
    assert outcome.status == "clear-error", outcome.to_json()
    assert "buffer compaction" in outcome.detail and "kernel fused_" in outcome.detail
