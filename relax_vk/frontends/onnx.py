"""ONNX front door: ONNX models as they come.

Real exports have symbolic input dimensions (``dim_param``, ``-1`` or unset) and shape-computing
subgraphs (``Shape -> Gather/Slice -> Concat -> Reshape``, computed pad widths) that TVM's ONNX
frontend cannot import ("Reshape requires the input new shape to be Shape"). :func:`from_onnx`:

1. fixes every input dimension: the model's own static ones, else ``input_shapes`` (``--input-shape
   NAME=1,3,224,224`` on the command line); a dimension left symbolic is a clear error naming the
   input and suggesting the flag;
2. folds the shape subgraphs away with onnxslim (constant folding with shape inference: with
   every input static, each ``Shape`` is a constant; it also folds batch norms into convs).
   Measured on the fuzzer's ONNX exports and the PP-OCR models: onnxscript's optimizer, already a
   dependency, leaves the computed pad widths of opset >= 11 ``Pad`` unfolded (TVM: "Dynamic pads
   are not supported": 36 of 73 exports failed); onnxsim and onnxslim fold them all, onnxsim needs
   every output to carry a shape (exports with symbolic outputs fail) and is a compiled extension,
   onnxslim is pure Python on onnx alone. A model the optimizer cannot process is imported as is;
   then ``Resize`` nodes with an empty ``scales`` beside ``sizes`` (what exporters write) lose the
   empty input, which TVM refuses ("Only one of scales and sizes");
3. imports with TVM's frontend, then raises TOPI binary kernels back to Relax ops
   (:class:`RaisePrebuiltBinary`, so ``Clip`` packs). An op TVM cannot convert is an error naming
   the op type and the nodes that use it.
"""

from __future__ import annotations

import os
from typing import Dict, List, Mapping, Optional, Sequence

import tvm

from ..core.errors import UnsupportedError
from ..core.extras import require
from .errors import ModelLoadError
from .raise_prebuilt_binary import RaisePrebuiltBinary

InputShapes = Mapping[str, Sequence[int]]


def parse_input_shape(text: str) -> tuple:
    """``"NAME=1,3,224,224"`` -> ``("NAME", (1, 3, 224, 224))`` (the ``--input-shape`` syntax)."""
    name, sep, dims = text.rpartition("=")
    try:
        shape = tuple(int(d) for d in dims.split(",") if d.strip())
    except ValueError:
        shape = ()
    if not sep or not name or not shape or any(d < 1 for d in shape):
        raise UnsupportedError(f"--input-shape {text!r}: expected NAME=D0,D1,... with positive integers, e.g. x=1,3,224,224")
    return name, shape


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


def _graph_inputs(model) -> list:
    initializers = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


def fix_input_shapes(model, input_shapes: Optional[InputShapes], where: str) -> Dict[str, tuple]:
    """Write static shapes into ``model``'s inputs (in place); returns ``{name: shape}``."""
    input_shapes = dict(input_shapes or {})
    inputs = _graph_inputs(model)
    names = [i.name for i in inputs]
    unknown = sorted(set(input_shapes) - set(names))
    if unknown:
        raise UnsupportedError(f"{where}: --input-shape names {', '.join(map(repr, unknown))}, but the model's inputs are {', '.join(map(repr, names))}")
    shapes: Dict[str, tuple] = {}
    for inp in inputs:
        dims = list(inp.type.tensor_type.shape.dim)
        given = input_shapes.get(inp.name)
        if given is not None:
            if dims and len(dims) != len(given):
                raise UnsupportedError(f"{where}: input {inp.name!r} has rank {len(dims)}; --input-shape gives {len(given)} dimensions {list(given)}")
            for i, (d, g) in enumerate(zip(dims, given)):
                if d.HasField("dim_value") and d.dim_value > 0 and d.dim_value != g:
                    raise UnsupportedError(f"{where}: input {inp.name!r} dimension {i} is {d.dim_value} in the model; --input-shape gives {g}")
            shape = tuple(int(g) for g in given)
        else:
            symbolic = [i for i, d in enumerate(dims) if not (d.HasField("dim_value") and d.dim_value > 0)]
            if symbolic or not inp.type.tensor_type.HasField("shape"):
                shown = ",".join(str(d.dim_value) if i not in symbolic else (d.dim_param or "?") for i, d in enumerate(dims))
                example = [d.dim_value if i not in symbolic else (1 if i == 0 else 224) for i, d in enumerate(dims)]
                raise UnsupportedError(
                    f"{where}: input {inp.name!r} has symbolic dimensions [{shown}] (dims {symbolic}); relax_vk compiles static "
                    f"shapes: give them with --input-shape {inp.name}={','.join(map(str, example))} "
                    f"(Python: input_shapes={{{inp.name!r}: {tuple(example)}}})"
                )
            shape = tuple(int(d.dim_value) for d in dims)
        shapes[inp.name] = shape
        inp.type.tensor_type.shape.Clear()
        for g in shape:
            inp.type.tensor_type.shape.dim.add().dim_value = g
    # outputs and intermediate annotations may carry the old symbolic dims: shape inference redoes them
    for out in model.graph.output:
        out.type.tensor_type.ClearField("shape")
    del model.graph.value_info[:]
    return shapes


def fold_shape_subgraphs(model):
    """``model`` with its shape computations folded into constants (onnxslim)."""
    onnxslim = require("onnxslim", "onnx")
    try:
        return onnxslim.slim(model)
    except Exception:  # an optimizer failure must not stop an import TVM may still manage
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


def _unsupported_ops(model) -> Dict[str, List[str]]:
    """Op types TVM's ONNX frontend has no converter for -> the nodes that use them."""
    from tvm.relax.frontend.onnx import onnx_frontend

    table = onnx_frontend._get_convert_map()
    missing: Dict[str, List[str]] = {}
    for node in model.graph.node:
        if node.op_type not in table or (node.domain not in ("", "ai.onnx")):
            missing.setdefault(f"{node.domain + '::' if node.domain else ''}{node.op_type}", []).append(node.name or node.output[0])
    return missing


def from_onnx(path_or_model, input_shapes: Optional[InputShapes] = None) -> tvm.IRModule:
    """Relax module of an ONNX model (a path or an ``onnx.ModelProto``; see the module docstring)."""
    model, where = _load(path_or_model)
    shapes = fix_input_shapes(model, input_shapes, where)
    model = fold_shape_subgraphs(model)
    drop_empty_resize_scales(model)
    from onnx import helper

    dtypes = {i.name: str(helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)) for i in _graph_inputs(model)}
    try:
        mod, made_by = _import(model, shapes, dtypes)
    except Exception as err:
        missing = _unsupported_ops(model)
        if missing:
            listed = "; ".join(f"{op} (node {', '.join(nodes[:3])}{', ...' if len(nodes) > 3 else ''})" for op, nodes in sorted(missing.items()))
            raise UnsupportedError(f"{where}: TVM's ONNX frontend cannot convert {listed}") from None
        raise ModelLoadError(f"{where}: TVM's ONNX frontend failed: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}") from None
    from ..tools.provenance import record_model_ops

    return record_model_ops(RaisePrebuiltBinary()(mod), made_by)


def _import(model, shapes, dtypes):
    """TVM's ONNX import (what its ``from_onnx`` does for a checked model), with its node table
    recorded: ``(module, [(variable name, ONNX node name)])``, the node names that
    :mod:`relax_vk.tools.provenance` follows to the kernels."""
    from tvm.relax.frontend.onnx.onnx_frontend import ONNXGraphImporter

    from .op_names import RecordingTable

    node_of = {out: node.name or node.output[0] for node in model.graph.node for out in node.output if out}
    opset = next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    importer = ONNXGraphImporter(shapes, dtypes, keep_params_in_input=False, sanitize=True)
    importer._nodes = table = RecordingTable(node_of.get)
    return importer.from_onnx(model.graph, opset), table.made_by
