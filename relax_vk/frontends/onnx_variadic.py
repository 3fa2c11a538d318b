"""ONNX ``Sum``, ``Mean``, ``Max`` and ``Min`` of tensors: a chain of binary ops, not a stack.

TVM's converters broadcast every input to the common shape, stack them on a new leading axis and
reduce over it: a residual ``Sum`` of two ``[1, 256, 56, 56]`` maps becomes a ``[2, 1, 256, 56,
56]`` tensor and a reduction. No layout is packed across that 5-D stack, so every tensor the sum
touches stays an NCHW buffer: ResNet-50 as the ONNX model zoo ships it (opset 9, a ``Sum`` at
each residual) kept 42% of its activation bytes in textures, against 100% for the same network
with ``Add`` (the zoo's ResNet-18).

Here the inputs are folded pairwise with the broadcasting binary op (``add``, ``maximum``,
``minimum``; ``Mean`` divides the sum by the count): ONNX defines the four as elementwise with
multidirectional broadcasting, so the fold is the same function, summed in the same order as the
stack's reduction. Inputs that are all constants stay with TVM's converter (it folds them).
"""

from __future__ import annotations

import functools


def _variadic(binary: str, mean: bool = False):
    def convert(bb, inputs, attrs):
        from tvm import relax
        from tvm.ir import GenericConst

        if not inputs or all(isinstance(x, GenericConst) for x in inputs):
            return None
        op = getattr(relax.op, binary)
        total = functools.reduce(lambda a, b: bb.normalize(op(a, b)), inputs)
        if mean and len(inputs) > 1:
            total = relax.op.divide(total, relax.const(len(inputs), inputs[0].ty.dtype))
        return total

    return convert


#: op type -> converter (None from a converter: TVM's converter handles the node)
VARIADIC = {"Sum": _variadic("add"), "Mean": _variadic("add", mean=True), "Max": _variadic("maximum"), "Min": _variadic("minimum")}
