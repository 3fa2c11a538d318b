"""The texture-store repair's read side: a texel an elementwise kernel or a gather reads for all
four lanes is read once, whole, before the lane loop (OpenCL and WGSL), and the numbers hold."""

import re

import numpy as np
import pytest
from tvm import relax

import relax_vk
from relax_vk.analysis.reference import random_inputs, run_on_cpu
from relax_vk.runtime import load

from helpers import const, module, tensor
from helpers_build import BACKENDS


def block():
    """A conv with elementwise ops after it (a bias texture read per texel in the write-back)."""
    x = tensor("x", (1, 8, 6, 6))

    def body(bb, x):
        y = bb.emit(relax.op.nn.conv2d(x, const((8, 8, 3, 3), 1), padding=1))
        z = bb.emit(relax.op.multiply(bb.emit(relax.op.sigmoid(y)), y))
        return relax.op.add(z, const((1, 8, 1, 1), 2))

    return module([x], body)


def _lane_loops(source: str):
    """Bodies of the repaired 4-iteration lane loops of an OpenCL source."""
    return [m.group(2) for m in re.finditer(r"\n( *)for \(int \w+_s = 0; \w+_s < 4; \+\+\w+_s\) \{(.*?)\n\1\}", source, re.S)]


def test_texel_reads_leave_the_lane_loop():
    compiled = relax_vk.build(block(), target="opencl")
    source = compiled.artifact().source
    loops = _lane_loops(source)
    assert loops, "no lane loop found: the repair's output changed shape"
    assert not any("READ_IMAGEF" in body for body in loops)
    assert "texel_in" in source


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_hoisted_reads_compute_the_same(backend, device):
    mod = block()
    compiled = relax_vk.build(mod, target=backend)
    inputs = random_inputs(mod)
    (out,) = load(compiled.artifact(), device=device).run(inputs)
    np.testing.assert_allclose(out, run_on_cpu(mod, inputs)[0], rtol=1e-5, atol=1e-5)


def test_a_read_indexed_by_a_table_stays_in_its_branch():
    # the patch merge of a Swin-like block: four gathers (each reading its texel table) and their
    # concat are one kernel, a select over the output texel picking which gather it is; hoisted,
    # every thread would read every table at an index valid only in its own branch (out of
    # bounds: a crash on pocl). Image-only reads in branches are still hoisted.
    from passes.layout.test_token_layout import window_block

    source = relax_vk.build(window_block(), target="opencl", options=relax_vk.ScopeOptions(prefer="texture")).artifact().source
    kernel = re.search(r"__kernel void fused_[^;{]*concatenate_kernel\([^;{]*\{(.*?)\n\}", source, re.S).group(1)
    hoisted = kernel[: kernel.index("for (int")]
    assert not re.search(r"READ_IMAGEF\([^;]*param_\d+_ptr\[", hoisted), hoisted
