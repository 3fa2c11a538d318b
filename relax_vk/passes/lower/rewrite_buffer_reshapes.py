"""RewriteBufferReshapes: TVM's ``RewriteDataflowReshape``, limited to buffers.

TVM's pass turns every ``call_tir`` of a kernel with a reshape pattern into ``relax.reshape``,
which the VM runs as a *view* of its input's memory. A view is only a reshape of a buffer: an
image's texels are not laid out in row-major element order, so a "reshape" kernel that reads a
texture (for example an unpacking layout transform fused with the reshape after it, whose index
arithmetic collapses to identity) must stay a kernel.

Requires: a scoped, lowered module (VDevices on every tensor; ``call_tir`` with ``out_ty``).

Guarantees: a ``call_tir`` bound to a dataflow var becomes ``relax.reshape(arg, shape)`` exactly
when its kernel has a reshape pattern, it has one tensor argument, argument and result have the
same dtype and the same element count (static, or provably equal expressions of run-time dims),
and both are buffers (no VDevice, or a ``global``
one). Every other binding is unchanged. Use it in place of ``RewriteDataflowReshape``.
"""

from __future__ import annotations

import tvm
from tvm import relax


def _is_buffer(ty) -> bool:
    return ty.vdevice is None or str(ty.vdevice.memory_scope) == "global"


def _count(ty):
    """The element count, an expression (constant for a static shape), or None (no shape)."""
    if ty.shape is None or not hasattr(ty.shape, "values"):
        return None
    count = tvm.tirx.IntImm("int64", 1)
    for dim in ty.shape.values:
        count = count * dim
    return count


def _same_count(a, b) -> bool:
    """Whether two element counts are provably equal (static ones: equal)."""
    from tvm.sym import Analyzer

    return a is not None and b is not None and Analyzer().can_prove_equal(a, b)


@relax.expr_functor.mutator
class _Rewriter(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule):
        super().__init__(mod)
        self.mod = mod
        self.in_dataflow = False

    def visit_dataflow_block_(self, block):
        self.in_dataflow = True
        try:
            return super().visit_dataflow_block_(block)
        finally:
            self.in_dataflow = False

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        view = self._as_view(binding.value) if self.in_dataflow and isinstance(binding.var, relax.DataflowVar) else None
        if view is None:
            return super().visit_var_binding_(binding)
        self.set_var_remap(binding.var, self.builder_.emit(view, binding.var.name))

    def _as_view(self, call):
        if not (isinstance(call, relax.Call) and call.op == tvm.ir.Op.get("relax.call_tir")):
            return None
        kernel = self.mod[call.args[0]]
        args = call.args[1].fields if isinstance(call.args[1], relax.Tuple) else []
        if not isinstance(kernel, tvm.tirx.PrimFunc) or len(args) != 1:
            return None
        arg_ty, out_ty = args[0].ty, call.ty
        if not (isinstance(arg_ty, relax.TensorType) and isinstance(out_ty, relax.TensorType)):
            return None
        if str(arg_ty.dtype) != str(out_ty.dtype) or not (_is_buffer(arg_ty) and _is_buffer(out_ty)):
            return None
        if not _same_count(_count(arg_ty), _count(out_ty)) or not _has_reshape_pattern(kernel):
            return None
        return relax.op.reshape(self.visit_expr(args[0]), out_ty.shape)


def _has_reshape_pattern(kernel: tvm.tirx.PrimFunc) -> bool:
    """TVM's reshape-pattern analysis, False where it fails (its iterator analysis stops at some
    index arithmetic of run-time sizes: a circular pad's wrapped reads)."""
    try:
        return bool(relax.analysis.has_reshape_pattern(kernel))
    except tvm.error.InternalError:
        return False


def RewriteBufferReshapes() -> tvm.transform.Pass:
    """Reshape kernels on buffers become ``relax.reshape`` views (see module docstring)."""

    def transform(func: relax.Function, mod: tvm.IRModule, _ctx) -> relax.Function:
        return _Rewriter(mod).visit_expr(func)

    return relax.transform.function_pass(transform, opt_level=0, name="relax_vk.RewriteBufferReshapes")
