"""A known miscompile, kept visible: a load whose index is a ``Select`` of two column expressions
(``sq[s, select(c % 32 < 16, c + 16, c - 16) // 32]``), in a kernel whose rows and columns are
fused over the threads, comes out of TVM 0.27's ``FlattenBuffer`` one row off
(``bx * 8 + (tx + 16) // 32 - 4`` where ``bx * 8 + (tx + 16) // 32`` is right; TVM's llvm build of
the same PrimFunc is right). Found with the decoder's RoPE (which now indexes without a select).
Strict xfail: when the lowering is fixed this test fails, and the xfail goes."""

import numpy as np
import pytest
from tvm import relax, te, tirx

import relax_vk
from relax_vk.runtime import Session


@pytest.mark.xfail(strict=True, reason="TVM 0.27 FlattenBuffer puts a select-indexed load one row off")
def test_a_select_index_loads_the_right_row(pocl):
    def pick(sq):
        def value(s, c):
            other = tirx.Select(c % 32 < 16, c + 16, c - 16)
            partner = sq[s, other // 32]
            return tirx.Select(c % 32 < 16, -partner, partner) + sq[s, c // 32]

        return te.compute((sq.shape[0], tirx.const(128, "int64")), value, name="pick")

    x = relax.Var("sq", relax.TensorType((3, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(bb.call_te(pick, x, primfunc_name_hint="pick"))
        bb.emit_func_output(y)
    v = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = Session(relax_vk.build(bb.get(), "opencl").artifact(), device="pocl").run([v])[0]
    want = np.where((np.arange(128) % 32 < 16)[None], 0.0, 2 * np.repeat(v, 32, axis=1))  # (the partner is in the same group of 32)
    np.testing.assert_array_equal(got, want)
