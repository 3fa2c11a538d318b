"""Matmuls whose weight is a dequantized integer constant, as TVM's ONNX importer writes QDQ
``MatMul`` / ``Gemm`` (``matmul(x, dequantize(q))``, or ``matmul(x, permute_dims(dequantize(q)))``
for ``transB``), become one blockwise kernel over the packed codes
(:func:`~relax_vk.frontends.blockwise.blockwise_linear_call`, the kernel of ``MatMulNBits`` and
of PyTorch's quantized linears): the weight stays integers on the device and no dequantize
kernel writes a float copy of it at every run.

Taken: a 2-D integer constant quantized per tensor or per output column (the scale varies along
``N`` only; a scale along the summed axis ``K`` cannot leave the sum), float32 activations. The
matmul's binding keeps its variable, so op provenance still names the model's node. Anything else
is left as it is.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from ..core.ir_utils import rewrite_functions
from ..passes.layout.quantized_weights import dequantized_constant
from .blockwise import blockwise_linear_call


def _call(expr, name: str) -> bool:
    return isinstance(expr, relax.Call) and getattr(expr.op, "name", "") == name


@mutator
class _FuseQuantizedMatmuls(PyExprMutator):
    def visit_var_binding_(self, binding) -> None:
        fused = self._fused(binding.value) if _call(binding.value, "relax.matmul") else None
        if fused is None:
            super().visit_var_binding_(binding)
            return
        self.builder_.emit_normalized(relax.VarBinding(binding.var, self.builder_.normalize(fused)))

    def _bound(self, expr):
        return self.lookup_binding(expr) if isinstance(expr, relax.Var) else expr

    def _fused(self, call) -> Optional[relax.Expr]:
        if str(call.attrs.out_dtype) not in ("", "void", "None", "float32"):
            return None
        x, weight = call.args
        if str(getattr(x.ty, "dtype", "")) != "float32":
            return None
        value, transposed = self._bound(weight), False
        if _call(value, "relax.permute_dims"):
            axes = value.attrs.axes
            if axes is not None and [int(a) for a in axes] != [1, 0]:
                return None
            value, transposed = self._bound(value.args[0]), True
        dq = dequantized_constant(value)
        if dq is None or dq.data.ndim != 2:
            return None
        # the codes [N, K]: the dequantized tensor is [N, K] under a transpose, else [K, N]
        codes = dq.data if transposed else np.ascontiguousarray(dq.data.T)
        out_axis = 0 if transposed else 1
        per_tensor = np.asarray(dq.scale).size == 1 and np.asarray(dq.zero_point).size == 1
        if not per_tensor and dq.axis != out_axis:
            return None
        n = codes.shape[0]
        scales = dq.per_axis("scale", n).astype(np.float32)[:, None]
        zps = dq.per_axis("zero_point", n).astype(np.float64)[:, None]
        return blockwise_linear_call(self.builder_, self.visit_expr(x), codes, scales, zps, codes.shape[1])


def fuse_quantized_matmuls(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every matmul of a dequantized integer weight one blockwise kernel (module
    docstring); the unused dequantize is left for dead-code elimination."""
    return rewrite_functions(_FuseQuantizedMatmuls(mod), mod)
