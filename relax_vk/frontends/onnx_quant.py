"""Quantized ONNX models as onnxruntime's tools write them, rewritten into what TVM imports.

:func:`rewrite_quantized` runs in the ONNX front door before the shape folding. It rewrites, in
place and in the model's own node order, every quantized form of ``onnxruntime.quantization`` into
the QDQ form TVM's importer converts (``DequantizeLinear`` of constant weights, float ops), and
then removes every int8/uint8 *activation* tensor:

* **QOperator** (``quantize_static(quant_format=QOperator)``): ``QLinearConv``, ``QLinearMatMul``
  and com.microsoft's ``QGemm``, ``QLinearAdd``, ``QLinearMul``, ``QLinearGlobalAveragePool``,
  ``QLinearAveragePool``, ``QLinearConcat``, ``QLinearLeakyRelu``, ``QLinearSigmoid``,
  ``QLinearSoftmax`` and ``QLinearWhere`` each become ``DequantizeLinear`` of their quantized
  inputs, the float op, and ``QuantizeLinear`` of the result with the output's scale and zero
  point. A bias (int32, scale ``x_scale * w_scale``, zero point 0) becomes ``DequantizeLinear``
  with that scale (per output channel when the weight is). Per-channel weights keep their axis.
* **int8 data movement** (what QOperator models do to quantized tensors between QLinear ops:
  ``MaxPool``, ``Reshape``, ``Flatten``, ``Transpose``, ``Squeeze``, ``Unsqueeze``, ``Slice``,
  ``Split``, ``Gather``, ``Pad``, ``Resize``, ``Identity``, ``ArgMax``, ...) on a tensor of known
  per-tensor scale and zero point runs on its dequantized float values and is quantized again with
  the same parameters: for moves and max the values are the same grid values, so
  ``Q(op(DQ(t))) == op(t)`` exactly, and readers that dequantize with those parameters read the
  float values as they are (no second fake quantization). ``Pad`` pads with its dequantized pad
  value (absent: the integer 0, i.e. ``-zp * s``); an int8 ``Resize`` in linear mode interpolates
  in float and is quantized again, within one step of onnxruntime's integer kernel.
* **dynamic** (``quantize_dynamic``): ``DynamicQuantizeLinear`` becomes float ops computing
  onnxruntime's scale (1 when the tensor is all zeros), zero point and quantized values (floats
  holding the integers 0..255), and ``ConvInteger`` / ``MatMulInteger`` become a float ``Conv`` /
  ``MatMul`` of ``(x - x_zp)`` and ``DequantizeLinear(w, 1, w_zp)`` (int8 weights stay int8),
  cast to int32 as the op defines. Exactness: every operand is an integer of magnitude at most
  255, so every product is an integer below 2**16 and the float32 sums are exact while every
  partial sum stays below 2**24 (guaranteed for reductions of up to 2**24 / 255**2 = 258 terms,
  and in practice far beyond, since operands are seldom all at the range's ends). Past 2**24 a sum
  is rounded to float32's 24-bit precision (relative error ~6e-8 per addition, far below the
  quantization step); onnxruntime's int32 sums are exact.
* **fake quantization**: a ``QuantizeLinear`` (per-tensor) whose every reader is a
  ``DequantizeLinear`` becomes float ops: ``q = clip(round_half_even(x / s) + zp, qmin, qmax)``
  once, and each reader ``(q - zp') * s'``: exactly the values the pair computes (ONNX's
  rounding, half to even, is kept: relax_vk legalizes ``Round`` to ``nearbyint``, where TVM's own
  legalization rounds halves away from zero). So no int8/uint8 activation tensor is left between kernels on either
  API: activations travel as float32 (4 bytes an element where onnxruntime's int8 tensors take
  1), a choice made because WGSL can neither hold nor store 8-bit values (stores would take an
  atomic per byte). A ``QuantizeLinear`` that is a graph output stays.

What stays int8 is the weights: ``DequantizeLinear`` of a constant is imported as TVM's
``relax.dequantize`` of the int8/uint8 constant, which the artifact keeps as bytes. A conv's weight
is packed as integers at compile time (:mod:`relax_vk.passes.layout.quantized_weights`) and, where
its zero points are centred, read as integers by the conv kernel itself; a ``MatMul`` / ``Gemm``
weight quantized per tensor or per output column becomes packed codes read by the matmul
(:mod:`relax_vk.frontends.quantized_matmuls`); any other reader gets a dequantize kernel at run
time. com.microsoft's ``MatMulNBits`` (4-bit blockwise
weights) is converted at import (:func:`convert_matmul_nbits`) into one kernel that decodes its
packed bytes as it multiplies: no float copy of those weights exists.

Refused with :class:`~relax_vk.core.errors.UnsupportedError` naming the node and op: blocked
``QuantizeLinear`` / ``DequantizeLinear`` (``block_size``), and the quantized transformer ops
(``QAttention``, ``QEmbedLayerNormalization``, ``DynamicQuantizeLSTM``, ...), which TVM has no
float counterpart for either.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from ..core.errors import UnsupportedError

MS = "com.microsoft"

#: com.microsoft QLinear ops of one quantized input (x, scale, zero point, then the output's
#: scale and zero point) and of two: op type -> the float op
QLINEAR_UNARY = {"QLinearGlobalAveragePool": "GlobalAveragePool", "QLinearAveragePool": "AveragePool", "QLinearLeakyRelu": "LeakyRelu",
                 "QLinearSigmoid": "Sigmoid", "QLinearSoftmax": "Softmax"}  # fmt: skip
QLINEAR_BINARY = {"QLinearAdd": "Add", "QLinearMul": "Mul"}
QOPERATOR = {"QLinearConv", "QLinearMatMul", "QGemm", "QLinearConcat", "QLinearWhere", *QLINEAR_UNARY, *QLINEAR_BINARY}
DYNAMIC = {"DynamicQuantizeLinear", "ConvInteger", "MatMulInteger"}

#: ops that only move, select or take the maximum of their first input's values: on int8 values
#: of one scale and zero point they compute on the dequantized values, quantized again
#: (op type -> indices of the outputs that carry those values)
MOVES = {
    "MaxPool": (0,), "Reshape": (0,), "Flatten": (0,), "Transpose": (0,), "Squeeze": (0,), "Unsqueeze": (0,), "Slice": (0,),
    "Gather": (0,), "GatherElements": (0,), "Identity": (0,), "Expand": (0,), "Tile": (0,), "DepthToSpace": (0,),
    "SpaceToDepth": (0,), "Pad": (0,), "Resize": (0,), "ReduceMax": (0,), "ReduceMin": (0,), "GlobalMaxPool": (0,),
    "Split": None, "ArgMax": (), "ArgMin": (), "TopK": (0,),
}  # fmt: skip

#: quantized ops with no float counterpart here
REFUSED = {"QAttention", "QEmbedLayerNormalization", "DynamicQuantizeLSTM", "QLinearConvTranspose", "QLinearReduceMean", "DynamicQuantizeMatMul",
           "MatMulInteger16", "QOrderedMatMul", "QOrderedAttention", "QOrderedLayerNormalization", "QOrderedGelu", "QOrderedLongformerAttention"}  # fmt: skip

_INT_RANGES = {2: (0, 255), 3: (-128, 127), 4: (0, 65535), 5: (-32768, 32767), 21: (0, 15), 22: (-8, 7)}  # ONNX elem type -> (qmin, qmax)


def _params(node) -> Tuple[str, str]:
    """A QuantizeLinear / DequantizeLinear node's (scale, zero point) input names ("" when absent)."""
    return node.input[1], node.input[2] if len(node.input) > 2 else ""


def _where(node) -> str:
    return f"node {node.name or node.output[0]!r} ({(node.domain + '::') if node.domain else ''}{node.op_type})"


class _Rewriter:
    """The model's graph being rewritten: fresh names, initializers, the new node list."""

    def __init__(self, model):
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.model = model
        self.graph = model.graph
        self.inits = {i.name: i for i in self.graph.initializer}
        self.constants = {n.output[0]: n for n in self.graph.node if n.op_type == "Constant" and n.output}
        self.used = {i.name for i in self.graph.input} | set(self.inits) | {o for n in self.graph.node for o in n.output}
        self.used |= {i for n in self.graph.node for i in n.input}
        self.nodes: List = []
        self.opset = max((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), default=1)
        self.qparams: Dict[str, Tuple[str, str, int]] = {}  # int8 tensor -> (scale, zero point, onnx elem type)
        self.elem: Dict[str, int] = {}  # tensor -> ONNX element type, where known
        self.integral: Dict[str, str] = {}  # int32 result of ConvInteger / MatMulInteger -> its float values
        self.on_grid: Dict[str, Tuple[str, str]] = {}  # float result of a move on dequantized values -> (scale, zero point)
        for i in list(self.graph.input) + list(self.graph.value_info) + list(self.graph.output):
            if i.type.tensor_type.elem_type:
                self.elem[i.name] = i.type.tensor_type.elem_type
        for i in self.graph.initializer:
            self.elem[i.name] = i.data_type

    def fresh(self, hint: str) -> str:
        base = f"{hint}__rvkq"
        name, k = base, 0
        while name in self.used:
            k += 1
            name = f"{base}{k}"
        self.used.add(name)
        return name

    def const(self, hint: str, value, dtype="float32") -> str:
        name = self.fresh(hint)
        tensor = self.numpy_helper.from_array(np.asarray(value, dtype), name)
        self.graph.initializer.append(tensor)
        self.inits[name] = tensor
        self.elem[name] = tensor.data_type
        return name

    def array(self, name: str) -> Optional[np.ndarray]:
        """The value of an initializer or a ``Constant`` node's output, else None."""
        if name in self.inits:
            return self.numpy_helper.to_array(self.inits[name])
        node = self.constants.get(name)
        if node is not None:
            for a in node.attribute:
                if a.name == "value":
                    return self.numpy_helper.to_array(a.t)
        return None

    def add(self, op: str, inputs, hint: str, outputs=None, n_out: int = 1, domain: str = "", **attrs):
        """Append a node; returns its output name (or names when ``n_out`` > 1 or ``outputs``)."""
        outs = list(outputs) if outputs is not None else [self.fresh(f"{hint}_{op}") for _ in range(n_out)]
        self.nodes.append(self.helper.make_node(op, list(inputs), outs, name=self.fresh(f"{hint}/{op}"), domain=domain or None, **attrs))
        return outs if (outputs is not None and len(outs) > 1) or n_out > 1 else outs[0]

    def zp_type(self, zp: str, default: int = 2) -> int:
        if zp and zp in self.elem:
            return self.elem[zp]
        return default

    def as_float(self, name: str, hint: str) -> str:
        """A float32 tensor of an integer tensor's values (an initializer converted here)."""
        value = self.array(name)
        if value is not None:
            return self.const(f"{hint}_f", value.astype("float32"))
        return self.add("Cast", [name], hint, to=1)

    # ------------------------------------------------------------ building blocks
    def reduce_all(self, op: str, x: str, hint: str) -> str:
        """``op`` over every element of ``x``, a scalar: reduced keeping the dimensions (relax_vk's
        kernels reduce into at least one output element; a reshape to one row first would make a
        packed activation pay a gather table), then reshaped."""
        part = self.add(op, [x], hint, keepdims=1)
        return self.add("Reshape", [part, self.const(f"{hint}_scalar", np.zeros(0), "int64")], hint)

    def dequantize(self, x: str, scale: str, zp: str, hint: str, axis: Optional[int] = None) -> str:
        attrs = {} if axis is None else {"axis": axis}
        return self.add("DequantizeLinear", [x, scale] + ([zp] if zp else []), hint, **attrs)

    def quantize(self, y: str, scale: str, zp: str, out: str, hint: str) -> None:
        self.add("QuantizeLinear", [y, scale] + ([zp] if zp else []), hint, outputs=[out])
        self.qparams[out] = (scale, zp, self.zp_type(zp))
        self.elem[out] = self.zp_type(zp)

    def round_half_even(self, v: str, hint: str) -> str:
        """ONNX ``Round``: halves to even, as ``QuantizeLinear`` rounds (relax_vk legalizes
        ``relax.round`` so: :func:`relax_vk.legalize.elementwise.legalize_round`)."""
        return self.add("Round", [v], hint)


# ---------------------------------------------------------------- QOperator
def _expand_qoperator(rw: _Rewriter, node) -> None:
    """A QLinear op as DequantizeLinear -> float op -> QuantizeLinear (module docstring)."""
    from onnx import helper

    ins = list(node.input) + [""] * 12
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    hint = node.name or node.output[0]
    op = node.op_type
    out = node.output[0]

    def dq(x, s, z, axis=None):
        return rw.dequantize(x, s, z, hint, axis)

    if op == "QLinearConv":
        x, xs, xz, w, ws, wz, ys, yz, b = ins[:9]
        per_channel = _size(rw, ws) > 1
        xf = dq(x, xs, xz)
        wf = dq(w, ws, wz, 0 if per_channel else None)
        inputs = [xf, wf]
        if b:
            inputs.append(dq(b, _product_scale(rw, xs, ws, hint), "", 0))
        y = rw.add("Conv", inputs, hint, **attrs)
        rw.quantize(y, ys, yz, out, hint)
    elif op == "QLinearMatMul":
        a, as_, az, b, bs, bz, ys, yz = ins[:8]
        bf = dq(b, bs, bz, -1 if _size(rw, bs) > 1 else None)
        y = rw.add("MatMul", [dq(a, as_, az), bf], hint)
        rw.quantize(y, ys, yz, out, hint)
    elif op == "QGemm":
        a, as_, az, b, bs, bz, c, ys, yz = ins[:9]
        trans_b = int(attrs.get("transB", 0))
        per_channel = _size(rw, bs) > 1
        inputs = [dq(a, as_, az), dq(b, bs, bz, (0 if trans_b else 1) if per_channel else None)]
        if c:  # (C is quantized at alpha * a_scale * b_scale: onnxruntime computes alpha * (A'B' + C'), C' at a_scale * b_scale)
            alpha = float(attrs.get("alpha", 1.0))
            inputs.append(dq(c, _product_scale(rw, as_, bs, hint, alpha), "", 0 if per_channel else None))
        gemm = {k: v for k, v in attrs.items() if k in ("alpha", "transA", "transB")}
        y = rw.add("Gemm", inputs, hint, **gemm)
        if ys:
            rw.quantize(y, ys, yz, out, hint)
        else:  # (no output scale: QGemm's output is float)
            rw.add("Identity", [y], hint, outputs=[out])
    elif op in QLINEAR_BINARY:
        a, as_, az, b, bs, bz, ys, yz = ins[:8]
        y = rw.add(QLINEAR_BINARY[op], [dq(a, as_, az), dq(b, bs, bz)], hint)
        rw.quantize(y, ys, yz, out, hint)
    elif op in QLINEAR_UNARY:
        x, xs, xz, ys, yz = ins[:5]
        float_op = QLINEAR_UNARY[op]
        kept = {k: v for k, v in attrs.items() if k not in ("channels_last", "opset")}
        xf = dq(x, xs, xz)
        if int(attrs.get("channels_last", 0)):
            raise UnsupportedError(f"{_where(node)}: channels_last=1 is not supported (NCHW quantized pooling only)")
        if float_op == "Softmax" and int(attrs.get("opset", 13)) < 13 and rw.opset >= 13:
            # Softmax before opset 13 normalises over the flattened axes from `axis` on
            axis = int(attrs.get("axis", 1))
            flat = rw.add("Softmax", [rw.add("Flatten", [xf], hint, axis=axis)], hint, axis=-1)
            y = rw.add("Reshape", [flat, rw.add("Shape", [xf], hint)], hint)
        else:
            y = rw.add(float_op, [xf], hint, **kept)
        rw.quantize(y, ys, yz, out, hint)
    elif op == "QLinearConcat":
        ys, yz = ins[0], ins[1]
        parts = list(node.input[2:])
        floats = [dq(parts[i], parts[i + 1], parts[i + 2]) for i in range(0, len(parts), 3)]
        y = rw.add("Concat", floats, hint, axis=int(attrs["axis"]))
        rw.quantize(y, ys, yz, out, hint)
    elif op == "QLinearWhere":
        cond, x, xs, xz, yv, yvs, yvz, zs, zz = ins[:9]
        y = rw.add("Where", [cond, dq(x, xs, xz), dq(yv, yvs, yvz)], hint)
        rw.quantize(y, zs, zz, out, hint)
    else:  # pragma: no cover (QOPERATOR lists the ops above)
        raise UnsupportedError(f"{_where(node)}: no rewrite")


def _size(rw: _Rewriter, name: str) -> int:
    value = rw.array(name) if name else None
    return 1 if value is None else int(value.size)


def _is_scalar(rw: _Rewriter, name: str) -> bool:
    """Whether ``name`` is a constant of one value (a per-tensor scale or zero point)."""
    value = rw.array(name) if name else None
    return value is not None and value.size == 1


def _product_scale(rw: _Rewriter, a: str, b: str, hint: str, factor: float = 1.0) -> str:
    """A bias's scale ``a * b`` (one value per channel when ``b`` has one), 1-D or scalar, times
    ``factor`` (QGemm's ``alpha``)."""
    va, vb = rw.array(a), rw.array(b)
    if va is not None and vb is not None:
        prod = (va.astype("float32") * vb.astype("float32") * np.float32(factor)).astype("float32")
        return rw.const(f"{hint}_bias_scale", prod.reshape(-1) if prod.size > 1 else prod.reshape(()))
    prod = rw.add("Mul", [a, b], hint)
    return prod if factor == 1.0 else rw.add("Mul", [prod, rw.const(f"{hint}_alpha", np.float32(factor))], hint)


# ---------------------------------------------------------------- dynamic
def _expand_dynamic(rw: _Rewriter, node, dynamic: Dict[str, Tuple[str, str]]) -> None:
    """``DynamicQuantizeLinear`` and ``ConvInteger`` / ``MatMulInteger`` in float (module
    docstring). ``dynamic`` maps a DynamicQuantizeLinear's uint8 outputs to their float values."""
    from onnx import helper

    hint = node.name or node.output[0]
    ins = list(node.input) + [""] * 4
    if node.op_type == "DynamicQuantizeLinear":
        x = ins[0]
        zero = rw.const(f"{hint}_zero", 0.0)
        # (Clip, not Min/Max with 0: TVM imports a two-input Min of scalars as a stack it cannot fold)
        lo = rw.add("Clip", [rw.reduce_all("ReduceMin", x, hint), "", zero], hint)
        hi = rw.add("Clip", [rw.reduce_all("ReduceMax", x, hint), zero], hint)
        raw = rw.add("Div", [rw.add("Sub", [hi, lo], hint), rw.const(f"{hint}_255", 255.0)], hint)
        one = rw.const(f"{hint}_one", 1.0)
        q_out, s_out, z_out = list(node.output) + [""] * (3 - len(node.output))
        scale = rw.add("Where", [rw.add("Equal", [raw, zero], hint), one, raw], hint, outputs=[s_out] if s_out else None)
        qmax = rw.const(f"{hint}_qmax", 255.0)
        zp_f = rw.round_half_even(rw.add("Clip", [rw.add("Div", [rw.add("Neg", [lo], hint), scale], hint), zero, qmax], hint), hint)
        q_f = rw.add("Clip", [rw.add("Add", [rw.round_half_even(rw.add("Div", [x, scale], hint), hint), zp_f], hint), zero, qmax], hint)
        dynamic[q_out], dynamic[z_out] = (q_f, "q"), (zp_f, "zp")
        # the uint8 outputs, for readers other than ConvInteger / MatMulInteger (dropped when unread)
        if q_out:
            rw.add("Cast", [q_f], hint, outputs=[q_out], to=2)
        if z_out:
            rw.add("Cast", [zp_f], hint, outputs=[z_out], to=2)
        return
    x, w, xz, wz = ins[:4]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    xf = dynamic[x][0] if x in dynamic else rw.as_float(x, hint)
    if xz:
        xf = rw.add("Sub", [xf, dynamic[xz][0] if xz in dynamic else rw.as_float(xz, hint)], hint)
    # the weight read through DequantizeLinear(w, 1, w_zp): it stays int8/uint8 in the artifact
    wz_value = rw.array(wz) if wz else None
    per = wz_value is not None and wz_value.size > 1
    ones = np.ones(wz_value.size if per else (), "float32")
    axis = (0 if node.op_type == "ConvInteger" else -1) if per else None
    if wz and per:
        wz_name = rw.const(f"{hint}_wzp", wz_value.reshape(-1), str(wz_value.dtype))
    else:
        wz_name = wz
    wf = rw.dequantize(w, rw.const(f"{hint}_unit", ones), wz_name, hint, axis)
    float_op = "Conv" if node.op_type == "ConvInteger" else "MatMul"
    y = rw.add(float_op, [xf, wf], hint, **attrs)
    rw.add("Cast", [y], hint, outputs=[node.output[0]], to=6)
    rw.integral[node.output[0]] = y


# ---------------------------------------------------------------- int8 data movement
def _hoist_move(rw: _Rewriter, node) -> bool:
    """``node`` (a :data:`MOVES` op on a quantized tensor) on the dequantized values; False when
    its data input has no known per-tensor quantization."""
    from onnx import helper

    if not node.input or node.input[0] not in rw.qparams:
        return False
    scale, zp, elem = rw.qparams[node.input[0]]
    hint = node.name or node.output[0]
    inputs = list(node.input)
    inputs[0] = rw.dequantize(inputs[0], scale, zp, hint)
    if node.op_type == "Pad":
        mode = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "mode"), b"constant")
        if mode in (b"constant", "constant"):
            # the pad value is a quantized scalar (absent: the integer 0, which is not the float 0
            # unless the zero point is 0): its dequantized value
            while len(inputs) < 3:
                inputs.append("")
            if not inputs[2]:
                inputs[2] = rw.const(f"{hint}_pad_value", 0, helper.tensor_dtype_to_np_dtype(elem))
            inputs[2] = rw.dequantize(inputs[2], scale, zp, hint)
    carried = MOVES[node.op_type]
    carried = range(len(node.output)) if carried is None else carried
    outputs = [rw.fresh(f"{o}_float") if i in carried and o else o for i, o in enumerate(node.output)]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    rw.add(node.op_type, inputs, hint, outputs=outputs, domain=node.domain, **attrs)
    exact = node.op_type not in ("Resize",)  # (a resize may interpolate between grid values)
    for i in carried:
        if node.output[i]:
            rw.quantize(outputs[i], scale, zp, node.output[i], hint)
            if exact:
                rw.on_grid[outputs[i]] = (scale, zp)
    return True


# ---------------------------------------------------------------- fake quantization
def _fake_quantize(rw: _Rewriter, nodes: List, outputs: set) -> List:
    """Per-tensor QuantizeLinear -> DequantizeLinear readers as float ops (module docstring)."""
    readers: Dict[str, List] = {}
    for n in nodes:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    fused: Dict[int, str] = {}  # id(Q node) -> its q values in float
    dropped = set()
    for n in nodes:
        if n.op_type != "QuantizeLinear" or n.domain not in ("", "ai.onnx"):
            continue
        out = n.output[0]
        uses = readers.get(out, [])
        if out in outputs or not uses or any(u.op_type != "DequantizeLinear" or u.input[0] != out for u in uses):
            continue
        zp = _params(n)[1]
        if not _is_scalar(rw, n.input[1]) or (zp and not _is_scalar(rw, zp)) or any(
            not _is_scalar(rw, _params(u)[0]) or (_params(u)[1] and not _is_scalar(rw, _params(u)[1])) for u in uses
        ):
            continue  # (per-channel activations: left to TVM's quantize/dequantize)
        fused[id(n)] = out
        dropped.update(id(u) for u in uses)
    if not fused:
        return nodes
    result = []
    values: Dict[str, str] = {}
    on_grid = set()  # Q nodes whose input already holds values of their grid, read back with the same parameters
    for n in nodes:
        if id(n) in fused and rw.on_grid.get(n.input[0]) == _params(n):
            if all(_params(u) == _params(n) for u in readers[n.output[0]]):
                on_grid.add(id(n))
    grid_outputs = {n.output[0] for n in nodes if id(n) in on_grid}
    for n in nodes:
        if id(n) in on_grid:
            values[n.output[0]] = n.input[0]  # DQ(Q(v)) == v for the values a move left on the grid
        elif id(n) in fused:
            rw.nodes = []
            hint = n.name or n.output[0]
            x, (s, zp) = n.input[0], _params(n)
            qmin, qmax = _INT_RANGES.get(rw.zp_type(zp), (0, 255))
            v = rw.round_half_even(rw.add("Div", [x, s], hint), hint)
            if zp:
                v = rw.add("Add", [v, rw.as_float(zp, hint)], hint)
            values[n.output[0]] = rw.add("Clip", [v, rw.const(f"{hint}_qmin", float(qmin)), rw.const(f"{hint}_qmax", float(qmax))], hint)
            result.extend(rw.nodes)
        elif id(n) in dropped and n.input[0] in grid_outputs:
            result.append(rw.helper.make_node("Identity", [values[n.input[0]]], [n.output[0]], name=rw.fresh(f"{n.name or n.output[0]}/Identity")))
        elif id(n) in dropped:
            rw.nodes = []
            hint = n.name or n.output[0]
            v, zp = values[n.input[0]], _params(n)[1]
            if zp:
                v = rw.add("Sub", [v, rw.as_float(zp, hint)], hint)
            rw.add("Mul", [v, n.input[1]], hint, outputs=[n.output[0]])
            result.extend(rw.nodes)
        else:
            result.append(n)
    return result


# ---------------------------------------------------------------- the pass
def _check(node) -> None:
    from onnx import helper

    if node.op_type in REFUSED:
        raise UnsupportedError(f"{_where(node)}: quantized {node.op_type} is not supported (no float rewrite); quantize the model "
                               "without it (e.g. op_types_to_quantize without attention / LSTM)")  # fmt: skip
    if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if int(attrs.get("block_size", 0)):
            raise UnsupportedError(
                f"{_where(node)}: blocked quantization (block_size={attrs['block_size']}) is not supported; "
                "quantize per tensor or per channel (4-bit blockwise weights: MatMulNBits is supported)"
            )


def has_quantized_ops(model) -> bool:
    names = QOPERATOR | DYNAMIC | REFUSED | {"QuantizeLinear", "DequantizeLinear"}
    return any(n.op_type in names for n in model.graph.node)


def widen_int4_weights(model, where: str = "ONNX model") -> int:
    """INT4 / UINT4 initializers that only ``DequantizeLinear`` reads (QDQ 4-bit weights and their
    zero points, as ``quantize_static(weight_type=QuantType.QInt4)`` writes them) rewritten in place
    as INT8 / UINT8 of the same values: the dequantized weights are exactly the same, and the model
    takes the 8-bit QDQ path (a byte a weight). TVM's importer failed on them ("TensorCopyFromBytes:
    size mismatch"). An int4 tensor another op reads (a QuantizeLinear to int4 activations, which
    saturate at int4's range) is refused by node. Returns how many were widened."""
    from onnx import TensorProto, numpy_helper

    narrow = {TensorProto.INT4: np.int8, TensorProto.UINT4: np.uint8}
    inits = {t.name: t for t in model.graph.initializer if t.data_type in narrow}
    if not inits:
        return 0
    for node in model.graph.node:
        for name in node.input:
            if name in inits and node.op_type == "GatherBlockQuantized":
                raise UnsupportedError(f"{where}: node {node.name or node.output[0]!r} (GatherBlockQuantized): a blockwise-quantized embedding "
                                       f"table ({name!r}) is not supported; quantize the model's MatMuls only (MatMulNBits)")  # fmt: skip
            if name in inits and node.op_type != "DequantizeLinear":
                raise UnsupportedError(f"{where}: node {node.name or node.output[0]!r} ({node.op_type}) reads the 4-bit tensor {name!r}: "
                                       "4-bit weights through DequantizeLinear are supported, 4-bit activations are not")  # fmt: skip
    for name, t in inits.items():
        values = numpy_helper.to_array(t).astype(narrow[t.data_type])
        t.CopyFrom(numpy_helper.from_array(values, name))
    return len(inits)


def rewrite_quantized(model) -> int:
    """Rewrite ``model``'s quantized forms in place (module docstring); returns how many nodes were
    rewritten (0: no quantized op, the model is unchanged)."""
    if not has_quantized_ops(model):
        return 0
    rw = _Rewriter(model)
    outputs = {o.name for o in model.graph.output}
    new_nodes: List = []
    dynamic: Dict[str, Tuple[str, str]] = {}
    rewritten = 0
    for node in model.graph.node:
        _check(node)
        rw.nodes = []
        if node.op_type in ("QuantizeLinear", "DequantizeLinear") and node.domain == MS:
            node.domain = ""  # (onnxruntime's contrib Q/DQ: the standard op for 8-bit types)
        if node.op_type in QOPERATOR and (node.domain == MS or node.op_type in ("QLinearConv", "QLinearMatMul")):
            _expand_qoperator(rw, node)
        elif node.op_type in DYNAMIC and node.domain in ("", "ai.onnx"):
            _expand_dynamic(rw, node, dynamic)
        elif node.op_type in MOVES and node.domain in ("", "ai.onnx") and _hoist_move(rw, node):
            pass
        else:
            if node.op_type == "QuantizeLinear" and node.domain in ("", "ai.onnx") and len(node.input) > 1:
                scale, zp = _params(node)
                if _is_scalar(rw, scale):
                    rw.qparams[node.output[0]] = (scale, zp, rw.zp_type(zp))
            new_nodes.append(node)
            continue
        rewritten += 1
        new_nodes.extend(rw.nodes)
    new_nodes = _fake_quantize(rw, new_nodes, outputs)
    new_nodes = _fold_scalar_dequantizes(rw, new_nodes, outputs)
    for n in new_nodes:  # Cast(int32 -> float) of an integer op's result: its float values as they are
        if n.op_type == "Cast" and n.input and n.input[0] in rw.integral and any(a.name == "to" and a.i == 1 for a in n.attribute):
            n.op_type, n.input[0] = "Identity", rw.integral[n.input[0]]
            del n.attribute[:]
    new_nodes = _drop_unread(new_nodes, outputs)
    del model.graph.node[:]
    model.graph.node.extend(new_nodes)
    _drop_unused_initializers(model)
    return max(rewritten, 1)


def _fold_scalar_dequantizes(rw: _Rewriter, nodes: List, outputs: set) -> List:
    """Each ``DequantizeLinear`` of one constant value (a ``Pad``'s quantized pad value, in the
    QDQ form and as the QOperator rewrite carries it) as the float constant it computes: TVM's
    converters read such an operand (``Pad``'s ``constant_value``) as a constant, not a tensor.
    Larger constants (weights) stay quantized."""
    kept = []
    for n in nodes:
        if n.op_type == "DequantizeLinear" and n.domain in ("", "ai.onnx") and n.output[0] not in outputs:
            x, scale = rw.array(n.input[0]), rw.array(n.input[1]) if len(n.input) > 1 else None
            zp = rw.array(n.input[2]) if len(n.input) > 2 and n.input[2] else np.zeros((), np.int64)
            if x is not None and x.size == 1 and scale is not None and scale.size == 1 and zp is not None and zp.size == 1:
                value = ((x.astype(np.float64) - zp.astype(np.float64).reshape(())) * scale.astype(np.float64).reshape(())).astype(scale.dtype)
                tensor = rw.numpy_helper.from_array(value, n.output[0])
                rw.graph.initializer.append(tensor)
                rw.inits[n.output[0]] = tensor
                continue
        kept.append(n)
    return kept


def _drop_unread(nodes: List, outputs: set) -> List:
    """``nodes`` without those whose outputs nobody reads (the uint8 casts of a dynamic
    quantization, fused Q nodes), repeatedly."""
    while True:
        read = set(outputs) | {i for n in nodes for i in n.input}
        kept = [n for n in nodes if any(o in read for o in n.output if o)]
        if len(kept) == len(nodes):
            return kept
        nodes = kept


def _drop_unused_initializers(model) -> None:
    read = {i for n in model.graph.node for i in n.input} | {o.name for o in model.graph.output}
    kept = [i for i in model.graph.initializer if i.name in read]
    if len(kept) != len(model.graph.initializer):
        del model.graph.initializer[:]
        model.graph.initializer.extend(kept)


# ---------------------------------------------------------------- MatMulNBits
def convert_matmul_nbits(bb, inputs, attrs):
    """com.microsoft ``MatMulNBits`` as Relax: ``A @ W (+ bias)`` as one kernel that reads ``W``
    (K x N) from the packed blocks as it multiplies (:mod:`relax_vk.frontends.blockwise`, whose
    docstring gives onnxruntime's layout): the artifact and the device keep the packed bytes
    (``bits`` per weight plus a scale per block) and no float copy of the weight exists; a bias and
    what follows fuse after it. ``scales`` may be ``[N * k_blocks]`` or ``[N, k_blocks]``,
    ``zero_points`` packed uint8 or of the scales' type. ``g_idx`` (act-order) is refused unless it
    is the blocks in order (``k // block_size``, what its absence means).
    ``accuracy_level`` only lets onnxruntime's CPU kernel quantize ``A`` to int8 on the fly (level
    4); this computes in float32, which is what levels 0-3 mean and within onnxruntime's own
    rounding of level 4.
    """
    from tvm import relax

    from tvm.ir import GenericConst

    from .blockwise import BlockwiseFormat, as_words

    a, b = inputs[0], inputs[1]
    if isinstance(b, GenericConst) and str(b.ty.dtype) == "uint8" and len(b.ty.shape.values) == 3:
        b = relax.const(as_words(b.value.numpy()))  # (the kernel reads a block's bytes as 32-bit words)
    scales = inputs[2]
    zero_points = inputs[3] if len(inputs) > 3 else None
    g_idx = inputs[4] if len(inputs) > 4 else None
    bias = inputs[5] if len(inputs) > 5 else None
    K, N, bits, block = int(attrs["K"]), int(attrs["N"]), int(attrs.get("bits", 4)), int(attrs["block_size"])
    if g_idx is not None:  # (the blocks in order, k // block_size, are what no g_idx means)
        in_order = isinstance(g_idx, GenericConst) and np.array_equal(g_idx.value.numpy().reshape(-1), np.arange(K) // block)
        if not in_order:
            raise UnsupportedError("MatMulNBits with g_idx (act-order: blocks of reordered rows) is not supported")
    zp_kind = None if zero_points is None else "float" if str(zero_points.ty.dtype).startswith("float") else "packed"
    try:
        fmt = BlockwiseFormat(K, N, bits, block, zp_kind)
    except ValueError as err:
        raise UnsupportedError(f"MatMulNBits with {err}") from None
    if len(scales.ty.shape.values) != 1:
        scales = bb.emit(relax.op.reshape(scales, (N * fmt.k_blocks,)))
    if zero_points is not None and len(zero_points.ty.shape.values) != 1:
        zp_len = N * fmt.k_blocks if zp_kind == "float" else N * fmt.zp_row
        zero_points = bb.emit(relax.op.reshape(zero_points, (zp_len,)))
    if str(a.ty.dtype) != "float32":
        raise UnsupportedError(f"MatMulNBits on {a.ty.dtype} activations: float32 only")
    args = [a, b, scales] + ([zero_points] if zero_points is not None else [])
    y = bb.call_te(lambda A, B, S, *Z: fmt.matmul(A, B, S, Z[0] if Z else None), *args, primfunc_name_hint="matmul_nbits")
    if bias is not None:
        y = relax.op.add(bb.emit(y), bias)
    return y


#: converters of ops TVM's importer lacks, by op type (relax_vk's importer consults them first)
CONVERTERS = {"MatMulNBits": convert_matmul_nbits}
