"""FoldLaunchGrid: no grid axis over the target's workgroup limit, on both APIs, with the right numbers."""

import numpy as np
import pytest
from helpers_build import BACKENDS

import relax_vk
from relax_vk.runtime import load

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_grids_fold_to_a_cut_down_limit(backend, device):
    from relax_vk.frontends import from_torch

    model = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.AvgPool2d(2), torch.nn.Conv2d(16, 8, 1)).eval()
    x = torch.randn(1, 8, 40, 36)
    make = relax_vk.target.opencl if backend == "opencl" else relax_vk.target.vulkan
    artifact = relax_vk.build(from_torch(model, (x,)), make(max_workgroups=8)).artifact()
    groups = [g // loc for k in artifact.program["kernels"] for g, loc in zip(k["global"], k["local"])]
    assert max(groups) <= 8
    unfolded = relax_vk.build(from_torch(model, (x,)), make()).artifact()
    assert max(g // loc for k in unfolded.program["kernels"] for g, loc in zip(k["global"], k["local"])) > 8  # it had to fold
    out = load(artifact, device=device).run([x.numpy()])[0]
    with torch.no_grad():
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bound, folded", [(64, False), (4096, True)])
def test_a_run_time_grid_folds_only_when_its_dims_range_can_pass_the_limit(bound, folded, pocl):
    """The kernel's grid is ``S`` workgroups of 256 rows (``S*256/256``): within a limit of 100
    for S up to 64, past it for S up to 4096; a grid left unfolded has no index arithmetic of the
    fold (``block_linear``) in its threads' indices, and both are right at every size."""
    from helpers import exp_rows_module

    artifact = relax_vk.build(exp_rows_module(bound), relax_vk.target.opencl(max_workgroups=100)).artifact()
    assert ("block_linear" in artifact.source) is folded
    session = load(artifact, device="pocl")
    for rows in (1, 37, 64):
        v = np.random.default_rng(rows).standard_normal((rows, 256)).astype(np.float32)
        np.testing.assert_allclose(session.run([v])[0], np.exp(v), rtol=1e-6)


_LN_NHWC = {"seed": 530018, "input_shape": [1, 4, 16, 21], "outputs": [3], "nodes": [
    {"op": "conv", "inputs": [0], "params": {"bias": False, "dilation": 2, "groups": 1, "kernel": 3, "out": 1, "padding": 0, "stride": 1}},
    {"op": "pool", "inputs": [1], "params": {"ceil": False, "count_include_pad": True, "kernel": 3, "kind": "max", "padding": 1, "stride": 2}},
    {"op": "ln_nhwc", "inputs": [2], "params": {"hidden": 24}}]}  # fmt: skip


def _ln_nhwc_session(bound: int):
    """The fuzzer's seed 530018, shrunk (conv, pool, a channels-last LayerNorm + MLP from ONNX
    opset 11), with H and W run-time dims up to ``bound``; the MLP 24 wide (the seed's was 6), so
    that its second product's sum is long enough for TVM's cross-thread reduction rule (shorter
    sums at a run-time size get a thread an output)."""
    torch = pytest.importorskip("torch")
    from relax_vk.testing.fuzz import GraphSpec
    from relax_vk.testing.fuzz.runner import import_model

    mod, model, _ = import_model(GraphSpec.from_json(_LN_NHWC), "onnx", 11, {"H": (16, bound), "W": (21, bound)})
    artifact = relax_vk.build(mod, "opencl").artifact()
    return artifact, load(artifact, device="pocl"), model, torch


def test_a_grid_size_named_by_a_common_subexpression_is_bounded_by_its_dims(pocl):
    """TVM's common-subexpression pass names a grid's size (``cse_v5 = ((H - 5) // 2 + 1) * ((W - 5)
    // 2 + 1)``) before the fold runs; the fold read the name as unbounded and folded a grid of at
    most 285 workgroups, and the folded cross-thread reduction of the LayerNorm's MLP was wrong on
    pocl (1.8 off PyTorch: the fuzzer's run-time-dims mode). The bindings are read now: no fold."""
    artifact, session, model, torch = _ln_nhwc_session(40)
    assert "block_linear" not in artifact.source
    for size in ((16, 21), (40, 33)):
        x = torch.randn(1, 4, *size)
        np.testing.assert_allclose(session.run([x.numpy()])[0], model(x).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_the_same_model_with_dims_up_to_1200_is_right(pocl):
    """Up to 1,200 the grid is folded: a workgroup past its end used to skip its whole body, barriers
    included, and pocl then ran no workgroup's cross-thread reduction (the LayerNorm's matmul came
    out as the zeros its output held). Now it runs its barriers and skips everything else."""
    artifact, session, model, torch = _ln_nhwc_session(1200)
    assert "block_linear" in artifact.source
    x = torch.randn(1, 4, 16, 21)
    np.testing.assert_allclose(session.run([x.numpy()])[0], model(x).detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_a_two_axis_grid_of_run_time_size_folds_with_extents_named_inside_the_launch(backend, device, request):
    """A stride-2 conv of run-time H and W (relax_vk's run-time conv schedule: output rows on
    blockIdx.y, columns on blockIdx.x) under a limit of 8 workgroups an axis: TVM's
    common-subexpression pass names the rows' count (``(H - 1) // 2 + 1``) inside the columns'
    launch, and the fold, which hoists every extent above the launch, used that name before its
    definition (the build failed). It substitutes the name's value now: folded, and right at every
    size."""
    from helpers import run_time_conv_module

    request.getfixturevalue(device)
    weight = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype("float32")
    mod = run_time_conv_module(weight, {"H": (4, 40), "W": (4, 40)}, stride=2)
    make = relax_vk.target.opencl if backend == "opencl" else relax_vk.target.vulkan
    artifact = relax_vk.build(mod, make(max_workgroups=8)).artifact()
    assert [k.get("schedule") for k in artifact.program["kernels"]] == ["run_time_conv"]
    if backend == "opencl":
        assert "block_linear" in artifact.source  # (it had to fold)
    session = load(artifact, device=device)
    for h, w in ((4, 4), (21, 9), (40, 40)):
        v = np.random.default_rng(h * w).standard_normal((1, 3, h, w)).astype("float32")
        want = torch.nn.functional.conv2d(torch.tensor(v), torch.tensor(weight), stride=2, padding=1).numpy()
        np.testing.assert_allclose(session.run([v])[0], want, rtol=1e-5, atol=1e-5)
