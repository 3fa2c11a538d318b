"""SplitWideKernels: a fused chain that reads more tensors than a Vulkan shader may bind runs as
parts of at most the budget's tensors each, right on lavapipe, with its values crossing parts, two
outputs and a run-time dim; OpenCL builds keep the one kernel."""

import numpy as np
import pytest
import tvm
from tvm import relax, tirx

import relax_vk
from relax_vk.core.dims import with_dim_ranges
from relax_vk.core.limits import VULKAN_KERNEL_TENSORS
from relax_vk.passes.lower.split_wide_kernels import SplitWideKernels, _parts
from relax_vk.runtime import load

N = 60  # weights: two fused kernels of 33 tensors or more unsplit
S = tirx.Var("S", "int64")


def _module():
    """``y = x + sum_i x * w_i`` and its partial sum after 30 terms plus ``x * w_3`` again (a value
    of the first part read by the last): two outputs, all elementwise, over ``[S, 6]``."""
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal((1, 6)).astype("float32") for _ in range(N)]
    x = relax.Var("x", relax.TensorType((S, 6), "float32"))
    bb, R = relax.BlockBuilder(), relax.op
    with bb.function("main", [x]):
        with bb.dataflow():
            acc, kept, middle = x, None, None
            for i, w in enumerate(weights):
                term = bb.emit(R.multiply(x, relax.const(w)))
                kept = term if i == 3 else kept
                acc = bb.emit(R.add(acc, term))
                middle = acc if i == 29 else middle
            out = bb.emit_output(relax.Tuple([acc, bb.emit(R.add(middle, kept))]))
        bb.emit_func_output(out)
    return with_dim_ranges(bb.get(), {"S": (1, 9)}), weights


def _expected(x, weights):
    acc = x.copy()
    for i, w in enumerate(weights):
        acc = acc + x * w
        middle = acc.copy() if i == 29 else (middle if i > 29 else None)
    return acc, middle + x * weights[3]


def test_parts_hold_the_budget_and_keep_the_order():
    a, b, c, d = (relax.Var(n, relax.TensorType((4,), "float32")) for n in "abcd")
    r = [relax.Var(f"r{i}", relax.TensorType((4,), "float32")) for i in range(4)]
    bindings = [relax.VarBinding(r[0], relax.op.add(a, b)), relax.VarBinding(r[1], relax.op.add(r[0], c)),
                relax.VarBinding(r[2], relax.op.add(r[1], d)), relax.VarBinding(r[3], relax.op.add(r[2], r[0]))]  # fmt: skip
    parts = _parts(bindings, {r[3]}, budget=4)
    # (r0 and r1 together: a, b, c in and both out, r0 read by r3: 5 > 4; then r0, c, d in and r3 out: 4)
    assert [[b.var for b in p] for p in parts] == [[r[0]], [r[1], r[2], r[3]]]
    assert _parts(bindings, {r[3]}, budget=1) == [[b] for b in bindings]  # never an empty part


@pytest.mark.parametrize("target, device", [("vulkan", "lavapipe"), ("opencl", "pocl")])
def test_a_wide_fused_chain_runs_in_parts(target, device):
    mod, weights = _module()
    compiled = relax_vk.build(mod, target)
    widest = max(len(step["args"]) for step in compiled.artifact().program["steps"] if step["op"] == "launch")
    assert widest <= VULKAN_KERNEL_TENSORS if target == "vulkan" else widest > VULKAN_KERNEL_TENSORS
    session = load(compiled.artifact(), device=device)
    for rows in (1, 5, 9):
        x = np.random.default_rng(rows).standard_normal((rows, 6)).astype("float32")
        for got, want in zip(session.run([x]), _expected(x, weights)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_each_part_names_its_own_model_ops():
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from relax_vk.frontends.onnx import from_onnx

    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(N):
        inits.append(numpy_helper.from_array(rng.standard_normal((1, 6)).astype("float32"), f"w{i}"))
        nodes += [helper.make_node("Mul", ["x", f"w{i}"], [f"m{i}"], name=f"mul{i}"), helper.make_node("Add", [prev, f"m{i}"], [f"a{i}"], name=f"add{i}")]
        prev = f"a{i}"
    graph = helper.make_graph(nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (3, 6))],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, (3, 6))], inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    program = relax_vk.build(from_onnx(model), "vulkan").artifact().program
    ops = [step["ops"] for step in program["steps"] if step["op"] == "launch"]
    # every model op in exactly one part, in order: the profile and bisect name what each part runs
    assert len(ops) >= 2 and sum(ops, []) == [n for i in range(N) for n in (f"mul{i}", f"add{i}")]


def test_narrow_groups_are_left_as_they_are():
    mod, _ = _module()
    fused = relax.transform.FuseOps()(relax.transform.AnnotateTIROpPattern()(relax.transform.LegalizeOps()(mod)))
    tvm.ir.assert_structural_equal(SplitWideKernels(budget=64)(fused), fused)
    split = SplitWideKernels()(fused)

    def grouped(m):
        return [g.name_hint for g, f in m.functions_items() if isinstance(f, relax.Function) and f.attrs is not None and "Primitive" in f.attrs]

    assert len(grouped(fused)) == 2 and len(grouped(split)) == 4 and all("_part" in name for name in grouped(split))
    relax.analysis.well_formed(split)  # (raises where it is not)
