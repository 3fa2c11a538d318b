"""SplitLargeWeights: no constant weight larger than one buffer binding.

Requires: a target carrying :class:`~relax_vk.core.limits.DeviceLimits` (its ``max_buffer_bytes``:
Vulkan's ``maxStorageBufferRange``, 128 MiB on lavapipe, on many phone GPUs and in a Vulkan target's
defaults; OpenCL's largest allocation). Runs in the layout stage on NCHW ops, after
``FoldSmallConstants``: what importers wrap around a weight (ONNX ``Gemm``'s ``transB`` and
PyTorch's ``Linear``: a ``permute_dims``; an ``astype``) is folded into a constant by then.

Guarantees: every ``conv2d`` (NCHW/OIHW) and ``matmul`` whose constant weight takes more bytes than
the limit (counted as the layout stage stores it: output channels padded to a multiple of 4, and
so are a plain conv's input channels and a matmul's reduction axis) is
split along its output channels / features into parts that each fit, each part computed by its
own op on the same input, and the parts concatenated along the channel / feature axis. The VGG
family's fully-connected layers (411 MB for fc6) become a few matmuls whose weights each fit. A
``take`` from a constant table over the limit (a language model's embeddings: 622 MB for Qwen3's
151,936 x 1,024 in float32) gathers from each part the indices that fall in it (the others masked
out; ``clip`` indices clipped to the table first), so every index reads the row it read before. A
table that a matmul and a take share (tied embeddings) is split once, both reading the same parts. A
weight over the limit that is a model *input* cannot be split at compile time:
:class:`~relax_vk.core.errors.LimitError` names it, its size and the limit. One computed at run
time (attention's ``K^T``) is left as it is: the scope plan may hold it in a texture, and the
export's fit check names it if it stays a buffer over the limit. Nothing else changes; results
are identical (each output element is computed by the same reduction).
"""

from __future__ import annotations

import math
from typing import List, Optional

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import GenericConst

from ...core.errors import LimitError
from ...core.scope import static_shape

LANES = 4


def _ceil4(n: int) -> int:
    return -(-n // LANES) * LANES


def _parts(out_features: int, bytes_per_feature: int, limit: int, align: int) -> Optional[List[int]]:
    """Sizes of the fewest parts (multiples of ``align`` but the last) whose weights fit."""
    per_part = (limit // max(bytes_per_feature, 1)) // align * align
    if per_part < align:
        return None
    if per_part >= out_features:
        return [out_features]
    count = math.ceil(out_features / per_part)
    size = -(-out_features // count)
    size = -(-size // align) * align
    parts = [size] * (out_features // size)
    if out_features % size:
        parts.append(out_features % size)
    return parts


@relax.expr_functor.mutator
class _Splitter(relax.PyExprMutator):
    def __init__(self, mod, limit: int, params=()):
        super().__init__(mod)
        self.limit = limit
        self.params = set(params)
        self.split_columns: dict = {}  # (weight, axis) -> [(start, size, part constant)]: one split per table, shared by its uses

    def visit_call_(self, call):
        call = super().visit_call_(call)
        if not isinstance(call.op, tvm.ir.Op):
            return call
        split = None
        if call.op.name == "relax.nn.conv2d":
            split = self._conv2d(call)
        elif call.op.name == "relax.matmul":
            split = self._matmul(call)
        elif call.op.name == "relax.take":
            split = self._take(call)
        return call if split is None else split

    def _parts_of(self, weight, axis: int, parts: List[int]) -> List[tuple]:
        """``(start, size, constant)`` of ``weight`` cut along ``axis`` into ``parts``; the first cut
        of a weight along an axis is kept, so that its other uses read the same constants."""
        key = (weight, axis)
        if key not in self.split_columns:
            array, out, start = weight.value.numpy(), [], 0
            for size in parts:
                index = [slice(None)] * array.ndim
                index[axis] = slice(start, start + size)
                out.append((start, size, relax.const(np.ascontiguousarray(array[tuple(index)]))))
                start += size
            self.split_columns[key] = out
        return self.split_columns[key]

    def _table_parts(self, weight, axis: int, per_slice: int, what: str) -> Optional[List[tuple]]:
        shape = _weight_shape(weight)
        if (weight, axis) in self.split_columns:
            return self.split_columns[(weight, axis)]
        count = shape[axis]
        if not self._too_large(weight, _ceil4(count) * per_slice, what):
            return None
        parts = _parts(count, per_slice, self.limit, LANES)
        if parts is None:
            raise LimitError(f"{what} weight {shape}: even {LANES} slices exceed the {self.limit}-byte buffer binding limit")
        return self._parts_of(weight, axis, parts)

    def _take(self, call) -> Optional[relax.Expr]:
        table, indices = call.args
        shape = _weight_shape(table)
        mode = str(call.attrs.mode)
        if shape is None or not isinstance(table, GenericConst) or mode not in ("clip", "fast"):
            return None
        axis = int(call.attrs.axis) % len(shape)
        itemsize = np.dtype(str(table.ty.dtype)).itemsize
        # (a tied table's matmul cut counts its padded reduction axis: the same cut serves both)
        per_slice = (math.prod(shape) // shape[axis]) * itemsize if len(shape) != 2 or axis != 1 else _ceil4(shape[0]) * itemsize
        parts = self._table_parts(table, axis, per_slice, "take")
        if parts is None:
            return None
        bb, idx_dtype = self.builder_, str(indices.ty.dtype)
        if mode == "clip":
            indices = bb.emit(relax.op.clip(indices, 0, shape[axis] - 1))
        idx_rank = indices.ty.ndim
        mask_shape = [1] * axis + [d for d in indices.ty.shape.values] + [1] * (len(shape) - axis - 1)
        out = None
        for start, size, part in parts:
            local = bb.emit(relax.op.subtract(indices, relax.const(start, idx_dtype)))
            inside = bb.emit(relax.op.logical_and(relax.op.greater_equal(local, relax.const(0, idx_dtype)), relax.op.less(local, relax.const(size, idx_dtype))))
            rows = bb.emit(relax.op.take(part, relax.op.clip(local, 0, size - 1), axis=axis, mode="fast"))
            if out is None:
                out = rows
                continue
            mask = bb.emit(relax.op.reshape(inside, mask_shape)) if idx_rank else inside
            out = bb.emit(relax.op.where(mask, rows, out))
        return out

    def _too_large(self, weight, nbytes: int, what: str):
        if nbytes <= self.limit:
            return False
        if isinstance(weight, GenericConst):
            return True
        if weight not in self.params:  # computed at run time: the plan and the export's fit check decide
            return False
        raise LimitError(
            f"{what} weight {weight.name} takes {nbytes} bytes, over the device's {self.limit}-byte buffer binding limit, and is a "
            "model input (only constant weights can be split at compile time)"
        )

    def _conv2d(self, call) -> Optional[relax.Expr]:
        a = call.attrs
        if str(a.data_layout) != "NCHW" or str(a.kernel_layout) != "OIHW" or (str(a.out_layout) or "NCHW") != "NCHW":
            return None
        weight = call.args[1]
        shape = _weight_shape(weight)
        if shape is None:
            return None
        o, i, kh, kw = shape
        groups = int(a.groups)
        itemsize = np.dtype(str(weight.ty.dtype)).itemsize
        per_out = (_ceil4(i) if groups == 1 else i) * kh * kw * itemsize  # a plain conv's packed weight pads its inputs
        if not self._too_large(weight, _ceil4(o) * per_out, "conv2d"):
            return None
        align = math.lcm(LANES, o // groups) if groups > 1 else LANES  # a part holds whole groups
        parts = _parts(o, per_out, self.limit, align)
        if parts is None:
            raise LimitError(
                f"conv2d weight {list(shape)} ({_ceil4(o) * per_out} bytes): even {align} output channels exceed the "
                f"{self.limit}-byte buffer binding limit"
            )
        array = weight.value.numpy()
        data = call.args[0]
        outs, start = [], 0
        for size in parts:
            part_groups = groups * size // o if groups > 1 else 1
            data_part = data
            if groups > 1:
                cin_per_group = i
                first, last = start // (o // groups) * cin_per_group, (start + size) // (o // groups) * cin_per_group
                data_part = self.builder_.emit(relax.op.strided_slice(data, axes=[1], begin=[first], end=[last]))
            w = relax.const(np.ascontiguousarray(array[start : start + size]))
            outs.append(self.builder_.emit(relax.op.nn.conv2d(data_part, w, a.strides, a.padding, a.dilation, part_groups, "NCHW", "OIHW", "NCHW", _out_dtype(a))))
            start += size
        return relax.op.concat(outs, axis=1)

    def _matmul(self, call) -> Optional[relax.Expr]:
        x, weight = call.args
        shape = _weight_shape(weight)
        if shape is None or len(shape) != 2:
            return None
        k, m = shape
        itemsize = np.dtype(str(weight.ty.dtype)).itemsize
        per_column = _ceil4(k) * itemsize  # packed as a 1x1 conv: the reduction axis is padded too
        if not self._too_large(weight, _ceil4(m) * per_column, "matmul"):
            return None
        if (weight, 1) in self.split_columns:
            parts = self.split_columns[(weight, 1)]
        else:
            sizes = _parts(m, per_column, self.limit, LANES)
            if sizes is None:
                raise LimitError(f"matmul weight [{k}, {m}]: even {LANES} columns exceed the {self.limit}-byte buffer binding limit")
            parts = self._parts_of(weight, 1, sizes)
        outs = [self.builder_.emit(relax.op.matmul(x, w, out_dtype=_out_dtype(call.attrs))) for _, _, w in parts]
        return relax.op.concat(outs, axis=-1)


def _out_dtype(attrs) -> Optional[str]:
    value = str(getattr(attrs, "out_dtype", "") or "")
    return value if value not in ("", "void", "None") else None


def SplitLargeWeights(max_buffer_bytes: int) -> tvm.transform.Pass:
    """Split convs and matmuls whose constant weights exceed ``max_buffer_bytes`` (module docstring)."""

    def transform(func: relax.Function, mod: tvm.IRModule, _ctx) -> relax.Function:
        return _Splitter(mod, max_buffer_bytes, func.params).visit_expr(func)

    return relax.transform.function_pass(transform, opt_level=0, name="relax_vk.SplitLargeWeights")


def _weight_shape(weight) -> Optional[list]:
    """A weight's static shape; None when it has none (a shape with run-time dims)."""
    if not isinstance(weight.ty, relax.TensorType) or weight.ty.shape is None:
        return None
    shape = static_shape(weight.ty.shape.values)
    return list(shape) if shape is not None else None
