"""NaNSelfComparisons: ``x != x`` and ``x == x`` of floats are NaN tests, not folded away."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import relax_vk  # noqa: E402
from relax_vk.frontends import from_torch  # noqa: E402
from relax_vk.runtime import load  # noqa: E402


class _NaNGuards(torch.nn.Module):
    def forward(self, x):
        return torch.where(x != x, torch.zeros_like(x), x) + 1, torch.where(torch.isfinite(x), x, torch.full_like(x, -5.0)), (x == x).float()


@pytest.mark.parametrize("api, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_nan_tests_written_as_self_comparisons_find_the_nans(api, device, request):
    """TVM's simplifier folded x != x to false (and x == x to true), as for integers: every NaN
    passed the guard, on both APIs."""
    request.getfixturevalue(device)
    x = torch.tensor([[1.0, float("nan"), 3.0, float("inf"), -2.0, float("-inf"), float("nan"), 0.0]])
    model = _NaNGuards()
    session = load(relax_vk.build(from_torch(model, (x,)), api).artifact(), device=device)
    for got, want in zip(session.run([x.numpy()]), model(x)):
        np.testing.assert_array_equal(got, want.numpy())


def test_integer_and_distinct_comparisons_are_left_alone():
    from tvm import relax as rx

    from relax_vk.passes import NaNSelfComparisons

    bb = rx.BlockBuilder()
    x, y, i = rx.Var("x", rx.TensorType((4,), "float32")), rx.Var("y", rx.TensorType((4,), "float32")), rx.Var("i", rx.TensorType((4,), "int32"))
    with bb.function("main", [x, y, i]):
        with bb.dataflow():
            out = bb.emit_output(rx.Tuple([rx.op.not_equal(x, y), rx.op.equal(i, i), rx.op.not_equal(x, x)]))
        bb.emit_func_output(out)
    text = NaNSelfComparisons()(bb.get())["main"].script()
    assert "R.not_equal(x, y)" in text and "R.equal(i, i)" in text and "R.isnan(x)" in text
