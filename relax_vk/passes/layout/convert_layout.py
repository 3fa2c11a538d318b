"""ConvertToPackedLayout: pack NCHW networks into NCHW4c (weights OIHW4o) end to end.

Requires: a Relax module in NCHW (run ``DecomposeOpsForInference`` first so batch norm is
elementwise). Only dataflow blocks are converted.

Guarantees:

* every static float conv2d in NCHW/OIHW becomes an NCHW4c/OIHW4o conv2d: plain, depthwise
  (groups = channels) and grouped convs. Channel counts that are not a multiple of 4 are zero-padded
  (an RGB stem's 3 input channels, a 2-channel head): the weight gets zero rows/columns for the
  padding, so padding lanes never reach a real channel;
* the packed layout then flows through every op that has a packed form: unary elementwise ops
  (relu, clip/ReLU6, tanh, sigmoid, gelu, silu, ...), binary broadcast ops (per-channel biases
  ``(C,1,1)``/``(1,C,1,1)`` are packed, channel-broadcast and scalar operands broadcast in 5-D),
  concat and split (along channels when the boundaries are multiples of 4, or along H/W), pad
  (spatial), max/avg/adaptive-avg pool2d, resize2d, mean/sum/max/min over H/W (with
  keepdims, or over both without: global pooling) and over the channels of an unpadded tensor
  (channels-first LayerNorm statistics, a plain (N, 1, H, W) result);
* ``layout_transform`` (and a ``strided_slice`` dropping channel padding) remains only where a
  packed tensor meets an op without a packed form, or leaves the dataflow block (model outputs),
  and packing transforms only where a model input or NCHW tensor meets a packed op. A tensor is
  packed or unpacked at most once per block.

Padding lanes hold values that are finite, though not always zero: an op is only applied to a
padded tensor when it keeps finite lanes finite (``log``/``rsqrt``/``divide`` by a padded tensor are
not; those ops fall back to NCHW). Since padded weight entries are zero, finite padding lanes
contribute nothing to a following conv.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

import tvm
import tvm_ffi
from tvm import relax
from tvm.ir.expr import GenericConst

from .token_layout import REARRANGE, TokenOps, Tokens
from .quantized_weights import centred_weight, dequantized_constant, emit_dequantize, output_scales, packed_dequantize
from .packing import LANES, REDUCERS, _ceil4, _out_dtype, _pack_map, _unpack_map, _dtype, _float, _shape, pack_array, pack_weight_array  # noqa: F401  (re-exported)

# name -> (zero_preserving: f(0) == 0, finite_total: finite inputs give finite outputs)
UNARY = {
    "relax.nn.relu": (True, True),
    "relax.nn.relu6": (True, True),
    "relax.nn.leakyrelu": (True, True),
    "relax.nn.gelu": (True, True),
    "relax.nn.gelu_tanh": (True, True),
    "relax.nn.silu": (True, True),
    "relax.tanh": (True, True),
    "relax.sigmoid": (False, True),
    "relax.negative": (True, True),
    "relax.abs": (True, True),
    "relax.erf": (True, True),
    "relax.round": (True, True),
    "relax.floor": (True, True),
    "relax.ceil": (True, True),
    "relax.sin": (True, True),
    "relax.cos": (False, True),
    "relax.exp": (False, False),
    "relax.sqrt": (True, False),
    "relax.square": (True, False),
    "relax.log": (False, False),
    "relax.rsqrt": (False, False),
    "relax.clip": (None, True),  # zero-preserving iff min <= 0 <= max
}
BINARY = {"relax.add", "relax.subtract", "relax.multiply", "relax.divide", "relax.maximum", "relax.minimum", "relax.power"}
BINARY_SAFE_ON_PADDING = {"relax.add", "relax.subtract", "relax.multiply", "relax.maximum", "relax.minimum"}
POOLS = {"relax.nn.max_pool2d", "relax.nn.avg_pool2d", "relax.nn.adaptive_avg_pool2d"}
REDUCE = set(REDUCERS)
#: ops the token layout converts from NCHW4c maps or plain tensors (``token_layout``)
TOKEN_ENTRIES = REARRANGE | {"relax.matmul", "relax.nn.layer_norm", "relax.split"}


@dataclass
class Packed:
    """A packed (N, C/4, H, W, 4) stand-in for a 4-D tensor with ``channels`` real channels whose
    original (logical) layout is ``layout`` (NCHW, or NHWC for NHWC convs)."""

    var: relax.Var
    channels: int
    clean: bool  # padding lanes are exactly zero
    layout: str = "NCHW"

    @property
    def padded(self) -> bool:
        return self.channels % LANES != 0


def _pack_nhwc_map(n, h, w, c):
    return (n, c // LANES, h, w, c % LANES)


def _unpack_nhwc_map(n, c, h, w, b):
    return (n, h, w, c * LANES + b)


#: kernel layout -> axes that transpose it to OIHW
KERNEL_TO_OIHW = {"OIHW": None, "OHWI": (0, 3, 1, 2), "HWIO": (3, 2, 0, 1)}


def _weight_map(o, i, h, w):
    return (o // LANES, i, h, w, o % LANES)


@relax.expr_functor.mutator
class _Packer(relax.PyExprMutator, TokenOps):
    Packed, UNARY, BINARY, REDUCE = Packed, UNARY, BINARY, REDUCE

    def __init__(self, mod):
        super().__init__(mod)
        self.packed: Dict[relax.Var, Packed] = {}
        self.tokens: Dict[relax.Var, Tokens] = {}
        self.token_packs: Dict[relax.Var, Tokens] = {}  # plain tensors packed as tokens
        self.bound: Dict[relax.Var, relax.Expr] = {}  # every binding's original value
        self.packed_tuples: Dict[relax.Var, List[Packed]] = {}
        self.literal_tuples: Dict[relax.Var, relax.Tuple] = {}  # tuple literals holding packed fields
        self.materialized: set = set()
        self.plain_packed: set = set()  # variables with a plain value of their own, packed too: never unpacked back
        self.pending: List[relax.Var] = []
        self.in_dataflow = False

    # ------------------------------------------------------------ blocks
    def visit_dataflow_block_(self, block):
        self.builder_._begin_dataflow_block()
        self.in_dataflow = True
        self.packed, self.packed_tuples, self.materialized, self.pending, self.plain_packed = {}, {}, set(), [], set()
        self.literal_tuples, self.tokens, self.token_packs = {}, {}, {}
        for binding in block.bindings:
            self.visit_binding(binding)
        for var in self.pending:  # block outputs leave in NCHW
            if var not in self.materialized:
                self._materialize(var)
        self.in_dataflow = False
        return self.builder_._end_block()

    def visit_var_binding_(self, binding):
        if not self.in_dataflow:
            return super().visit_var_binding_(binding)
        var, value = binding.var, binding.value
        self.bound[var] = value
        result = None
        if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
            result = self._convert(value)
        elif isinstance(value, relax.TupleGetItem) and value.tuple_value in self.packed_tuples:
            result = self.packed_tuples[value.tuple_value][value.index]
        elif isinstance(value, relax.TupleGetItem) and value.tuple_value in self.literal_tuples:
            field = self.literal_tuples[value.tuple_value].fields[value.index]
            result = self._source(field)
            if result is None:  # a plain field: bind it under the new name
                self.set_var_remap(var, self._bind(var, self.visit_expr(field)))
                return
        elif isinstance(value, relax.Tuple) and isinstance(var, relax.DataflowVar) and any(self._source(f) is not None for f in value.fields):
            # forward packed fields to TupleGetItem users (batch norm and max-pool-with-indices
            # return tuple literals); the tuple itself is only built if something else reads it
            self.literal_tuples[var] = value
            return
        if isinstance(result, relax.Expr):  # converted to a plain (unpacked) value
            self.set_var_remap(var, self._bind(var, result))
            return
        if isinstance(result, Packed):
            self.packed[var] = result
        elif isinstance(result, Tokens):
            self.tokens[var] = result
        elif isinstance(result, list):
            self.packed_tuples[var] = result
        else:
            for used in relax.analysis.free_vars(value):
                if self._stands_in(used) and used not in self.materialized:
                    self._materialize(used)
            return super().visit_var_binding_(binding)
        if not isinstance(var, relax.DataflowVar):
            self.pending.append(var)

    def _stands_in(self, var) -> bool:
        """Whether ``var``'s binding was replaced by a packed stand-in (its plain value unbound). A
        variable packed from its plain value (a model input, a tensor an unconverted op computed)
        keeps that value: its plain uses read it, not an unpacking of the packed copy (which under
        half texels came back rounded: an input returned as an output lost its float32 bits)."""
        if var in self.plain_packed:
            return False
        return var in self.packed or var in self.packed_tuples or var in self.literal_tuples or var in self.tokens

    def _plain_use(self, var) -> None:
        # a plain use of a stand-in that no conversion claimed: unpack it first
        if self.in_dataflow and self._stands_in(var) and var not in self.materialized:
            self._materialize(var)

    def visit_var_(self, var):
        self._plain_use(var)
        return super().visit_var_(var)

    def visit_dataflow_var_(self, var):
        self._plain_use(var)
        return super().visit_dataflow_var_(var)

    # ----------------------------------------------------- pack / unpack
    def _emit(self, expr, name: str = "") -> relax.Var:
        return self.builder_.emit(expr, name)

    def _unpack_expr(self, packed: Packed) -> relax.Expr:
        nhwc = packed.layout == "NHWC"
        unpacked = relax.op.layout_transform(packed.var, _unpack_nhwc_map if nhwc else _unpack_map)
        if packed.padded:
            axis = 3 if nhwc else 1
            unpacked = relax.op.strided_slice(self._emit(unpacked), axes=[axis], begin=[0], end=[packed.channels])
        return unpacked

    def _bind(self, var: relax.Var, expr: relax.Expr) -> relax.Var:
        return self._emit(expr, var.name) if isinstance(var, relax.DataflowVar) else self.builder_.emit_output(expr, var.name)

    def _materialize(self, var: relax.Var) -> None:
        """Bind ``var``'s NCHW value (unpacking its packed stand-in) and use it from now on."""
        if var in self.literal_tuples:
            for field in self.literal_tuples[var].fields:
                if isinstance(field, relax.Var) and field in self.packed and field not in self.materialized:
                    self._materialize(field)
            new = self._bind(var, self.visit_expr(self.literal_tuples[var]))
            self.set_var_remap(var, new)
            self.materialized.add(var)
            return
        if var in self.packed_tuples:
            fields = [self._emit(self._unpack_tokens(p) if isinstance(p, Tokens) else self._unpack_expr(p)) for p in self.packed_tuples[var]]
            expr = relax.Tuple(fields)
        elif var in self.packed:
            expr = self._unpack_expr(self.packed[var])
        elif var in self.tokens:
            expr = self._unpack_tokens(self.tokens[var])
        else:
            expr = self._unpack_expr(self.packed[var])
        self.set_var_remap(var, self._bind(var, expr))
        self.materialized.add(var)

    def _pack(self, expr: relax.Expr, pad_value: float = 0.0, layout: str = "NCHW") -> Optional[Packed]:
        """The packed stand-in of a 4-D tensor in ``layout`` (packing it here if needed)."""
        if isinstance(expr, relax.Var) and expr in self.packed:
            found = self.packed[expr]
            return found if (pad_value == 0.0 or not found.padded) and found.layout == layout else None
        shape = _shape(expr)
        if shape is None or len(shape) != 4 or not _float(expr):
            return None
        caxis = 3 if layout == "NHWC" else 1
        if isinstance(expr, GenericConst):
            array = expr.value.numpy()
            array = array.transpose(0, 3, 1, 2) if layout == "NHWC" else array
            return Packed(relax.const(pack_array(array, pad_value)), shape[caxis], pad_value == 0.0, layout)
        value = self.visit_expr(expr)
        # channels that are not a multiple of 4 are padded by the packing transform itself (no
        # unpacked padded copy of the tensor; relax_vk's legalizer selects the pad value per lane)
        new = self._emit(
            relax.op.layout_transform(
                value, _pack_nhwc_map if layout == "NHWC" else _pack_map, pad_value=pad_value if shape[caxis] % LANES else None
            )
        )
        packed = Packed(new, shape[caxis], True, layout)
        if isinstance(expr, relax.Var) and pad_value == 0.0:
            if not self._stands_in(expr):  # (packed from the plain value it keeps)
                self.plain_packed.add(expr)
            self.packed[expr] = packed
        return packed

    def _source(self, expr, layout: str = "NCHW") -> Optional[Packed]:
        """The packed stand-in of ``expr``, whatever its logical layout (a token view of a
        ``[1, C, H, W]`` tensor, ``[1, H, W, C]`` for ``layout="NHWC"``, becomes an NCHW4c map)."""
        if not isinstance(expr, relax.Var):
            return None
        found = self.packed.get(expr)
        if found is None and expr in self.tokens:
            found = self._tokens_as_map(self.tokens[expr], layout)
            if found is not None:
                self.packed[expr] = found
        return found

    def _nchw_source(self, expr) -> Optional[Packed]:
        """The packed stand-in of ``expr`` when it is logically NCHW: ops whose attributes name
        axes (binary broadcasts, pools, concat, split, pad, reductions) are only rewritten then."""
        found = self._source(expr)
        return found if found is not None and found.layout == "NCHW" else None

    # ------------------------------------------------------------ ops
    def _convert(self, call: relax.Call):
        if self._touches_tokens(call):
            # an op between a map and a token view (ConvNeXt's residual around its NHWC block)
            # stays on maps, the view turned back into one; else token views stay views
            result = self._convert_packed(call) if self._touches_maps(call) else None
            result = result if result is not None else self._token_convert(call)
            if result is not None:
                return result
        result = self._convert_packed(call)
        if result is None and call.op.name in TOKEN_ENTRIES:
            result = self._token_convert(call)
        return result

    def _convert_packed(self, call: relax.Call):
        name = call.op.name
        if name == "relax.nn.conv2d":
            return self._conv2d(call)
        if name in UNARY:
            return self._unary(call)
        if name in BINARY:
            return self._binary(call)
        if name in POOLS or name == "relax.image.resize2d":
            return self._spatial(call)
        if name == "relax.concat":
            return self._concat(call)
        if name == "relax.split":
            return self._split(call)
        if name == "relax.nn.pad":
            return self._pad(call)
        if name in REDUCE:
            return self._reduce(call)
        return None

    def _conv2d(self, call):
        a = call.attrs
        data_layout, kernel_layout = str(a.data_layout), str(a.kernel_layout)
        out_layout = str(a.out_layout) or data_layout
        if data_layout not in ("NCHW", "NHWC") or out_layout != data_layout or kernel_layout not in KERNEL_TO_OIHW:
            return None
        data, weight = call.args
        dshape, wshape = _shape(data), _shape(weight)
        if dshape is None or wshape is None or not (_float(data) and _float(weight)):
            return None
        to_oihw = KERNEL_TO_OIHW[kernel_layout]
        wshape = tuple(wshape[i] for i in to_oihw) if to_oihw else wshape
        cin = dshape[3] if data_layout == "NHWC" else dshape[1]
        cout, groups = wshape[0], int(a.groups)
        depthwise = groups == cin and wshape[1] == 1 and cout == cin
        if depthwise:
            new_groups = _ceil4(cin)
        elif groups == 1:
            new_groups = 1
        elif cin % LANES == 0 and cout % LANES == 0:
            new_groups = groups
        else:
            return None
        # a packed stand-in serves a conv in either layout: the NCHW4c form is the same
        packed_data = self._source(data, data_layout) or self._pack(data, layout=data_layout)
        if packed_data is None:
            return None
        # a plain conv pads its weight's input channels with zeros; a depthwise one has one input
        # channel per group (a 1-channel conv with groups = 1 is depthwise too)
        padded_in = _ceil4(cin) if groups == 1 and not depthwise else None
        out_scales = None
        if isinstance(weight, GenericConst):
            array = weight.value.numpy()
            array = array.transpose(to_oihw) if to_oihw else array
            w = relax.const(pack_weight_array(array, padded_in))
        elif (quantized := self._packed_quantized_weight(weight, to_oihw, padded_in)) is not None:
            w, out_scales = quantized
        else:
            w = self.visit_expr(weight)
            if to_oihw:
                w = self._emit(relax.op.permute_dims(w, list(to_oihw)))
            pad_in = padded_in - cin if padded_in is not None else 0
            pad_out = _ceil4(cout) - cout
            if pad_in or pad_out:  # pad before packing: texture stores must be whole texels
                w = self._emit(relax.op.nn.pad(w, [0, pad_out, 0, pad_in, 0, 0, 0, 0]))
            w = self._emit(relax.op.layout_transform(w, _weight_map))
        out_dtype = _out_dtype(a)
        if out_scales is not None and out_dtype is None:  # (integer weights: the sums' dtype is the data's)
            out_dtype = str(packed_data.var.ty.dtype)
        conv = self._emit(relax.op.nn.conv2d(
            packed_data.var, w, a.strides, a.padding, a.dilation, new_groups, "NCHW4c", "OIHW4o", "NCHW4c", out_dtype
        ))  # fmt: skip
        if out_scales is not None:  # integer weights: each output channel's sum times its scale
            conv = self._emit(relax.op.multiply(conv, out_scales))
        return Packed(conv, cout, True, data_layout)

    def _packed_quantized_weight(self, weight, to_oihw, padded_in):
        """``(weight, output scales or None)`` for a weight bound to ``dequantize`` of integer
        constants, packed as integers now (:mod:`.quantized_weights`): where ``q - zero point``
        fits int8 (symmetric weights, uint8 ones centred on 128) the conv reads those integers and
        its sums are scaled per output channel after (``conv(x, (q - zp) * s) == conv(x, q - zp) *
        s``); else the weight dequantized in the packed layout. None for any other weight."""
        bound = self.lookup_binding(weight) if isinstance(weight, relax.Var) else None
        dq = dequantized_constant(bound)
        parts = packed_dequantize(dq, to_oihw, padded_in) if dq is not None else None
        if parts is None:
            return None
        centred = centred_weight(*parts[:2])
        if centred is not None:
            return relax.const(centred), relax.const(output_scales(parts[2]))
        return emit_dequantize(self._emit, *parts), None

    def _unary(self, call):
        src = self._source(call.args[0])
        if src is None:
            return None
        zero_preserving, finite_total = UNARY[call.op.name]
        if call.op.name == "relax.clip":
            lo, hi = (float(getattr(x, "value", 0.0)) for x in call.args[1:3])
            zero_preserving = lo <= 0.0 <= hi
        if src.padded and not (finite_total or (src.clean and zero_preserving is not None)):
            return None
        args = [src.var] + [self.visit_expr(x) for x in call.args[1:]]
        new = self._emit(relax.Call(call.op, args, call.attrs, call.ty_args))
        return Packed(new, src.channels, src.clean and bool(zero_preserving), src.layout)

    def _broadcast_operand(self, expr, channels: int, pad_value: float):
        """A 5-D form of a binary-op operand next to a packed tensor with ``channels`` channels."""
        if isinstance(expr, relax.Var) and expr in self.tokens:
            self._nchw_source(expr)  # a token view of a map: the map (when its texels allow)
        if isinstance(expr, relax.Var) and expr in self.packed:
            found = self.packed[expr]
            return (found, True) if found.channels == channels and found.layout == "NCHW" else (None, False)
        shape = _shape(expr)
        if shape is None or len(shape) > 4:
            return None, False
        if len(shape) == 0:
            return self.visit_expr(expr), False
        full = (1,) * (4 - len(shape)) + shape
        if isinstance(expr, GenericConst):
            array = expr.value.numpy().reshape(full)
            if full[1] == 1:
                return relax.const(array.reshape(full + (1,))), False
            if full[1] != channels:
                return None, False
            return Packed(relax.const(pack_array(array, pad_value)), channels, pad_value == 0.0), True
        value = self.visit_expr(expr)
        if full[1] == 1:
            return self._emit(relax.op.reshape(value, full + (1,))), False
        if full[1] != channels:
            return None, False
        if len(shape) < 4:
            value = self._emit(relax.op.reshape(value, full))
        if channels % LANES:
            value = self._emit(relax.op.nn.pad(value, [0, 0, 0, _ceil4(channels) - channels, 0, 0, 0, 0], "constant", pad_value))
        packed = self._emit(relax.op.layout_transform(value, _pack_map))
        return Packed(packed, channels, pad_value == 0.0), True

    def _binary(self, call):
        lhs, rhs = call.args
        anchor = self._nchw_source(lhs) or self._nchw_source(rhs)
        out_shape = _shape(call)
        if anchor is None or out_shape is None or len(out_shape) != 4 or out_shape[1] != anchor.channels:
            return None
        name = call.op.name
        if anchor.padded and name not in BINARY_SAFE_ON_PADDING and name != "relax.divide":
            return None
        if name == "relax.divide" and anchor.padded and self._nchw_source(rhs) is not None:
            return None  # a padded divisor would divide by its padding lanes
        operands, channel_matched = [], []
        for i, operand in enumerate((lhs, rhs)):
            pad = 1.0 if (name == "relax.divide" and i == 1) else 0.0
            form, matched = self._broadcast_operand(operand, anchor.channels, pad)
            if form is None:
                return None
            operands.append(form.var if isinstance(form, Packed) else form)
            channel_matched.append(form if matched else None)
        new = self._emit(relax.Call(call.op, operands, call.attrs, call.ty_args))
        matched = [p for p in channel_matched if p is not None]
        if name == "relax.multiply":
            clean = any(p.clean for p in matched)
        elif name in ("relax.add", "relax.subtract", "relax.maximum", "relax.minimum"):
            clean = len(matched) == 2 and all(p.clean for p in matched)
        else:
            clean = False
        return Packed(new, anchor.channels, clean)

    def _spatial(self, call):
        src = self._nchw_source(call.args[0])
        if src is None or str(call.attrs.layout) != "NCHW":
            return None
        a = call.attrs
        name = call.op.name
        if name == "relax.nn.max_pool2d" or name == "relax.nn.avg_pool2d":
            make = relax.op.nn.max_pool2d if name == "relax.nn.max_pool2d" else relax.op.nn.avg_pool2d
            new = make(src.var, a.pool_size, a.strides, a.padding, a.dilation, a.ceil_mode, a.count_include_pad, "NCHW4c", "NCHW4c")
        elif name == "relax.nn.adaptive_avg_pool2d":
            new = relax.op.nn.adaptive_avg_pool2d(src.var, a.output_size, "NCHW4c", "NCHW4c")
        else:
            new = relax.op.image.resize2d(
                src.var, self.visit_expr(call.args[1]), tuple(float(r) for r in a.roi), "NCHW4c", a.method, a.coordinate_transformation_mode,
                a.rounding_method, a.cubic_alpha, a.cubic_exclude, a.extrapolation_value,
                _out_dtype(a),
            )
        return Packed(self._emit(new), src.channels, src.clean)

    def _concat(self, call):
        fields = call.args[0].fields if isinstance(call.args[0], relax.Tuple) else None
        if not fields or not any(self._nchw_source(f) is not None for f in fields):
            return None
        axis = int(call.attrs.axis)
        axis = axis + 4 if axis < 0 else axis
        shapes = [_shape(f) for f in fields]
        if any(s is None or len(s) != 4 for s in shapes) or not all(_float(f) for f in fields):
            return None
        if axis == 1:
            if any(s[1] % LANES for s in shapes):
                return None
        elif axis in (2, 3):
            if len({s[1] for s in shapes}) != 1:
                return None
        else:
            return None
        packed = [self._pack(f) for f in fields]
        if any(p is None for p in packed):
            return None
        new = self._emit(relax.op.concat([p.var for p in packed], axis=axis))
        channels = sum(s[1] for s in shapes) if axis == 1 else shapes[0][1]
        return Packed(new, channels, all(p.clean for p in packed))

    def _split(self, call):
        src = self._nchw_source(call.args[0])
        shape = _shape(call.args[0])
        if src is None or shape is None:
            return None
        axis = int(call.attrs.axis)
        axis = axis + 4 if axis < 0 else axis
        spec = call.attrs.indices_or_sections
        if isinstance(spec, (int, tvm.tirx.IntImm)) or hasattr(spec, "value"):
            n = int(getattr(spec, "value", spec))
            if shape[axis] % n:
                return None
            indices = [shape[axis] // n * i for i in range(1, n)]
        else:
            indices = [int(getattr(i, "value", i)) for i in spec]
        if axis == 1:
            if src.padded or any(i % LANES for i in indices):
                return None
            new_spec = [i // LANES for i in indices]
        elif axis in (2, 3):
            new_spec = indices
        else:
            return None
        out = self._emit(relax.op.split(src.var, new_spec, axis=axis))
        bounds = [0] + indices + [shape[axis]]
        result = []
        for k in range(len(bounds) - 1):
            item = self._emit(relax.TupleGetItem(out, k))
            channels = bounds[k + 1] - bounds[k] if axis == 1 else src.channels
            result.append(Packed(item, channels, src.clean))
        return result

    def _pad(self, call):
        src = self._nchw_source(call.args[0])
        if src is None:
            return None
        width = [int(getattr(w, "value", w)) for w in call.attrs.pad_width]
        if len(width) != 8 or any(width[:4]):
            return None
        a = call.attrs
        new = relax.op.nn.pad(src.var, width + [0, 0], str(a.pad_mode), float(a.pad_value))
        # a constant pad writes pad_value into the padding lanes too: clean only if it is 0
        clean = src.clean and (str(a.pad_mode) != "constant" or float(a.pad_value) == 0.0)
        return Packed(self._emit(new), src.channels, clean)

    def _reduce(self, call):
        src = self._nchw_source(call.args[0])
        if src is None or call.attrs.axis is None:
            return None
        axes = sorted({int(x) % 4 for x in call.attrs.axis})
        make = REDUCERS[call.op.name]
        if axes == [1] and not src.padded:
            # a channel reduction (a channels-first LayerNorm's statistics): over the packed
            # channels and lanes; the (N, 1, H, W) result is a plain value
            n, _, h, w, _ = _shape(src.var)
            stat = self._emit(make(src.var, [1, 4], keepdims=True))
            return relax.op.reshape(stat, (n, 1, h, w) if bool(call.attrs.keepdims) else (n, h, w))
        if not axes or any(x not in (2, 3) for x in axes):
            return None
        reduced = Packed(self._emit(make(src.var, axes, keepdims=True)), src.channels, src.clean)
        if bool(call.attrs.keepdims):
            return reduced
        if axes != [2, 3]:
            return None
        # global pooling that drops H and W (``x.mean([2, 3])``): reduce packed, then unpack the
        # small (N, C, 1, 1) result and drop its unit axes (a plain value, not a packed stand-in)
        n = _shape(call.args[0])[0]
        return relax.op.reshape(self._emit(self._unpack_expr(reduced)), [n, src.channels])


def ConvertToPackedLayout() -> tvm.transform.Pass:
    """Pack NCHW tensors into NCHW4c through the whole network (see module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        packer = _Packer(mod)
        for gvar, func in list(mod.functions.items()):
            if not isinstance(func, relax.Function):
                continue
            out = packer.visit_expr(func)
            # invariant: packing is internal; the function's signature (its result type) never changes
            if not tvm_ffi.structural_equal(out.body.ty, func.body.ty):
                raise RuntimeError(
                    f"relax_vk internal error: packing changed a function's result type from {func.body.ty} "
                    f"to {out.body.ty}; please report it with the model"
                )
            packer.builder_.update_func(gvar, out)
        # the token kernels (``call_te``) were added to the builder's module
        return packer.builder_.get()

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.ConvertToPackedLayout")
