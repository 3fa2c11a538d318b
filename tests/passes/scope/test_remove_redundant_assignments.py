import tvm
from tvm.script import ir as I
from tvm.script import relax as R

from relax_vk.passes import RemoveRedundantAssignments


def test_drops_trivial_rebindings_and_keeps_copies_and_exports():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
            with R.dataflow():
                lv: R.Tensor((4,), "float32") = x
                lv1: R.Tensor((4,), "float32") = R.add(lv, lv)
                lv2: R.Tensor((4,), "float32") = lv1
                lv3: R.Tensor((4,), "float32") = R.multiply(lv2, lv)
                gv: R.Tensor((4,), "float32") = lv3
                R.output(gv)
            return gv

    @I.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
            with R.dataflow():
                lv1: R.Tensor((4,), "float32") = R.add(x, x)
                lv3: R.Tensor((4,), "float32") = R.multiply(lv1, x)
                gv: R.Tensor((4,), "float32") = lv3  # exports a dataflow var: kept
                R.output(gv)
            return gv

    tvm.ir.assert_structural_equal(RemoveRedundantAssignments()(Before), Expected)
