"""ShortenKernelNames: a long fusion chain's kernel gets a bounded, stable, distinct name (pocl
aborted on a 280-character one: it writes the kernel name as a file name)."""

import numpy as np
import pytest
import tvm
from tvm import relax, te, topi

import relax_vk
from relax_vk.analysis.reference import random_inputs, run_on_cpu
from relax_vk.passes import ShortenKernelNames
from relax_vk.passes.lower.shorten_kernel_names import FULL_NAME_ATTR, MAX_NAME, short_name
from relax_vk.runtime import load

from helpers import const, module, tensor
from helpers_build import BACKENDS


def test_short_names_are_bounded_stable_and_distinct():
    long_a, long_b = "fused_" + "_".join(f"add{i}" for i in range(60)), "fused_" + "_".join(f"add{i}" for i in range(61))
    assert short_name("relu") == "relu"
    assert len(short_name(long_a)) <= MAX_NAME and short_name(long_a) == short_name(long_a)
    assert short_name(long_a) != short_name(long_b) and short_name(long_a).startswith("fused_add0_add1")


def test_calls_follow_the_renamed_kernel_and_the_whole_name_is_kept():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4,), "float32"))
    long = "fused_" + "_".join(f"relu{i}" for i in range(30))
    with bb.function("main", [x]):
        with bb.dataflow():
            a = te.placeholder((4,), name="a")
            gv = bb.add_func(te.create_prim_func([a, topi.nn.relu(a)]), long)
            y = bb.emit(relax.call_tir(gv, (x,), out_ty=relax.TensorType((4,), "float32")))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    renamed = ShortenKernelNames()(bb.get())
    (kernel,) = [gv for gv in renamed.get_global_vars() if gv.name_hint != "main"]
    assert kernel.name_hint == short_name(long) and renamed[kernel].attrs[FULL_NAME_ATTR] == long
    relax.analysis.well_formed(renamed)
    assert ShortenKernelNames()(renamed).same_as(renamed)  # (nothing left to rename)


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_a_long_elementwise_chain_builds_and_runs(backend, device):
    x = tensor("x", (1, 8, 6, 6))

    def body(bb, x):
        y = bb.emit(relax.op.nn.conv2d(x, const((8, 8, 1, 1), 1)))
        for i in range(24):  # one fused kernel named after 48 ops
            y = bb.emit(relax.op.multiply(bb.emit(relax.op.add(y, const((1, 8, 1, 1), i + 2))), relax.const(0.9, "float32")))
        return relax.op.nn.conv2d(y, const((8, 8, 1, 1), 99))

    mod = module([x], body)
    compiled = relax_vk.build(mod, target=backend)
    names = [k["name"] for k in compiled.artifact().program["kernels"]]
    assert all(len(name) <= MAX_NAME + len("_kernel") for name in names), names
    inputs = random_inputs(mod)
    (out,) = load(compiled.artifact(), device=device).run(inputs)
    np.testing.assert_allclose(out, run_on_cpu(mod, inputs)[0], rtol=1e-4, atol=1e-5)
