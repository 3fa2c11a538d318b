import numpy as np
from tvm import relax

from relax_vk.passes import FoldSmallConstants

from helpers import assert_same_numbers, module, op_count, tensor


def test_folds_constant_subgraphs_and_keeps_the_rest():
    x = tensor("x", (1, 4, 2, 2))
    stats = relax.const(np.array([1.0, 2.0, 3.0, 4.0], "float32"))

    def body(bb, x):
        e = bb.emit(relax.op.expand_dims(stats, axis=[0, 2, 3]))
        s = bb.emit(relax.op.sqrt(bb.emit(relax.op.add(e, relax.const(np.float32(1e-5))))))
        return relax.op.divide(x, s)

    mod = module([x], body)
    out = FoldSmallConstants()(mod)
    assert op_count(out, "relax.expand_dims") == 0 and op_count(out, "relax.sqrt") == 0
    assert op_count(out, "relax.divide") == 1  # reads the input: not foldable
    assert_same_numbers(mod, out)
