"""BoolArithmetic: products, sums, minima and maxima of bool tensors are logic ops."""

import numpy as np
import pytest
from tvm import relax as rx

torch = pytest.importorskip("torch")

import relax_vk  # noqa: E402
from relax_vk.analysis.reference import run_on_cpu  # noqa: E402
from relax_vk.core.options import ScopeOptions  # noqa: E402
from relax_vk.frontends import from_torch  # noqa: E402
from relax_vk.passes import BoolArithmetic  # noqa: E402
from relax_vk.runtime import load  # noqa: E402


class _Masks(torch.nn.Module):
    def forward(self, x):
        a, b = x > 0, x.abs() < 1
        return torch.where(torch.isfinite(x), x, torch.zeros_like(x)) * 2, (a * b).float(), (a + b).float(), torch.maximum(a, b).float()


def test_isfinite_runs_on_the_cpu_reference_and_under_fp16_calibration(lavapipe):
    """isfinite decomposes to ``(x == x) * (|x| != inf)``: TVM's llvm build refused the product of
    bools, so the CPU reference, and with it an fp16 build's calibration, stopped."""
    x = torch.tensor([[1.0, float("nan"), 0.5, float("inf"), -2.0, float("-inf"), -0.25, 0.0]])
    model = _Masks()
    want = [w.numpy() for w in model(x)]
    mod = from_torch(model, (x,))
    for got, w in zip(run_on_cpu(mod, [x.numpy()]), want):
        np.testing.assert_array_equal(got, w)
    artifact = relax_vk.build(mod, "vulkan", options=ScopeOptions(precision="fp16")).artifact()
    for got, w in zip(load(artifact, device="lavapipe").run([x.numpy()]), want):
        np.testing.assert_array_equal(got, w)


def test_only_bool_operands_become_logic():
    bb = rx.BlockBuilder()
    a, b, f = rx.Var("a", rx.TensorType((4,), "bool")), rx.Var("b", rx.TensorType((4,), "bool")), rx.Var("f", rx.TensorType((4,), "float32"))
    with bb.function("main", [a, b, f]):
        with bb.dataflow():
            out = bb.emit_output(rx.Tuple([rx.op.multiply(a, b), rx.op.add(a, b), rx.op.minimum(a, b), rx.op.multiply(f, f)]))
        bb.emit_func_output(out)
    text = BoolArithmetic()(bb.get())["main"].script()
    assert text.count("R.logical_and") == 2 and text.count("R.logical_or") == 1 and text.count("R.multiply") == 1
