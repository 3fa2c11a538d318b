"""SplitWideConcats: a concat of more tensors than a Vulkan shader may bind (an exporter's
adaptive pooling writes one of a slice per output column) becomes a concat of concats, right on
lavapipe at every run-time size; OpenCL builds keep the one concat."""

import numpy as np
import pytest
import tvm
from tvm import relax, tirx

import relax_vk
from relax_vk.core.dims import with_dim_ranges
from relax_vk.core.limits import VULKAN_KERNEL_TENSORS
from relax_vk.passes.layout.split_wide_concats import SplitWideConcats
from relax_vk.runtime import load

S = tirx.Var("S", "int64")
COLUMNS = 60


def _module(columns: int = COLUMNS):
    """The sums of ``x``'s column pairs, joined in reverse order (each sum a kernel of its own, so the
    concat reads them all)."""
    x = relax.Var("x", relax.TensorType((S, 2 * columns), "float32"))
    bb, R = relax.BlockBuilder(), relax.op
    with bb.function("main", [x]):
        with bb.dataflow():
            cols = [bb.emit(R.sum(bb.emit(R.strided_slice(x, axes=[1], begin=[2 * i], end=[2 * i + 2])), axis=[1], keepdims=True)) for i in range(columns)]
            out = bb.emit_output(bb.emit(R.concat(cols[::-1], axis=1)))
        bb.emit_func_output(out)
    return with_dim_ranges(bb.get(), {"S": (1, 9)})


def _concat_widths(mod):
    widths = []

    def visit(e):
        if isinstance(e, relax.Call) and e.op == tvm.ir.Op.get("relax.concat"):
            widths.append(len(e.args[0].fields))

    relax.analysis.post_order_visit(mod["main"], visit)
    return widths


def test_a_wide_concat_becomes_concats_of_at_most_the_budget():
    split = SplitWideConcats()(_module())
    assert sorted(_concat_widths(split)) == [3, 14, 23, 23]  # 60 = 23 + 23 + 14, then the three
    # 10 by threes: 3 + 3 + 3 + the tenth itself, four parts, again: a concat of three concats, then of it and the tenth
    assert sorted(_concat_widths(SplitWideConcats(budget=4)(_module(10)))) == [2, 3, 3, 3, 3]
    tvm.ir.assert_structural_equal(SplitWideConcats(budget=64)(_module()), _module())
    relax.analysis.well_formed(split)  # (raises where it is not)


@pytest.mark.parametrize("target, device", [("vulkan", "lavapipe"), ("opencl", "pocl")])
def test_a_wide_concat_runs(target, device):
    compiled = relax_vk.build(_module(), target)
    widest = max(len(step["args"]) for step in compiled.artifact().program["steps"] if step["op"] == "launch")
    assert widest <= VULKAN_KERNEL_TENSORS if target == "vulkan" else widest > VULKAN_KERNEL_TENSORS
    session = load(compiled.artifact(), device=device)
    for rows in (1, 4, 9):
        x = np.random.default_rng(rows).standard_normal((rows, 2 * COLUMNS)).astype("float32")
        np.testing.assert_allclose(session.run([x])[0], (x[:, 0::2] + x[:, 1::2])[:, ::-1], rtol=1e-6, atol=1e-6)
