"""InlineFloatBindings: no float-valued ``Bind`` reaches TVM's device finalisation.

TVM's ``CommonSubexprElim`` names repeated subexpressions of any type, floats included. With
run-time dims a kernel's float arithmetic is no longer constant (a bilinear resize of a run-time
size computes its scale, ``float(2W - 1) / float(4W - 1) * x``, in the kernel), and its float
bindings reach the ``StmtSimplify`` of TVM 0.27's device finalisation, whose analyzer binds every
variable through its integer-set analysis: ``IntImm supports only int or uint or bool type, but
float32 was supplied`` (an ONNX graph of two resizes at run-time dims crashed the build so). The
pass puts each float binding's value back where its variable is read (the drivers' compilers name
common subexpressions again); integer and boolean bindings, which the analyzer reads, stay.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx


def _integral(dtype) -> bool:
    dt = tvm.DataType(str(dtype))
    return dt.is_integer or dt.is_bool or dt.is_handle


def _inline_sequence(seq: tirx.stmt.SeqStmt):
    values = {}
    kept = []
    for stmt in seq.seq:
        if values:
            stmt = tvm_ffi.structural_map(stmt, [(tvm.ir.expr.Var, lambda v: values.get(v, v))])
        if isinstance(stmt, tirx.stmt.Bind) and not _integral(stmt.var.ty.dtype):
            values[stmt.var] = stmt.value
            continue
        kept.append(stmt)
    if not kept:  # (bindings nothing reads: left as they were)
        return seq
    return tirx.stmt.SeqStmt(kept) if len(kept) > 1 else kept[0]


def InlineFloatBindings() -> tvm.transform.Pass:
    """The pass (module docstring)."""

    def transform(func: tirx.PrimFunc, _mod, _ctx) -> tirx.PrimFunc:
        return func.with_body(tvm_ffi.structural_map(func.body, [(tirx.stmt.SeqStmt, _inline_sequence)]))

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="relax_vk.InlineFloatBindings")
