"""InlineFloatBindings: float bindings are written where they are read, integer ones stay (TVM
0.27's device simplifier crashes binding a float through its integer-set analysis)."""

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script import tirx as T

from relax_vk.codegen.float_bindings import InlineFloatBindings


def _binds(func):
    found = []
    tvm_ffi.structural_map(func.body, [(tirx.stmt.Bind, lambda b: found.append(str(b.var.ty.dtype)) or b)])
    return found


def test_float_bindings_are_inlined_and_integer_ones_kept():
    @T.prim_func(s_tir=True)
    def before(a: T.handle, n: T.int32):
        A = T.match_buffer(a, (4,), "float32")
        v: T.let[T.float32] = T.Cast("float32", n) * T.float32(0.5)
        k: T.let[T.int32] = n + 1
        A[0] = v + v
        A[1] = T.Cast("float32", k) * v

    after = InlineFloatBindings()(tvm.IRModule({"main": before}))["main"]
    assert sorted(_binds(before)) == ["float32", "int32"]
    assert _binds(after) == ["int32"]
    text = after.script()
    assert text.count("T.float32(0.5)") == 3 and "k: T.let[T.int32]" in text
