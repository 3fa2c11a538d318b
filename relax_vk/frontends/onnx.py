"""ONNX front door: ONNX models as they come.

Real exports have symbolic input dimensions (``dim_param``, ``-1`` or unset) and shape-computing
subgraphs (``Shape -> Gather/Slice -> Concat -> Reshape``, computed pad widths) that TVM's ONNX
frontend cannot import ("Reshape requires the input new shape to be Shape"). :func:`from_onnx`:

1. fixes every input dimension: the model's own static ones, else ``input_shapes`` (``--input-shape
   NAME=1,3,224,224`` on the command line); a dimension left symbolic is a clear error naming the
   input and suggesting the flag. A dimension may stay a *run-time dim* instead: named in
   ``input_shapes`` (``--input-shape x=1,3,48,W``) or by the model's own ``dim_param``, with its
   range in ``dims`` (``--dim W=32:1280``, Python ``dims={"W": (32, 1280)}``); one artifact then
   runs every size in the range (:mod:`relax_vk.codegen.run_time_shapes`);
2. folds the shape subgraphs away with onnxslim (constant folding with shape inference: with
   every input static, each ``Shape`` is a constant; it also folds batch norms into convs).
   Measured on the fuzzer's ONNX exports and the PP-OCR models: onnxscript's optimizer, already a
   dependency, leaves the computed pad widths of opset >= 11 ``Pad`` unfolded (TVM: "Dynamic pads
   are not supported": 36 of 73 exports failed); onnxsim and onnxslim fold them all, onnxsim needs
   every output to carry a shape (exports with symbolic outputs fail) and is a compiled extension,
   onnxslim is pure Python on onnx alone. A model the optimizer cannot process is imported as is;
   then ``Resize`` nodes with an empty ``scales`` beside ``sizes`` (what exporters write) lose the
   empty input, which TVM refuses ("Only one of scales and sizes"), and a ``TopK`` whose ``K`` is
   its axis's run-time size (an exported sort) becomes relax_vk's sort (:mod:`.onnx_topk`);
2a. rewrites quantized models, before the folding (:func:`~relax_vk.frontends.onnx_quant.rewrite_quantized`): the
   three forms ``onnxruntime.quantization`` writes, QDQ (per tensor or per channel, int8 or
   uint8), QOperator (``QLinearConv``, ``QLinearMatMul``, com.microsoft ``QGemm``, ``QLinearAdd``,
   ... and int8 data movement between them) and dynamic (``DynamicQuantizeLinear`` +
   ``ConvInteger`` / ``MatMulInteger``), into ``DequantizeLinear`` of the int8 weights (kept as
   bytes in the artifact, dequantized by a kernel at run time) and float ops, activations fake
   quantized in float32 (the same values; no int8 tensor between kernels on either API).
   com.microsoft ``MatMulNBits`` (blockwise 4-bit weights) is converted at import, its packed
   bytes kept. Blocked QDQ and quantized attention are errors naming the node;
3. gives opset < 7 per-channel broadcasts (``PRelu`` slopes, ``broadcast=1`` binary ops with an
   ``axis``) their explicit shapes (:func:`align_legacy_broadcasts`);
4. imports with TVM's frontend, then raises TOPI binary kernels back to Relax ops
   (:class:`RaisePrebuiltBinary`, so ``Clip`` packs); outputs TVM leaves as shape values
   (``Shape`` of a static tensor) become the int64 tensors ONNX defines (:func:`tensor_outputs`).
   An op TVM cannot convert is an error naming the op type and the nodes that use it.
"""

from __future__ import annotations

import functools
import os
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tvm
from tvm import relax

from .quantized_matmuls import fuse_quantized_matmuls
from ..core.dims import bind_stepped_dims, check_range, quotient_name, with_dim_ranges
from ..core.errors import RelaxVKError, UnsupportedError
from ..core.extras import require
from ..core.provenance import model_op_names, record_model_ops, record_output_names
from .errors import ModelLoadError, first_lost_shape, onnx_node, refuse_fixed_reshapes
from .open_slices import exact_open_slices
from .resize_picks import check_nearest_picks
from .onnx_quant import rewrite_quantized, widen_int4_weights
from .onnx_slice import importing_ranges
from .onnx_topk import rewrite_full_topk
from .raise_prebuilt_binary import RaisePrebuiltBinary

InputShapes = Mapping[str, Sequence["int | str"]]
DimRanges = Mapping[str, Tuple[int, ...]]  # (min, max) or (min, max, step)


def parse_input_shape(text: str) -> tuple:
    """``"NAME=1,3,224,224"`` -> ``("NAME", (1, 3, 224, 224))`` (the ``--input-shape`` syntax); an
    axis may name a run-time dim instead (``x=1,3,48,W``: its range from ``--dim``)."""
    name, sep, dims = text.rpartition("=")
    shape = tuple(int(d) if d.strip().lstrip("-").isdigit() else d.strip() for d in dims.split(",") if d.strip())
    if not sep or not name or not shape or any(isinstance(d, int) and d < 1 or isinstance(d, str) and not d.isidentifier() for d in shape):
        raise UnsupportedError(f"--input-shape {text!r}: expected NAME=D0,D1,... with positive integers or dim names, e.g. "
                               "x=1,3,224,224 or x=1,3,48,W")  # fmt: skip
    return name, shape


def parse_dim(text: str) -> tuple:
    """``"W=32:1280"`` -> ``("W", (32, 1280))``, ``"H=32:960:32"`` -> ``("H", (32, 960, 32))`` (the
    ``--dim`` syntax: a run-time dim's inclusive range, and optionally a step its sizes are
    multiples of)."""
    name, sep, bounds = text.partition("=")
    parts = [b.strip() for b in bounds.split(":")]
    values = tuple(int(b) for b in parts) if all(b.isdigit() for b in parts) else ()
    try:
        if not (sep and name.strip().isidentifier() and values):
            raise ValueError(text)
        check_range(name.strip(), values)  # (2 or 3 values, 1 <= MIN <= MAX, a STEP dividing both)
    except ValueError:
        raise UnsupportedError(f"--dim {text!r}: expected NAME=MIN:MAX with 1 <= MIN <= MAX, e.g. W=32:1280, or NAME=MIN:MAX:STEP "
                               "with MIN and MAX multiples of STEP, e.g. H=32:960:32") from None  # fmt: skip
    return name.strip(), values


def _load(path_or_model):
    onnx = require("onnx", "onnx")
    if isinstance(path_or_model, (str, os.PathLike)):
        path = str(path_or_model)
        if not os.path.exists(path):
            raise ModelLoadError(f"{path}: no such file")
        try:
            model = onnx.load(path)
        except Exception as err:
            raise ModelLoadError(f"{path}: not a readable ONNX model: {err}") from None
        where = path
    else:
        model = onnx.ModelProto()
        model.CopyFrom(path_or_model)  # never change the caller's model
        where = f"ONNX model {model.graph.name or '(unnamed)'}"
    if not model.graph.node:
        raise ModelLoadError(f"{where}: the graph has no nodes")
    try:
        onnx.checker.check_model(model)
    except Exception as err:
        raise ModelLoadError(f"{where}: not a valid ONNX model: {str(err).splitlines()[0]}") from None
    return model, where


def value_dtype(value_info) -> str:
    """The numpy dtype name of an ONNX value's element type."""
    from onnx import helper

    return str(helper.tensor_dtype_to_np_dtype(value_info.type.tensor_type.elem_type))


def graph_inputs(model) -> list:
    """The model's inputs that are not initializers (what a caller feeds)."""
    initializers = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


def _read_inputs(model) -> set:
    """The names of ``model``'s graph inputs that a node reads or that are outputs themselves."""
    read = {name for node in model.graph.node for name in node.input} | {o.name for o in model.graph.output}
    return {i.name for i in graph_inputs(model) if i.name in read}


def keep_unused_inputs(mod: tvm.IRModule, names: Sequence[str], read: set, shapes: Dict[str, tuple], dtypes: Dict[str, str]) -> tvm.IRModule:
    """``mod`` whose ``main`` takes every input of the model in its order (``names``), those the
    graph never reads (not in ``read``) included: the importers drop them, so a caller feeding the
    model as onnxruntime lists its inputs (by name, or all of them in order) was refused. Such a
    parameter is read by nothing; its tensor is checked and ignored at a run. ``main``'s own
    parameters are the read inputs in order (under TVM's names: ``input.1`` is ``input_1``); a
    module that does not line up so is left as it is."""
    main = mod["main"]
    kept = [n for n in names if n in read]
    if len(kept) == len(names) or len(main.params) < len(kept):
        return mod
    if any(not isinstance(d, int) for n in names if n not in read for d in shapes.get(n, (None,))):
        return mod
    taken = {p.name for p in main.params}
    given = iter(main.params[: len(kept)])
    params = []
    for n in names:
        if n in read:
            params.append(next(given))
            continue
        name = n.replace(".", "_")
        name = name if name and (name[0].isalpha() or name[0] == "_") else f"input_{name}"
        while name in taken:
            name += "_"
        taken.add(name)
        params.append(relax.Var(name, relax.TensorType([int(d) for d in shapes[n]], dtypes[n])))
    params += list(main.params[len(kept):])  # (anything after the inputs: states)
    func = relax.Function(params, main.body, main.ret_ty, main.is_pure, main.attrs, main.span)
    if func.attrs is not None and "num_input" in func.attrs:
        func = func.with_attr("num_input", len(params))
    out = mod.clone()
    out["main"] = func
    return out


def fix_input_shapes(model, input_shapes: Optional[InputShapes], where: str, dims: Optional[DimRanges] = None) -> Dict[str, tuple]:
    """Write the shapes into ``model``'s inputs (in place): static sizes, and run-time dims (names
    with a range in ``dims``) as ``dim_param``; returns ``{name: shape}`` (a dim as its name)."""
    input_shapes = dict(input_shapes or {})
    dims = dict(dims or {})
    inputs = graph_inputs(model)
    names = [i.name for i in inputs]
    unknown = sorted(set(input_shapes) - set(names))
    if unknown:
        raise UnsupportedError(f"{where}: --input-shape names {', '.join(map(repr, unknown))}, but the model's inputs are {', '.join(map(repr, names))}")
    shapes: Dict[str, tuple] = {}
    for inp in inputs:
        dims_of = list(inp.type.tensor_type.shape.dim)
        given = input_shapes.get(inp.name)
        if given is not None:
            if dims_of and len(dims_of) != len(given):
                raise UnsupportedError(f"{where}: input {inp.name!r} has rank {len(dims_of)}; --input-shape gives {len(given)} dimensions {list(given)}")
            for i, (d, g) in enumerate(zip(dims_of, given)):
                if d.HasField("dim_value") and d.dim_value > 0 and d.dim_value != g:
                    raise UnsupportedError(f"{where}: input {inp.name!r} dimension {i} is {d.dim_value} in the model; --input-shape gives {g}")
            shape = tuple(g if isinstance(g, str) else int(g) for g in given)
        else:
            # the model's own symbolic dims stay run-time dims when ``dims`` gives their range
            symbolic = [i for i, d in enumerate(dims_of) if not (d.HasField("dim_value") and d.dim_value > 0) and d.dim_param not in dims]
            if symbolic or not inp.type.tensor_type.HasField("shape"):
                shown = ",".join(str(d.dim_value) if i not in symbolic else (d.dim_param or "?") for i, d in enumerate(dims_of))
                example = [d.dim_value if i not in symbolic else (1 if i == 0 else 224) for i, d in enumerate(dims_of)]
                raise UnsupportedError(
                    f"{where}: input {inp.name!r} has symbolic dimensions [{shown}] (dims {symbolic}); give them with "
                    f"--input-shape {inp.name}={','.join(map(str, example))} (Python: input_shapes={{{inp.name!r}: {tuple(example)}}}), "
                    f"or keep one a run-time dim: --input-shape {inp.name}=...,W --dim W=MIN:MAX"
                )
            shape = tuple(d.dim_param if not (d.HasField("dim_value") and d.dim_value > 0) else int(d.dim_value) for d in dims_of)
        for g in shape:
            if isinstance(g, str) and g not in dims:
                raise UnsupportedError(f"{where}: input {inp.name!r} names the run-time dim {g}; give its range with --dim {g}=MIN:MAX "
                                       f"(Python: dims={{{g!r}: (MIN, MAX)}})")  # fmt: skip
        shapes[inp.name] = shape
        inp.type.tensor_type.shape.Clear()
        for g in shape:
            if isinstance(g, str):
                inp.type.tensor_type.shape.dim.add().dim_param = g
            else:
                inp.type.tensor_type.shape.dim.add().dim_value = g
    # outputs and intermediate annotations may carry the old symbolic dims: shape inference redoes them
    for out in model.graph.output:
        out.type.tensor_type.ClearField("shape")
    del model.graph.value_info[:]
    return shapes


def fold_shape_subgraphs(model):
    """``model`` with its shape computations folded into constants (onnxslim), the ``Shape`` of a
    tensor past a ``MatMulNBits`` included (:func:`_shapes_past_matmul_nbits`)."""
    onnxslim = require("onnxslim", "onnx")
    try:
        return onnxslim.slim(_shapes_past_matmul_nbits(model))
    except Exception:  # an optimizer failure must not halt an import TVM may still manage
        return model


def _shapes_past_matmul_nbits(model):
    """``model`` with each ``Shape`` of a tensor whose static shape follows from a ``MatMulNBits``
    output (``[..., K] -> [..., N]``) replaced by that shape, a constant. ONNX's shape inference
    knows no com.microsoft op, so onnxslim left such a ``Shape -> Gather -> Div -> Slice`` chain
    (``linear(x).chunk(3, -1)`` exported by torch.onnx) to TVM's importer, whose slice of computed
    bounds no build could lower. ``model`` itself when it has no ``MatMulNBits``."""
    from onnx import helper, numpy_helper, shape_inference

    nbits = [n for n in model.graph.node if n.op_type == "MatMulNBits"]
    if not nbits:
        return model
    model = shape_inference.infer_shapes(model)
    for _ in range(len(nbits)):  # (a chain of them: each typed once the one before is)
        known = {v.name: v.type.tensor_type for v in list(model.graph.value_info) + list(model.graph.input)}
        typed = False
        for n in nbits:
            if n.output[0] in known or n.input[0] not in known or not known[n.input[0]].HasField("shape"):
                continue
            width = next((a.i for a in n.attribute if a.name == "N"), None)
            dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in known[n.input[0]].shape.dim]
            if width is None or not dims:
                continue
            model.graph.value_info.append(helper.make_tensor_value_info(n.output[0], known[n.input[0]].elem_type, dims[:-1] + [width]))
            typed = True
        if not typed:
            break
        model = shape_inference.infer_shapes(model)
    known = {v.name: v.type.tensor_type for v in model.graph.value_info}
    for i, n in enumerate(list(model.graph.node)):
        t = known.get(n.input[0]) if n.op_type == "Shape" and n.input else None
        if t is None or not t.HasField("shape") or not all(d.HasField("dim_value") for d in t.shape.dim) or n.attribute:
            continue
        value = np.array([d.dim_value for d in t.shape.dim], np.int64)
        model.graph.node.remove(n)
        model.graph.node.insert(i, helper.make_node("Constant", [], list(n.output), name=n.name, value=numpy_helper.from_array(value)))
    return model


def drop_empty_resize_scales(model) -> None:
    """Resize nodes given both an empty ``scales`` and ``sizes`` keep only ``sizes`` (in place)."""
    from onnx import numpy_helper

    empty = {i.name for i in model.graph.initializer if numpy_helper.to_array(i).size == 0}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output and any(a.name == "value" and a.t.dims == [0] for a in node.attribute):
            empty.add(node.output[0])
    for node in model.graph.node:
        if node.op_type == "Resize" and len(node.input) >= 4 and node.input[2] in empty and node.input[3]:
            node.input[2] = ""


#: opset < 7 binary ops whose ``broadcast=1`` form aligns the second input at ``axis``
LEGACY_BROADCAST_OPS = ("Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less")


def _default_opset(model) -> int:
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)


def _ranks(model) -> Dict[str, int]:
    """Rank of every value whose shape ONNX shape inference knows."""
    from onnx import shape_inference

    try:
        inferred = shape_inference.infer_shapes(model)
    except Exception:
        inferred = model
    ranks = {i.name: len(i.dims) for i in model.graph.initializer}
    for v in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
        if v.type.tensor_type.HasField("shape"):
            ranks[v.name] = len(v.type.tensor_type.shape.dim)
    return ranks


def align_legacy_broadcasts(model) -> int:
    """Give opset < 7 per-axis broadcasts their explicit numpy shapes (in place); returns how many
    inputs were aligned.

    Before opset 7, ``PRelu``'s 1-D slope holds one value per channel (axis 1; PyTorch's
    ``nn.PReLU(C)`` exports), and binary ops with ``broadcast=1`` align their second input at
    ``axis``. TVM's importer broadcasts both numpy-style, from the last axis: a per-channel
    slope met TOPI's "slope length == axis length" assertion, and a binary op whose shapes happen
    to line up from the right would compute the wrong sum. Each such input gets an ``Unsqueeze``
    (``axes`` attribute, valid before opset 13) that appends the unit axes after it."""
    from onnx import helper

    if _default_opset(model) >= 7:
        return 0
    ranks = _ranks(model)
    nodes, aligned = [], 0
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        trailing = 0
        if node.op_type == "PRelu" and len(node.input) == 2:
            x, slope = ranks.get(node.input[0]), ranks.get(node.input[1])
            if x is not None and slope == 1 and x >= 3:
                trailing = x - 2  # one value per channel: (C,) -> (C, 1, ..., 1)
        elif node.op_type in LEGACY_BROADCAST_OPS and attrs.get("broadcast") == 1 and "axis" in attrs and len(node.input) == 2:
            a, b = ranks.get(node.input[0]), ranks.get(node.input[1])
            if a is not None and b is not None:
                axis = int(attrs["axis"]) % a if a else 0
                trailing = a - axis - b
        if trailing > 0:
            name = f"{node.input[1]}__aligned_{aligned}"
            nodes.append(helper.make_node("Unsqueeze", [node.input[1]], [name], axes=list(range(ranks[node.input[1]], ranks[node.input[1]] + trailing))))
            node.input[1] = name
            aligned += 1
        nodes.append(node)
    if aligned:
        del model.graph.node[:]
        model.graph.node.extend(nodes)
    return aligned


def _shape_as_tensor(expr, bb=None, rank: Optional[int] = None):
    """The int64 tensor of a shape or a scalar value (a float one float32), else ``expr`` itself:
    a constant where every size is static; where some hold run-time dims (``x.new_zeros(1) + H *
    W``), tensors a kernel computes from the dims (:func:`~relax_vk.frontends.size_tensors.size_tensor`)
    emitted by ``bb``. A scalar value takes the output's declared ``rank`` (ONNX's ``[1]``)."""
    from tvm import relax, tirx

    from .size_tensors import size_tensor

    if isinstance(expr, relax.ShapeExpr):
        if all(isinstance(v, tirx.IntImm) for v in expr.values):
            return relax.const(np.array([int(v.value) for v in expr.values], "int64"), "int64")
        if bb is None or not expr.values:
            return expr
        parts = [bb.emit(relax.op.reshape(size_tensor(bb, v), [1])) for v in expr.values]
        return bb.emit(relax.op.concat(parts, axis=0)) if len(parts) > 1 else parts[0]
    if isinstance(expr, (tirx.IntImm, tirx.FloatImm)):  # a Relax prim value
        dtype = "int64" if isinstance(expr, tirx.IntImm) else "float32"
        value = np.array(expr.value, dtype)
        return relax.const(value.reshape([1] * rank) if rank else value, dtype)
    if bb is not None and tvm.ir.is_prim_expr(expr) and not isinstance(getattr(expr, "ty", None), relax.TensorType):
        dtype = "int64" if str(expr.ty.dtype).startswith(("int", "uint")) else "float32"
        tensor = size_tensor(bb, expr, dtype)
        return bb.emit(relax.op.reshape(tensor, [1] * rank)) if rank else tensor
    return expr


def tensor_outputs(mod: tvm.IRModule, ranks: Optional[List[Optional[int]]] = None) -> tvm.IRModule:
    """``mod`` with every output of ``main`` that TVM's importer left as a shape or a scalar value
    (ONNX ``Shape`` / ``Size`` of a tensor feeding a graph output, a size computed from run-time
    dims) turned into the tensor ONNX defines, of the output's declared rank (``ranks``, by output):
    in the result itself and in the output bindings (non-dataflow variables) that hold it or a tuple
    of it. Static values are constants; sizes of run-time dims, kernels' results."""
    from tvm import relax

    ranks = list(ranks or [])

    def convert(expr, bb=None):
        if isinstance(expr, relax.Tuple):
            fields = [_shape_as_tensor(f, bb, ranks[i] if i < len(ranks) else None) for i, f in enumerate(expr.fields)]
            return expr if all(a is b for a, b in zip(fields, expr.fields)) else relax.Tuple(fields)
        return _shape_as_tensor(expr, bb, ranks[0] if ranks else None)

    @relax.expr_functor.mutator
    class _Outputs(relax.PyExprMutator):
        def visit_var_binding_(self, binding):
            value = self.visit_expr(binding.value)
            converted = convert(value, self.builder_) if not isinstance(binding.var, relax.DataflowVar) else value
            if converted is value:
                return super().visit_var_binding_(binding)
            var = relax.Var(binding.var.name, self.builder_.normalize(converted).ty)
            self.set_var_remap(binding.var, var)
            self.builder_.emit_normalized(relax.VarBinding(var, self.builder_.normalize(converted)))

        def visit_seq_expr_(self, seq):
            out = super().visit_seq_expr_(seq)
            result = convert(out.body)
            return out if result is out.body else relax.SeqExpr(out.blocks, result)

    main = mod["main"]
    mutator = _Outputs(mod)
    body = mutator.visit_expr(main.body)
    if body.same_as(main.body):
        return mod
    func = relax.Function(main.params, body, None, main.is_pure, main.attrs, main.span)
    built = mutator.builder_.get()  # (with the kernels the sizes' tensors added)
    out = tvm.IRModule(dict(built.functions_items()), attrs=mod.attrs)
    out["main"] = func
    return relax.transform.Normalize()(out)


def _unsupported_ops(model) -> Dict[str, List[str]]:
    """Op types TVM's ONNX frontend has no converter for -> the nodes that use them."""
    from tvm.relax.frontend.onnx import onnx_frontend

    from .onnx_quant import MS

    table, ours = onnx_frontend._get_convert_map(), converters()
    missing: Dict[str, List[str]] = {}
    for node in model.graph.node:
        if node.domain in (MS, "", "ai.onnx") and node.op_type in ours:
            continue
        if node.op_type not in table or (node.domain not in ("", "ai.onnx")):
            missing.setdefault(f"{node.domain + '::' if node.domain else ''}{node.op_type}", []).append(node.name or node.output[0])
    return missing


def from_onnx(path_or_model, input_shapes: Optional[InputShapes] = None, dims: Optional[DimRanges] = None) -> tvm.IRModule:
    """Relax module of an ONNX model (a path or an ``onnx.ModelProto``; see the module docstring).
    ``dims``: ``{name: (min, max)}`` of the run-time dims ``input_shapes`` or the model name."""
    model, where = _load(path_or_model)
    shapes = fix_input_shapes(model, input_shapes, where, dims)
    used = {g for shape in shapes.values() for g in shape if isinstance(g, str)}
    unused = sorted(set(dims or {}) - used)
    try:
        ranges = {name: check_range(name, bounds) for name, bounds in (dims or {}).items()}
    except ValueError as err:
        raise UnsupportedError(f"{where}: {err}") from None
    steps = {name: step for name, (_, _, step) in ranges.items() if step > 1 and name in used}
    if unused:
        raise UnsupportedError(f"{where}: --dim {', '.join(unused)}: no input has such a dim (inputs: "
                               f"{', '.join(f'{k}={list(v)}' for k, v in shapes.items())})")  # fmt: skip
    declared_inputs = [i.name for i in graph_inputs(model)]
    declared_dtypes = {i.name: value_dtype(i) for i in graph_inputs(model)}
    align_legacy_broadcasts(model)
    widen_int4_weights(model, where)
    rewrite_quantized(model)
    model = fold_shape_subgraphs(model)
    drop_empty_resize_scales(model)
    rewrite_full_topk(model)
    read_inputs = _read_inputs(model)
    for node in model.graph.node:  # (TVM's converter produces one output: an AssertionError inside its importer)
        if node.op_type == "MaxPool" and len(node.output) > 1 and node.output[1]:
            raise UnsupportedError(f"{where}: {onnx_node({'tvm_custom': {'name': node.name}}, 'MaxPool')}: "
                                   "its Indices output is not supported (export the pool without return_indices)")  # fmt: skip
    dtypes = {i.name: value_dtype(i) for i in graph_inputs(model)}
    try:
        # (what the Slice and Div converters prove their bounds over: the plain dims only. A stepped
        # dim's quotient is left out: a slice bounded by it is made exact after the import, where
        # main derives it from the plain dim; bounded by it at import, the build failed in TVM's VM
        # codegen, "All shape inputs are expected to be single tirx var")
        known = {name: (lo, hi) for name, (lo, hi, step) in ranges.items() if name in used and step == 1}
        with importing_ranges(known):
            mod, made_by = _import(model, shapes, dtypes, steps)
    except Exception as err:
        missing = _unsupported_ops(model)
        if missing:
            listed = "; ".join(f"{op} (node {', '.join(nodes[:3])}{', ...' if len(nodes) > 3 else ''})" for op, nodes in sorted(missing.items()))
            raise UnsupportedError(f"{where}: TVM's ONNX frontend cannot convert {listed}") from None
        if isinstance(err, RelaxVKError):  # (a converter's own error names its node)
            raise type(err)(f"{where}: {err}") from None
        raise ModelLoadError(f"{where}: TVM's ONNX frontend failed: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}") from None
    declared = [len(o.type.tensor_type.shape.dim) if o.type.tensor_type.HasField("shape") else None for o in model.graph.output]
    mod = fuse_quantized_matmuls(record_model_ops(tensor_outputs(RaisePrebuiltBinary()(mod), declared), made_by))
    mod = record_output_names(mod, [o.name for o in model.graph.output])
    mod = keep_unused_inputs(mod, declared_inputs, read_inputs, shapes, declared_dtypes)
    _check_windows(mod, where)
    _refuse_run_time_branches(mod, model, where)
    if not used:
        return mod
    _check_known_shapes(mod, where, {name: ranges[name] for name in used})
    quotients = {quotient_name(n, step): (ranges[n][0] // step, ranges[n][1] // step) for n, step in steps.items()}
    mod = exact_open_slices(with_dim_ranges(bind_stepped_dims(mod, steps), {**{name: ranges[name] for name in sorted(used)}, **quotients}))
    check_nearest_picks(mod, where, "onnx")
    return mod


def converters() -> dict:
    """relax_vk's converters of the ops TVM's importer lacks, by op type: com.microsoft
    ``MatMulNBits`` (:mod:`.onnx_quant`), ``LSTM``, ``GRU`` and ``RNN`` (:mod:`.recurrent`),
    ``LpNormalization`` and ``Celu`` (:mod:`.onnx_compositions`), and relax_vk's ``SortAlongAxis``
    (:mod:`.onnx_topk`: a ``TopK`` of a whole axis of run-time size)."""
    from .onnx_compositions import CONVERTERS as COMPOSITIONS
    from .onnx_quant import CONVERTERS
    from .onnx_topk import CONVERTERS as SORTS
    from .recurrent import ONNX_CONVERTERS

    return {**CONVERTERS, **ONNX_CONVERTERS, **COMPOSITIONS, **SORTS}


def _check_known_shapes(mod: tvm.IRModule, where: str, ranges: Dict[str, Tuple[int, int, int]]) -> None:
    """Refuse, naming the ONNX node, a model whose shapes TVM's importer lost at run-time dims: an
    op whose inputs' sizes it cannot prove equal (an FPN adding a 2x upsampled map to the map it
    came from: equal only at multiples) gets a tensor of unknown shape, which no later stage can
    build."""
    refuse_fixed_reshapes(mod, where, "node", " (an export that baked its example's size into the Reshape); re-export it with the shape computed "
                          "from the input (Shape -> Concat), or fix the dims")  # fmt: skip
    node = first_lost_shape(mod)
    if node is not None:
        plain = ", ".join(f"{n}={lo}:{hi}" for n, (lo, hi, step) in sorted(ranges.items()) if step == 1)
        hint = f"; if its sizes must be multiples of some step, declare it: --dim NAME=MIN:MAX:STEP (now {plain})" if plain else ""
        raise UnsupportedError(f"{where}: node {node}: TVM's importer cannot tell the shape of its output at run-time dims "
                               f"(its inputs' sizes are not provably equal for every size in the ranges){hint}")  # fmt: skip


#: the ops whose output size is a window's slide over their padded input
_WINDOWED = {f"relax.nn.{kind}{d}d" for kind in ("max_pool", "avg_pool", "conv") for d in (1, 2, 3)}


def _refuse_run_time_branches(mod: tvm.IRModule, model, where: str) -> None:
    """Refuse, naming the ONNX ``If`` nodes, a model whose branch TVM's importer kept (its
    condition computed at run time, not folded): the runtime runs a fixed sequence of kernels, and
    the export stopped at "If has no runtime step"."""
    from tvm import relax

    found = []

    def visit(e) -> None:
        if isinstance(e, relax.If):
            found.append(e)

    relax.analysis.post_order_visit(mod["main"].body, visit)
    if found:
        names = [n.name or n.output[0] for n in model.graph.node if n.op_type == "If"]
        raise UnsupportedError(f"{where}: If node(s) {', '.join(names[:3]) or '(unnamed)'}: a branch on a condition computed at run time is not supported "
                               "(a condition of constants is folded at import)")  # fmt: skip


def _check_windows(mod: tvm.IRModule, where: str) -> None:
    """Refuse, naming the ONNX node, a pool or conv whose window is larger than its padded input:
    TVM's importer gives it an output of size 0, and every later op then reads nothing (a model
    whose exporter computed a pool's size by another rule than its producer's: torch.onnx sized an
    AveragePool after a ceil-mode MaxPool by ONNX's formula, 12, over the 11 columns PyTorch's rule
    gives). onnxruntime refuses such a model too."""
    from tvm import relax

    main = mod["main"]
    names = model_op_names(main)
    for block in main.body.blocks:
        for b in block.bindings:
            value, ty = b.value, b.var.ty
            if not (isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name in _WINDOWED):
                continue
            data = value.args[0].ty
            if not (isinstance(ty, relax.TensorType) and ty.shape is not None and isinstance(data, relax.TensorType) and data.shape is not None):
                continue
            out = [int(d) if isinstance(d, tvm.tirx.IntImm) else None for d in ty.shape.values]
            given = [int(d) if isinstance(d, tvm.tirx.IntImm) else None for d in data.shape.values]
            if 0 in out and 0 not in given:
                node = names.get(b.var.name, b.var.name)
                raise UnsupportedError(f"{where}: node {node} ({value.op.name.split('.')[-1]}): its window is larger than its padded input "
                                       f"{given}, an output of {out} (the model's sizes disagree with each other; onnxruntime refuses it too)")  # fmt: skip


def _importer_class():
    """TVM's ONNX importer, consulting :func:`converters` first, for ``Resize`` by scales of
    run-time dims and ``Upsample`` :mod:`.onnx_resize`, for ``LRN`` :mod:`.onnx_lrn`, for ``Sum``, ``Mean``,
    ``Max`` and ``Min`` :mod:`.onnx_variadic`, for ``Expand`` of run-time dims :mod:`.onnx_expand`, and for
    ``Reshape`` of a size computed at run time, ``Range`` up to one, ``Gather`` at one and
    ``Div`` of one :mod:`.onnx_shape_values`, and
    for ``Slice`` of a run-time axis :mod:`.onnx_slice`; the attributes TVM's converters ignore
    (``ConvTranspose``'s ``output_shape``, ``Resize``'s ``antialias``, ``axes`` and
    ``keep_aspect_ratio_policy``) and ``Pow`` by an integer exponent, :mod:`.onnx_attributes`."""
    from tvm.relax.frontend.onnx import onnx_frontend
    from tvm.relax.frontend.onnx.onnx_frontend import ONNXGraphImporter

    from .onnx_attributes import (antialiased_resize, conv_transpose_attrs, convert_cast, convert_dropout, convert_eye_like, convert_isinf, convert_layer_norm,
                                  convert_one_hot, convert_pow, refuse_node, resize_inputs)  # fmt: skip
    from .onnx_expand import convert_expand
    from .onnx_lrn import convert_lrn
    from .onnx_resize import convert_resize, convert_upsample
    from .onnx_shape_values import convert_div, convert_gather, convert_range, convert_reshape
    from .onnx_slice import convert_slice
    from .onnx_variadic import VARIADIC

    CONVERTERS = converters()
    OVERRIDES = {"Resize": convert_resize, "Upsample": convert_upsample, "LRN": convert_lrn, "Expand": convert_expand, "Reshape": convert_reshape, "Range": convert_range,
                 "Slice": convert_slice, "Gather": convert_gather, "Div": convert_div, "Pow": convert_pow, "IsInf": convert_isinf, "LayerNormalization": convert_layer_norm,
                 "Dropout": convert_dropout, "Cast": convert_cast, "EyeLike": convert_eye_like, "OneHot": convert_one_hot, **{op: functools.partial(refuse_node, op=op) for op in ("BatchNormalization", "RoiAlign", "NonMaxSuppression")},
                 **VARIADIC}  # fmt: skip  # (None: TVM's converter handles the node)

    class Importer(ONNXGraphImporter):
        def _check_for_unsupported_ops(self, graph):
            known = onnx_frontend._get_convert_map()
            missing = {n.op_type for n in graph.node if n.op_type not in known and n.op_type not in CONVERTERS and n.op_type not in ("If", "Constant")}
            if missing:
                raise tvm.error.OpNotImplemented("The following operators are not supported for frontend ONNX: " + ", ".join(sorted(missing)))

        def _convert_operator(self, op_name, inputs, attrs, opset):
            try:
                # (attributes TVM's converters ignore: read here, or refused by node)
                if op_name == "ConvTranspose":
                    attrs = conv_transpose_attrs(inputs, attrs)
                elif op_name == "Resize":
                    inputs, attrs = resize_inputs(self.bb, inputs, attrs), {k: v for k, v in attrs.items() if k != "axes"}
                    filtered = antialiased_resize(self.bb, inputs, attrs)
                    if filtered is not None:
                        return self.bb.normalize(filtered)
                if op_name in CONVERTERS:
                    return self.bb.normalize(CONVERTERS[op_name](self.bb, inputs, attrs))
                if op_name in OVERRIDES:
                    converted = OVERRIDES[op_name](self.bb, inputs, attrs)
                    if converted is not None:
                        return self.bb.normalize(converted)
                return super()._convert_operator(op_name, inputs, attrs, opset)
            except UnsupportedError as err:  # (a relax_vk converter's refusal: which node, where it does not say)
                name = attrs.get("tvm_custom", {}).get("name", "")
                if name and name not in str(err):
                    raise UnsupportedError(f"{onnx_node(attrs, op_name)}: {err}") from None
                raise
            except RelaxVKError:
                raise
            except Exception as err:  # (TVM's converter failed: which node it was converting)
                first = str(err).strip().splitlines()[-1] if str(err).strip() else ""
                raise ModelLoadError(f"TVM's ONNX frontend failed at {onnx_node(attrs, op_name)}: {type(err).__name__}: {first}") from None

    return Importer


def _import(model, shapes, dtypes, steps=None):
    """TVM's ONNX import (what its ``from_onnx`` does for a checked model), with its node table
    recorded: ``(module, [(variable name, ONNX node name)])``, the node names that
    :mod:`relax_vk.core.provenance` follows to the kernels."""
    from .op_names import RecordingTable

    _Importer = _importer_class()

    node_of = {out: node.name or node.output[0] for node in model.graph.node for out in node.output if out}
    opset = next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    # (an input with run-time dims is read off the model: its dim_params become tirx.Vars of those names)
    static = {k: v for k, v in shapes.items() if not any(isinstance(g, str) for g in v)}
    if steps:  # a stepped dim is imported over its quotient (relax_vk.core.dims): give every symbolic shape here
        from tvm import tirx

        var = {}

        def axis(g):
            if isinstance(g, int):
                return g
            if g not in var:
                var[g] = tirx.Var(quotient_name(g, steps[g]) if g in steps else g, "int64")
            return steps[g] * var[g] if g in steps else var[g]

        static.update({k: [axis(g) for g in v] for k, v in shapes.items()})
    importer = _Importer(static, dtypes, keep_params_in_input=False, sanitize=True)
    importer._nodes = table = RecordingTable(node_of.get)
    return importer.from_onnx(model.graph, opset), table.made_by
