"""``broadcast_to`` of a run-time size that is 1 only at run time.

TVM's legalizer (TOPI's ``broadcast_to``) decides per axis at compile time whether the input is
broadcast: an axis of extent 1 reads index 0, any other reads the output's index. An input axis
that is a run-time expression equal to 1 for every allowed size but not provably so (``x[:, :1]``
of a run-time length sliced by TVM's converter: ``min(1, T)``) is read at the output's index, past
its one row: wrong numbers. Here such an axis (neither provably 1 nor provably the output's
extent) reads ``min(i, d - 1)``: index 0 where ``d`` is 1, ``i`` where it is the output's extent,
the two cases broadcasting allows (no select in the index: TVM 0.27's buffer flattening misplaces
select-indexed loads). A call whose every axis is decided is TVM's legalizer's.
"""

from __future__ import annotations

import tvm
from tvm import relax, te, tirx
from tvm.sym import Analyzer


def legalize_broadcast_to(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    x = call.args[0]
    out = list(call.ty.shape.values) if call.ty.shape is not None else None
    ins = list(x.ty.shape.values) if isinstance(x.ty, relax.TensorType) and x.ty.shape is not None else None
    upstream = tvm.ir.Op.get("relax.broadcast_to").get_attr("FLegalize")
    if out is None or ins is None:
        return upstream(bb, call)
    analyzer = Analyzer()
    offset = len(out) - len(ins)

    def undecided(d, o) -> bool:
        return not (analyzer.can_prove_equal(d, 1) or analyzer.can_prove_equal(d, o))

    if not any(undecided(d, out[a + offset]) for a, d in enumerate(ins)):
        return upstream(bb, call)

    def compute(data):
        def value(*index):
            source = []
            for a, d in enumerate(data.shape):
                i, o = index[a + offset], out[a + offset]
                if analyzer.can_prove_equal(d, 1):
                    source.append(tirx.const(0, "int64"))
                elif analyzer.can_prove_equal(d, o):
                    source.append(i)
                else:
                    source.append(tirx.min(i, tirx.Cast("int64", d) - 1))
            return data(*source)

        return te.compute(out, value, name="T_broadcast_to")

    return bb.call_te(compute, x, primfunc_name_hint="broadcast_to")
