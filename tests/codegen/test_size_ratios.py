"""FoldSizeRatios: the quotient of two sizes that are multiples of one dim folds to its constant
(TVM 0.27's simplifier fails on it once hoisted into lets); other quotients stay."""

import tvm
from tvm.script import tirx as T

from relax_vk.codegen.size_ratios import FoldSizeRatios


def _ratio_kernel(num: int, den: int):
    @T.prim_func(private=True)
    def kernel(a: T.handle, out: T.Buffer((1,), "float32")):
        n = T.int64()
        A = T.match_buffer(a, (n,), "float32")
        out[0] = T.Cast("float32", n * num) / T.Cast("float32", n * den) + A[0]

    return kernel



def test_ratios_of_multiples_fold():
    for num, den, value in ((4, 8, 0.5), (6, 2, 3.0), (3, 3, 1.0)):
        folded = FoldSizeRatios()(tvm.IRModule({"k": _ratio_kernel(num, den)}))["k"]
        assert f"T.float32({value})" in folded.script(), (num, den, folded.script())
        assert "T.Cast" not in folded.script()


def test_other_ratios_stay():
    kept = FoldSizeRatios()(tvm.IRModule({"k": _ratio_kernel(2, 3)}))["k"]
    assert "T.Cast" in kept.script()
