"""FoldSmallConstants: evaluate cheap ops on constants with numpy, before packing.

Requires: nothing. Guarantees: every dataflow binding whose value is one of the ops below with
only tensor-constant (and attribute) arguments, an ``arange`` with constant bounds, a ``full``
or ``broadcast_to`` of a constant to a static shape of at most ``MAX_CREATED`` elements, or a
``shape_to_tensor`` of a static shape, is replaced by the constant it computes, and so is a ``take``
at constant indices of a ``shape_to_tensor`` whose shape is static at the entries taken (a channel
count beside run-time H and W); nothing else changes. This is what ``DecomposeOpsForInference`` leaves around batch norms
(``expand_dims`` of the statistics, ``sqrt(var + eps)``), what packing a constant weight needs,
and constant index arithmetic (``torch.roll``'s ``arange``, add, mod; ONNX's ``Shape`` of a tensor
of static shape, ``Gather`` from it and the negative-index ``where``: int64 tensors that Vulkan
shaders could not even hold), at numpy speed; and constant masks (a causal mask from ``arange``, ``full``, comparisons and
``logical_and``, which the token layout then packs); strided slices of constants; ``nonzero`` of a constant (ONNX ``Compress`` by a constant condition), whose ``match_cast`` to a symbolic count then binds the count, so the shapes after it are static and fold further. A call whose result has no elements is
the empty constant whatever its arguments (:func:`empty_result`), and ``concat`` drops empty
inputs, and a ``split`` with empty parts becomes slices and empty constants: no kernel ever has a
zero extent. Constant int64 indices of ``take``, ``gather_elements`` and the scatters whose values fit
are narrowed to int32 (WGSL has no 64-bit integers; the result is the same). TVM's ``FoldConstant`` would compile an llvm kernel per folded call (tens of
milliseconds each, so tens of seconds on a mid-sized network).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional

import numpy as np
import tvm
from tvm import relax, tirx
from tvm.ir.expr import GenericConst

from .quantized_weights import dequantized_constant


#: the most elements a ``full`` or ``broadcast_to`` of a constant is folded into (a causal mask of
#: 1024 tokens; larger ones stay computed)
MAX_CREATED = 1 << 20


def _static(values) -> bool:
    return all(isinstance(v, tirx.IntImm) for v in values)


def _imm(arg):
    """The immediate an argument holds (bare, or in a prim value), else None."""
    imms = (tirx.IntImm, tirx.FloatImm)
    return arg if isinstance(arg, imms) else getattr(arg, "value", None)


def _ints(values) -> List[int]:
    return [int(getattr(v, "value", v)) for v in values]


def _binary(fn):
    return lambda call, a: fn(a[0], a[1])


def _unary(fn):
    return lambda call, a: fn(a[0])


FOLDERS: Dict[str, Callable[[relax.Call, List[np.ndarray]], np.ndarray]] = {
    "relax.add": _binary(np.add),
    "relax.subtract": _binary(np.subtract),
    "relax.multiply": _binary(np.multiply),
    "relax.divide": _binary(np.divide),
    "relax.maximum": _binary(np.maximum),
    "relax.minimum": _binary(np.minimum),
    "relax.power": _binary(np.power),
    "relax.sqrt": _unary(np.sqrt),
    "relax.rsqrt": _unary(lambda x: 1.0 / np.sqrt(x)),
    "relax.negative": _unary(np.negative),
    "relax.abs": _unary(np.abs),
    "relax.exp": _unary(np.exp),
    "relax.expand_dims": lambda call, a: np.expand_dims(a[0], tuple(_ints(call.attrs.axis))),
    "relax.squeeze": lambda call, a: np.squeeze(a[0], None if call.attrs.axis is None else tuple(_ints(call.attrs.axis))),
    "relax.permute_dims": lambda call, a: np.transpose(a[0], None if call.attrs.axes is None else _ints(call.attrs.axes)),
    "relax.astype": lambda call, a: a[0].astype(str(call.attrs.dtype)),
    # what ONNX importers wrap around constant bounds (Clip's min/max: where(isnan(c), -inf, c))
    "relax.isnan": _unary(np.isnan),
    "relax.isinf": _unary(np.isinf),
    "relax.isfinite": _unary(np.isfinite),
    "relax.logical_not": _unary(np.logical_not),
    "relax.where": lambda call, a: np.where(a[0], a[1], a[2]),
    "relax.less": _binary(np.less),
    "relax.less_equal": _binary(np.less_equal),
    "relax.greater": _binary(np.greater),
    "relax.greater_equal": _binary(np.greater_equal),
    "relax.equal": _binary(np.equal),
    "relax.not_equal": _binary(np.not_equal),
    "relax.logical_and": _binary(np.logical_and),
    "relax.logical_or": _binary(np.logical_or),
    "relax.floor": _unary(np.floor),
    "relax.ceil": _unary(np.ceil),
    # index arithmetic (torch.roll's arange + shift, % size): relax.mod truncates like C, floor_mod floors
    "relax.mod": _binary(np.fmod),
    "relax.floor_mod": _binary(np.mod),
    "relax.floor_divide": _binary(np.floor_divide),
    # two constant operands: weight-only products, and the matmul of two empty slices (K = 0)
    "relax.matmul": _binary(np.matmul),
    # the indices of a constant mask (ONNX Compress by a constant condition): a static count
    "relax.nonzero": lambda call, a: np.stack(np.nonzero(a[0])),  # (of a tensor of one axis or more: _fold)
}


#: ops whose second argument is an index tensor: constant int64 indices that fit are narrowed to int32
INDEX_OPS = ("relax.take", "relax.gather_elements", "relax.scatter_elements", "relax.scatter_nd")  # (gather_nd insists on int64)


def fits_int32(values: np.ndarray) -> bool:
    """Whether every value of an integer array is an int32 (an empty one: yes)."""
    return values.size == 0 or (int(values.min()) >= -(2**31) and int(values.max()) < 2**31)


def empty_result(call: relax.Call) -> Optional[np.ndarray]:
    """The empty array a call computes when its result is a tensor of static shape with no
    elements (a ``Slice`` with ``starts == ends``, a step that leaves nothing), whatever its
    arguments, else None. TVM infers a negative extent for a strided slice whose begin lies past
    its end (numpy and ONNX: zero); such an extent counts as zero."""
    ty = call.ty
    if not isinstance(ty, relax.TensorType) or ty.shape is None or not hasattr(ty.shape, "values"):
        return None
    values = ty.shape.values
    if not _static(values) or all(int(v.value) > 0 for v in values):
        return None
    return np.zeros([max(int(v.value), 0) for v in values], dtype=str(ty.dtype))


def _drop_empty_concat_inputs(call: relax.Call) -> relax.Call:
    """``concat`` without its empty inputs (they add nothing; a kernel reading a tensor of no
    elements is a zero-extent loop), unless all of them are."""
    if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.concat" and isinstance(call.args[0], relax.Tuple)):
        return call
    fields = list(call.args[0].fields)
    kept = [f for f in fields if not (isinstance(f, GenericConst) and f.value.numpy().size == 0)]
    if not kept or len(kept) == len(fields):
        return call
    return relax.op.concat(kept, int(call.attrs.axis)) if len(kept) > 1 else kept[0]


def _split_without_empty_parts(call: relax.Call) -> relax.Expr:
    """A ``split`` with an empty part (equal indices, an index at either end: TOPI refuses them,
    "split_indices must be sorted") as a tuple of slices, its empty parts empty constants."""
    if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.split"):
        return call
    ty = call.args[0].ty
    cuts = call.attrs.indices_or_sections
    if not isinstance(ty, relax.TensorType) or ty.shape is None or not _static(ty.shape.values) or isinstance(cuts, (int, tirx.IntImm)):
        return call
    shape = _ints(ty.shape.values)
    axis = int(call.attrs.axis) % len(shape)
    bounds = [0] + [min(max(int(getattr(c, "value", c)), 0), shape[axis]) for c in cuts] + [shape[axis]]
    if all(b > a for a, b in zip(bounds, bounds[1:])):
        return call
    parts = []
    for begin, end in zip(bounds, bounds[1:]):
        if end <= begin:
            parts.append(relax.const(np.zeros(shape[:axis] + [0] + shape[axis + 1 :], str(ty.dtype)), str(ty.dtype)))
        else:
            parts.append(relax.op.strided_slice(call.args[0], [axis], [begin], [end]))
    return relax.Tuple(parts)


def _dequantize_wide(call: relax.Call) -> Optional[np.ndarray]:
    """``dequantize`` to float32 of an int32 constant (a quantized model's bias): int32 takes the
    bytes float32 does, so nothing is saved by keeping it, and it costs kernels at every run. TVM's
    arithmetic, ``float32(q - zp) * scale``; narrower integers (weights) stay quantized."""
    dq = dequantized_constant(call)
    if dq is None or dq.data.dtype != np.int32:
        return None
    shape = [-1 if d == dq.axis else 1 for d in range(dq.data.ndim)]
    along = lambda q: q.reshape(shape) if q.size > 1 else q.reshape(())  # noqa: E731  (per axis, or one value)
    return (dq.data - along(dq.zero_point).astype(np.int32)).astype(np.float32) * along(dq.scale)


def _shape_entries(call: relax.Call, shapes: Dict[relax.Var, list]) -> Optional[np.ndarray]:
    """A ``take`` at constant indices of a ``shape_to_tensor`` of ``shapes`` (variable -> the
    shape's values) whose entries taken are all static: those entries, read as ``take`` reads them
    (wrapped or clipped indices); else None. At run-time dims ONNX's ``Gather`` reads a channel
    count so to wrap its negative indices: an int64 kernel otherwise."""
    if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.take" and isinstance(call.args[1], GenericConst)):
        return None
    values = shapes.get(call.args[0]) if isinstance(call.args[0], relax.Var) else None
    if values is None or (call.attrs.axis is not None and int(call.attrs.axis) != 0):
        return None
    mode = "wrap" if str(call.attrs.mode) == "wrap" else "clip"
    at = np.take(np.arange(len(values)), call.args[1].value.numpy(), mode=mode)
    if not all(isinstance(values[int(i)], tirx.IntImm) for i in at.reshape(-1)):
        return None
    return np.array([int(values[int(i)].value) for i in at.reshape(-1)], np.int64).reshape(at.shape)


def _fold(call: relax.Call) -> Optional[np.ndarray]:
    if not isinstance(call.op, tvm.ir.Op):
        return None
    empty = empty_result(call)
    if empty is not None:
        return empty
    name = call.op.name
    if name == "relax.arange":  # arange(start, end, step) of constant bounds: a constant
        bounds = [_imm(a) for a in call.args]
        if not all(isinstance(b, (tirx.IntImm, tirx.FloatImm)) for b in bounds):
            return None
        start, end, step = (b.value for b in bounds)
        return np.arange(start, end, step).astype(str(call.attrs.dtype))
    if name == "relax.shape_to_tensor":  # of a static shape (ONNX's Shape of a known tensor)
        values = getattr(call.args[0].ty, "values", None)
        if values is None or not _static(values):
            return None
        return np.array([int(v.value) for v in values], dtype="int64")
    if name == "relax.take" and all(isinstance(a, GenericConst) for a in call.args):
        data, indices = (a.value.numpy() for a in call.args)
        axis = None if call.attrs.axis is None else int(call.attrs.axis)
        return np.take(data, indices, axis=axis, mode="wrap" if str(call.attrs.mode) == "wrap" else "clip")
    if name in ("relax.tril", "relax.triu") and isinstance(call.args[0], GenericConst):
        k = _imm(call.args[1])
        if not isinstance(k, tirx.IntImm):
            return None
        return (np.tril if name == "relax.tril" else np.triu)(call.args[0].value.numpy(), int(k.value))
    if name in ("relax.reshape", "relax.broadcast_to", "relax.full"):
        data, shape = call.args[:2] if name != "relax.full" else call.args[1::-1]
        if not isinstance(data, GenericConst) or not isinstance(shape, relax.ShapeExpr) or not _static(shape.values):
            return None
        shape = _ints(shape.values)
        if name == "relax.reshape":
            return data.value.numpy().reshape(shape)
        if np.prod(shape) > MAX_CREATED:
            return None
        array = np.broadcast_to(data.value.numpy(), shape)
        return np.ascontiguousarray(array if name == "relax.broadcast_to" else array.astype(str(call.attrs.dtype)))
    if name == "relax.strided_slice" and isinstance(call.args[0], GenericConst) and len(call.args) >= 4:
        parts = [getattr(a, "fields", None) for a in call.args[1:]]
        if any(p is None or not all(isinstance(_imm(v), tirx.IntImm) for v in p) for p in parts):
            return None
        axes, begins, ends = ([int(_imm(v).value) for v in p] for p in parts[:3])
        steps = [int(_imm(v).value) for v in parts[3]] if len(parts) > 3 else [1] * len(axes)
        array = call.args[0].value.numpy()
        index = [slice(None)] * array.ndim
        for axis, begin, end, step in zip(axes, begins, ends, steps):
            index[axis] = slice(begin, end, step)  # (numpy clamps out-of-range bounds as TVM does)
        return np.ascontiguousarray(array[tuple(index)])
    if name == "relax.dequantize":
        return _dequantize_wide(call)
    fold = FOLDERS.get(name)
    if fold is None or not call.args or not all(isinstance(a, GenericConst) for a in call.args):
        return None
    if name == "relax.nonzero" and call.args[0].value.numpy().ndim == 0:
        return None
    arrays = [a.value.numpy() for a in call.args]
    result = np.asarray(fold(call, arrays))
    out_dtype = str(call.ty.dtype) if isinstance(call.ty, relax.TensorType) else None
    return result.astype(out_dtype) if out_dtype else result


@relax.expr_functor.mutator
class _Folder(relax.PyExprMutator):
    def __init__(self, mod):
        super().__init__(mod)
        self.folded: Dict[relax.Var, relax.Expr] = {}
        self.sizes: Dict[tirx.Var, int] = {}  # symbolic sizes a match_cast of a folded constant fixes
        self.shapes: Dict[relax.Var, list] = {}  # shape_to_tensor's of shapes not all static: their values

    def visit_match_cast_(self, binding):
        """``match_cast(<foldable call>, Tensor((1, n)))`` (what an importer wraps around a
        data-dependent ``nonzero``): folded, its symbolic sizes (``n``) are recorded in
        :attr:`sizes` for the caller to bind; a match_cast of a constant to its own static shape
        is that constant where read."""
        value = self.visit_expr(binding.value)
        folded = _fold(value) if isinstance(value, relax.Call) else None
        if folded is None and isinstance(value, GenericConst):
            folded = value.value.numpy()
        shape = binding.ty.shape if isinstance(binding.ty, relax.TensorType) else None
        if folded is None or shape is None or not hasattr(shape, "values") or len(shape.values) != folded.ndim:
            return super().visit_match_cast_(binding)
        dims = list(shape.values)
        for dim, size in zip(dims, folded.shape):
            if isinstance(dim, tirx.Var):
                self.sizes.setdefault(dim, int(size))
        static = all(isinstance(d, tirx.IntImm) and int(d) == n for d, n in zip(dims, folded.shape))
        if static and isinstance(binding.var, relax.DataflowVar) and str(folded.dtype) == str(binding.ty.dtype):
            self.folded[binding.var] = relax.const(folded, str(folded.dtype))
            return
        super().visit_match_cast_(binding)

    def visit_call_(self, call):
        call = _drop_empty_concat_inputs(super().visit_call_(call))
        if isinstance(call, relax.Call):
            call = _split_without_empty_parts(call)
        if not isinstance(call, relax.Call):
            return call
        if isinstance(call.op, tvm.ir.Op) and call.op.name in INDEX_OPS and isinstance(call.args[1], GenericConst):
            indices = call.args[1].value.numpy()
            if indices.dtype == np.int64 and fits_int32(indices):
                args = list(call.args)
                args[1] = relax.const(indices.astype("int32"), "int32")
                return relax.Call(call.op, args, call.attrs)
        return call

    def visit_dataflow_var_(self, var):
        if var in self.folded:
            return self.folded[var]
        return super().visit_dataflow_var_(var)

    def visit_var_binding_(self, binding):
        if isinstance(binding.var, relax.DataflowVar):
            value = self.visit_expr(binding.value)
            if isinstance(value, GenericConst):  # a variable bound to a constant: the constant where read
                self.folded[binding.var] = value
                return
            folded = None
            if isinstance(value, relax.Call):
                folded = _fold(value)
                folded = _shape_entries(value, self.shapes) if folded is None else folded
            if folded is not None:
                self.folded[binding.var] = relax.const(folded, str(folded.dtype))
                return
            if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.shape_to_tensor":
                values = getattr(value.args[0].ty, "values", None)
                if values is not None:
                    self.shapes[binding.var] = list(values)
        else:
            value = self.visit_expr(binding.value)
            folded = _fold(value) if isinstance(value, relax.Call) else None
            if folded is not None:  # a dataflow block's output: bound to the constant, typed by it
                const = relax.const(folded, str(folded.dtype))
                var = relax.Var(binding.var.name, const.ty)
                self.set_var_remap(binding.var, var)
                self.builder_.emit_normalized(relax.VarBinding(var, const))
                return
        super().visit_var_binding_(binding)


def FoldSmallConstants() -> tvm.transform.Pass:
    """Fold cheap ops on constants with numpy (see module docstring)."""

    def transform(func: relax.Function, mod: tvm.IRModule, _ctx) -> relax.Function:
        folder = _Folder(mod)
        func = folder.visit_expr(func)
        while folder.sizes:  # sizes a folded match_cast fixed: bound, the shapes they made static fold further
            func = relax.BlockBuilder().normalize(func.bind_symbolic_vars(dict(folder.sizes)))
            folder = _Folder(mod)
            func = folder.visit_expr(func)
        return func

    return relax.transform.function_pass(transform, opt_level=0, name="relax_vk.FoldSmallConstants")
