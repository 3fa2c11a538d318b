"""EdgeDtypes: model inputs and outputs of dtypes the GPU API cannot hold are converted at the edges.

Requires: a target (which API the kernels are for). Runs in the layout stage, after identifiers
are derived.

What each API holds in kernel buffers: OpenCL every integer width, bool and float32 (float16 only
with ``cl_khr_fp16``, which NVIDIA's and pocl's OpenCL lack); Vulkan (WGSL) 32-bit integers, float32
and float16. A parameter of another dtype becomes a parameter of its *device dtype* (integers and
bool: int32; float16 on OpenCL and float64: float32); its uses read the device tensor: a cast of the
input (``astype(x, T)``, what models do with such inputs) casts the device tensor directly, other
uses get ``astype(device tensor, original dtype)``. A result of such a dtype is cast to its device
dtype as the function's last step. The function records ``relax_vk.edge_dtypes`` (input and output
name -> original dtype); the artifact carries it and the runtime converts at the edges (inputs
before upload, outputs after download). Values survive exactly: every integer and bool input fits
int32 when it is an index or a flag, and float16 values are exact in float32. float64 inputs lose
precision beyond float32's (documented, not silent: the plan's dtype column shows it). Inside the
function, a bool tensor cast to an integer dtype narrower than 32 bits is cast to int32 instead
(0 and 1 either way: PyTorch's attention decomposition reduces such int8 flags), and ``argmax`` /
``argmin`` compute int32 indices (:mod:`relax_vk.legalize.arg_reduce`) cast up to the op's int64,
a cast the output edge folds away (a result that is a cast of a device-dtype tensor returns that
tensor; the host applies the cast). The int64 index operands of ``take``, ``gather_elements``,
``gather_nd`` and the scatters are read as int32 (an ``astype`` that fuses into whatever computes
them, ONNX's negative-index ``where`` included, or a constant narrowed when its values fit):
every valid index of a tensor under 2**31 elements fits int32, so the result is the same, and no
int64 tensor is left between kernels; ``gather_nd``, which TVM types for int64 indices only,
becomes a ``call_te`` of :func:`relax_vk.legalize.gather_nd.gather_nd_compute`.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import tvm
from tvm import relax
from tvm.ir.expr import GenericConst

from ...core.errors import UnsupportedError
from ...legalize.arg_reduce import MAX_EXTENT, arg_reduce
from .fold_small_constants import INDEX_OPS as FOLDED_INDEX_OPS
from .fold_small_constants import fits_int32

EDGE_ATTR = "relax_vk.edge_dtypes"

NATIVE = {
    "opencl": {"float32", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"},
    "vulkan": {"float32", "float16", "int32", "uint32"},
}


def device_dtype(dtype: str, api: str) -> Optional[str]:
    """The dtype a tensor of ``dtype`` is held in on ``api`` (None when it is held as it is)."""
    if dtype in NATIVE[api]:
        return None
    if dtype.startswith(("int", "uint")) or dtype == "bool":
        return "int32"
    if dtype.startswith("float"):
        return "float32"
    return None


@relax.expr_functor.mutator
class _Edges(relax.PyExprMutator):
    def __init__(self, mod, replaced: Dict[relax.Var, relax.Var]):
        super().__init__(mod)
        self.replaced = replaced  # old param -> device-dtype param

    def visit_call_(self, call):
        if (
            isinstance(call.op, tvm.ir.Op)
            and call.op.name == "relax.astype"
            and isinstance(call.args[0], relax.Var)
            and call.args[0] in self.replaced
        ):
            device = self.replaced[call.args[0]]
            target = str(call.attrs.dtype)
            return device if target == str(device.ty.dtype) else relax.op.astype(device, target)
        return super().visit_call_(call)

    def visit_var_(self, var):
        if var in self.replaced:
            # one cast per use: each fuses into the kernel that reads it, so the original dtype
            # (one the API cannot hold) never lies in a tensor between kernels, even with two readers
            return self.builder_.emit(relax.op.astype(self.replaced[var], str(var.ty.dtype)), f"{var.name}_{var.ty.dtype}")
        return super().visit_var_(var)


def _bound_value(expr, values: Dict[relax.Var, relax.Expr]):
    """What ``expr`` is bound to, through aliases (``gv = lv``) and fields of bound tuples
    (``lv[1]`` of ``lv = (a, b)``); None for a parameter or anything unbound."""
    seen = set()
    while True:
        if isinstance(expr, relax.TupleGetItem):
            tup = _bound_value(expr.tuple_value, values) if isinstance(expr.tuple_value, relax.Var) else expr.tuple_value
            if not isinstance(tup, relax.Tuple):
                return expr
            expr = tup.fields[int(expr.index)]
        if not isinstance(expr, relax.Var):
            return expr
        if expr not in values or expr in seen:
            return None
        seen.add(expr)
        expr = values[expr]


def _cast_result(body: relax.SeqExpr, dtypes: Dict[int, str]) -> relax.SeqExpr:
    """``body`` with result field ``i`` cast to ``dtypes[i]``. A field that is itself a cast of a
    ``dtypes[i]`` tensor (``astype(y, float16)`` of a float32 ``y``, held as float32) returns ``y``:
    the host applies that cast when it converts the output back."""
    values = {b.var: b.value for block in body.blocks for b in block.bindings if isinstance(b, relax.VarBinding)}
    result = body.body
    if isinstance(result, relax.Tuple):
        fields = list(result.fields)
    elif isinstance(result.ty, relax.TupleType):  # a variable holding the tuple (PyTorch frontend)
        fields = [relax.TupleGetItem(result, i) for i in range(len(result.ty.fields))]
    else:
        fields = [result]
    bindings, new_fields, changed = [], [], False
    exposed: Dict[relax.Var, relax.Var] = {}  # a dataflow variable returned -> its output variable
    for i, field in enumerate(fields):
        if i not in dtypes:
            new_fields.append(field)
            continue
        value = _bound_value(field, values)
        if (
            isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.astype"
            and isinstance(value.args[0].ty, relax.TensorType) and str(value.args[0].ty.dtype) == dtypes[i]
        ):  # fmt: skip
            source = value.args[0]
            if isinstance(source, relax.DataflowVar):  # (only its block sees it: bound to an output there)
                source = exposed.setdefault(source, relax.Var(f"output{i}_{dtypes[i]}", source.ty))
            new_fields.append(source)
            changed = True
            continue
        if isinstance(value, GenericConst) and dtypes[i] == "int32" and not fits_int32(value.value.numpy()):
            # (the cast would fold into a constant of wrapped values: the host never sees the others)
            raise UnsupportedError(f"output {i} is an int64 constant holding values outside int32, which the API's kernels compute "
                                   "int64 values in (WGSL has no 64-bit integers); build for OpenCL")
        var = relax.Var(f"output{i}_{dtypes[i]}", relax.TensorType(field.ty.shape, dtypes[i]))
        bindings.append(relax.VarBinding(var, relax.op.astype(field, dtypes[i])))
        new_fields.append(var)
    if not bindings and not changed:
        return body
    new_result = new_fields[0] if len(fields) == 1 and not isinstance(result.ty, relax.TupleType) else relax.Tuple(new_fields)
    blocks = [_expose(block, exposed) for block in body.blocks]
    if bindings and blocks and isinstance(blocks[-1], relax.DataflowBlock):
        # the casts join the dataflow block: each fuses into the kernel that computes its field,
        # so no tensor of a dtype the API cannot hold is left between kernels
        blocks[-1] = relax.DataflowBlock(list(blocks[-1].bindings) + bindings)
    elif bindings:
        blocks.append(relax.BindingBlock(bindings))
    return relax.SeqExpr(blocks, new_result)


def _expose(block, exposed: Dict[relax.Var, relax.Var]):
    """``block`` ending with ``output = v`` for each dataflow variable ``v`` of ``exposed`` it binds."""
    bound = [b.var for b in block.bindings if b.var in exposed]
    if not bound:
        return block
    return relax.DataflowBlock(list(block.bindings) + [relax.VarBinding(exposed[v], v) for v in bound])


def result_fields(func: relax.Function) -> list:
    """The tensor types ``func`` returns, one per result field."""
    ty = func.body.body.ty if isinstance(func.body, relax.SeqExpr) else func.body.ty
    return list(ty.fields) if isinstance(ty, relax.TupleType) else [ty]


def retype_abi(func: relax.Function, mod: tvm.IRModule, inputs: Dict[str, str], outputs: Dict[int, str]) -> relax.Function:
    """``func`` with parameter ``name`` of dtype ``inputs[name]`` (its uses read it through a cast
    to the old dtype, folded into casts that already follow it) and result field ``i`` cast to
    ``outputs[i]``."""
    replaced: Dict[relax.Var, relax.Var] = {}
    params = []
    for p in func.params:
        if p.name not in inputs:
            params.append(p)
            continue
        ty, dtype = p.ty, inputs[p.name]
        shape_ty = relax.TensorType(ty.shape, dtype) if ty.shape is not None else relax.TensorType(ndim=ty.ndim, dtype=dtype)
        replaced[p] = relax.Var(p.name, shape_ty)
        params.append(replaced[p])
    body = _Edges(mod, replaced).visit_expr(func.body) if replaced else func.body
    if outputs and isinstance(body, relax.SeqExpr):
        body = relax.BlockBuilder().normalize(_cast_result(body, outputs))
    return relax.Function(params, body, None, func.is_pure, func.attrs, func.span)


#: dtypes kernels cannot compute in, per API (the edges convert inputs, not the computation)
NO_COMPUTE = {"opencl": (), "vulkan": ("float64",)}  # (int64 index math runs in i32: codegen.wgsl)


def _check_compute(func: relax.Function, api: str) -> None:
    """:class:`UnsupportedError` naming the first op whose result the API cannot compute."""
    if not NO_COMPUTE[api]:
        return
    from ...core.errors import UnsupportedError

    for block in getattr(func.body, "blocks", []):
        for b in block.bindings:
            ty, value = b.var.ty, b.value
            dtype = str(ty.dtype) if isinstance(ty, relax.TensorType) else ""
            if dtype in NO_COMPUTE[api] and isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
                if value.op.name == "relax.astype" and str(value.args[0].ty.dtype) not in NO_COMPUTE[api]:
                    continue  # a cast up at the edge, folded into what reads it
                raise UnsupportedError(
                    f"{value.op.name} (computing {b.var.name}) works in {dtype}, which {api} kernels cannot compute in; "
                    "convert the model to float32 / int32 (its inputs and outputs may keep their dtypes)"
                )


@relax.expr_functor.mutator
class _WidenFlagCasts(relax.PyExprMutator):
    """``astype(flags, int8)`` (a bool tensor cast to an integer narrower than 32 bits, as PyTorch's
    attention decomposition does before reducing it) becomes ``astype(flags, int32)``: the values
    are 0 and 1 either way, a sum of them no longer wraps at 8 bits, and what reads the cast
    re-infers its dtype. A cast to int64 stays: its readers may combine it with other int64
    tensors, and Vulkan holds int64 tensors between kernels (``codegen.wgsl.emit``)."""

    def __init__(self, mod, api: str):
        super().__init__(mod)
        self.api = api

    def visit_call_(self, call):
        call = super().visit_call_(call)
        if isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.astype":
            target, source = str(call.attrs.dtype), call.args[0].ty
            if (device_dtype(target, self.api) == "int32" and target in ("int8", "uint8", "int16", "uint16")
                    and isinstance(source, relax.TensorType) and str(source.dtype) == "bool"):  # fmt: skip
                return relax.op.astype(call.args[0], "int32")
        return call


@relax.expr_functor.mutator
class _NarrowArgReductions(relax.PyExprMutator):
    """``argmax`` / ``argmin`` (int64 indices) on an API without int64 buffers: computed with int32
    indices (:func:`relax_vk.legalize.arg_reduce.arg_reduce`) and cast up, a cast that the output
    edge folds away and fused consumers compute in registers; ``topk`` and ``argsort`` likewise
    compute int32 indices."""

    def __init__(self, mod, api: str):
        super().__init__(mod)
        self.api = api

    def visit_call_(self, call):
        call = super().visit_call_(call)
        name = call.op.name if isinstance(call.op, tvm.ir.Op) else ""
        if name in ("relax.topk", "relax.argsort"):
            return self._narrow_sort(call)
        if name not in ("relax.argmax", "relax.argmin") or not isinstance(call.ty, relax.TensorType):
            return call
        dtype, shape = str(call.ty.dtype), call.args[0].ty.shape
        if device_dtype(dtype, self.api) != "int32" or call.attrs.axis is None or shape is None:
            return call
        extent = shape.values[int(call.attrs.axis) % len(shape.values)]
        if not isinstance(extent, tvm.tirx.IntImm) or int(extent) > MAX_EXTENT:
            return call
        indices = self.builder_.emit(self.builder_.call_te(
            arg_reduce, call.args[0], axis=int(call.attrs.axis), keepdims=bool(call.attrs.keepdims),
            smallest=name == "relax.argmin", primfunc_name_hint=name.split(".")[-1],
        ))  # fmt: skip
        return relax.op.astype(indices, dtype)


    def _narrow_sort(self, call):
        """``topk`` / ``argsort`` with int64 indices: computed with int32 ones, cast up."""
        a = call.attrs
        dtype = str(a.dtype)
        if device_dtype(dtype, self.api) != "int32" or not dtype.startswith("int") or dtype == "int32":
            return call
        if call.op.name == "relax.argsort":
            return relax.op.astype(relax.op.argsort(call.args[0], int(a.axis), bool(a.descending), "int32"), dtype)
        ret = str(a.ret_type)
        narrow = self.builder_.emit(relax.op.topk(call.args[0], int(a.k), int(a.axis), ret, bool(a.largest), "int32"))
        if ret == "indices":
            return relax.op.astype(narrow, dtype)
        if ret == "values":
            return narrow
        values = self.builder_.emit(relax.TupleGetItem(narrow, 0))
        indices = self.builder_.emit(relax.op.astype(self.builder_.emit(relax.TupleGetItem(narrow, 1)), dtype))
        return relax.Tuple([values, indices])


#: ops whose second argument is an index tensor (:class:`_NarrowIndexOperands`): those whose
#: constant indices the folding narrows, and gather_nd
INDEX_OPS = FOLDED_INDEX_OPS + ("relax.gather_nd",)


@relax.expr_functor.mutator
class _NarrowIndexOperands(relax.PyExprMutator):
    """The int64 index operand of an :data:`INDEX_OPS` call, on an API without int64 buffers, read
    as int32 (module docstring): an index out of a tensor under 2**31 elements is undefined for
    these ops, so only valid indices matter, and they fit. A constant whose values do not all fit
    int32, and the computed indices of a ``take`` in ``wrap``/``clip`` mode (which defines every
    index), are left as they are (the build then refuses an int64 buffer by name)."""

    def __init__(self, mod, api: str):
        super().__init__(mod)
        self.api = api

    def visit_call_(self, call):
        call = super().visit_call_(call)
        name = call.op.name if isinstance(call.op, tvm.ir.Op) else ""
        if name not in INDEX_OPS or len(call.args) < 2:
            return call
        indices = call.args[1]
        ty = indices.ty
        if not isinstance(ty, relax.TensorType) or str(ty.dtype) != "int64" or device_dtype("int64", self.api) != "int32":
            return call
        if isinstance(indices, GenericConst):
            values = indices.value.numpy()
            if not fits_int32(values):
                return call
            narrow = relax.const(values.astype("int32"), "int32")
        elif name == "relax.take" and str(call.attrs.mode) != "fast":
            return call  # ("wrap"/"clip" define every index: a value past int32 must not wrap first)
        else:
            narrow = self.builder_.emit(relax.op.astype(indices, "int32"))
        if name == "relax.gather_nd":
            from ...legalize.gather_nd import gather_nd_compute

            return self.builder_.call_te(
                gather_nd_compute, call.args[0], narrow, batch_dims=int(call.attrs.batch_dims), primfunc_name_hint="gather_nd"
            )
        args = list(call.args)
        args[1] = narrow
        return relax.Call(call.op, args, call.attrs)


def _edges(func: relax.Function, mod: tvm.IRModule, api: str) -> Tuple[relax.Function, tvm.IRModule]:
    """``func`` converted, and the module of the kernels it now calls (its own ``argmax``es and
    ``gather_nd``s)."""
    func = _WidenFlagCasts(mod, api).visit_expr(func)
    narrow = _NarrowArgReductions(mod, api)
    func = narrow.visit_expr(func)
    gathers = _NarrowIndexOperands(narrow.builder_.get(), api)
    func = gathers.visit_expr(func)
    return _retype(func, mod, api), gathers.builder_.get()


def _retype(func: relax.Function, mod: tvm.IRModule, api: str) -> relax.Function:
    """The edges: parameters and results of dtypes ``api`` cannot hold retyped, recorded in
    :data:`EDGE_ATTR`."""
    _check_compute(func, api)
    inputs, outputs, record = {}, {}, {}
    for p in func.params:
        dtype = str(p.ty.dtype) if isinstance(p.ty, relax.TensorType) else ""
        new = device_dtype(dtype, api) if dtype else None
        if new is not None:
            inputs[p.name], record[p.name] = new, dtype
    for i, ty in enumerate(result_fields(func)):
        dtype = str(ty.dtype) if isinstance(ty, relax.TensorType) else ""
        new = device_dtype(dtype, api) if dtype else None
        if new is not None:
            outputs[i], record[f"<output {i}>"] = new, dtype
    if not record:
        return func
    return retype_abi(func, mod, inputs, outputs).with_attr(EDGE_ATTR, record)


def _refuse_16_bit_integers(func: relax.Function) -> None:
    """A 16-bit integer tensor inside a Vulkan model (16-bit QDQ: ``quantize_static`` with
    ``QInt16`` activations or ``QUInt16`` weights) refused by the model op that makes or reads it:
    WGSL storage buffers hold 32-bit values and 8-bit ones as bytes, and the WGSL emitter refused it
    later by a kernel's name. (Inputs and outputs of those dtypes are converted at the edges.)"""
    from ...core.provenance import model_op_names

    names = model_op_names(func)
    params = set(func.params)

    def check(var, value):
        for e in [var] + ([value] if isinstance(value, GenericConst) else []) + (list(value.args) if isinstance(value, relax.Call) else []):
            ty = getattr(e, "ty", None)
            if isinstance(ty, relax.TensorType) and str(ty.dtype) in ("int16", "uint16") and e not in params:
                op = names.get(var.name, var.name)
                raise UnsupportedError(f"{op}: a {ty.dtype} tensor; Vulkan kernels hold 32-bit values and 8-bit ones, not 16-bit "
                                       "integers (16-bit quantization runs on OpenCL; quantize to 8 bits for Vulkan)")  # fmt: skip

    for block in func.body.blocks:
        for b in block.bindings:
            check(b.var, b.value)


def EdgeDtypes(api: str) -> tvm.transform.Pass:
    """Convert ``main``'s inputs/outputs of dtypes ``api`` cannot hold at the edges (module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        out = mod
        for gvar, func in mod.functions_items():
            if isinstance(func, relax.Function) and gvar.name_hint == "main":
                if api == "vulkan":
                    _refuse_16_bit_integers(func)
                new, kernels = _edges(func, mod, api)
                if not new.same_as(func):
                    out = out.clone() if out is mod else out
                    out[gvar] = new
                    for kvar, kernel in kernels.functions_items():  # (the argmax and gather_nd kernels it added)
                        if kvar not in mod.get_global_vars():
                            out[kvar] = kernel
        return out

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.EdgeDtypes")
