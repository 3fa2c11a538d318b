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
    from tvm import relax, tirx

    from relax_vk.core.dims import with_dim_ranges

    S = tirx.Var("S", "int64")
    x = relax.Var("x", relax.TensorType((S, 256), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.exp(x))
        bb.emit_func_output(y)
    artifact = relax_vk.build(with_dim_ranges(bb.get(), {"S": (1, bound)}), relax_vk.target.opencl(max_workgroups=100)).artifact()
    assert ("block_linear" in artifact.source) is folded
    session = load(artifact, device="pocl")
    for rows in (1, 37, 64):
        v = np.random.default_rng(rows).standard_normal((rows, 256)).astype(np.float32)
        np.testing.assert_allclose(session.run([v])[0], np.exp(v), rtol=1e-6)
