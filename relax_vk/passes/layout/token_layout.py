"""The packed token layout: how ConvertToPackedLayout carries transformer tensors in texels.

Token tensors (``[..., C]``) are packed as ``(1, C/4, 1, M, 4)`` (:mod:`.token_views`).
:class:`TokenOps` is the part of the layout stage's mutator that converts ops on them; a value it
handles is a :class:`Tokens` stand-in: a packed base and a view of it.

Entry points (a plain tensor is packed here): ``matmul`` by a constant ``[C, O]`` weight, or one
broadcast over batch axes (a Linear: it becomes an NCHW4c 1x1 conv on the ``[1, C, 1, M]`` map,
scheduled and tuned as one), ``layer_norm`` over the last axis, and ``split``. NCHW4c maps of batch
1 turn into token views when a rearranging op reads them (patch embeddings, ConvNeXt's NHWC
blocks, MobileViT's unfold), and token views whose logical shape is ``[1, C, H, W]`` turn back into
NCHW4c maps when a conv or pool reads them.

Carried through: reshape, squeeze, expand_dims, permute_dims, strided_slice, broadcast_to, take of
constant indices, split, and concat of views of one base (only the view's index table changes;
nothing runs); other concats (along the packed texel or row axis); unary elementwise ops; binary
ops, comparisons and ``where`` with a token operand (the others token tensors, constants, or
per-token or per-channel vectors; bool and int results are packed too); LayerNorm and softmax over
the last axis (one kernel each, :func:`~relax_vk.legalize.tokens.token_layer_norm` and
:func:`~relax_vk.legalize.tokens.token_softmax`; a LayerNorm whose gain or bias is not one value per
channel is decomposed into packed channel reductions, whose ``[..., 1]`` statistics are small
buffers); mean/sum/max/min over the last axis or over every token; batched matmul of two token
tensors, ``B`` read as it is stored or transposed (the
:func:`~relax_vk.legalize.tokens.token_matmul` kernel).

A computation reads a view through a packed tensor of its own: the base itself, a texel gather
when the view's texels are whole base texels, else an element gather
(:mod:`relax_vk.legalize.tokens`); a batched matmul reads a texel view through its table instead,
in the matmul kernel (attention's q, k and v straight from the qkv projection). Elementwise ops on a view that covers its base (a transposed
``k``, a padded output) run on the base in place and keep the view; on a transposed view whose
last axis is not a multiple of 4 (PyTorch's fused attention scales ``k^T`` over the tokens), on
its transpose.

Padding lanes: a Linear or matmul whose output size is not a multiple of 4 writes a padded base
(zero weights or zero operand lanes) read through a view that leaves the padding out, and so do
LayerNorm over such a width and plain tensors packed for a Linear or a row concat (zeros in the
padding). Ops on a padded base: elementwise ops in place (other operands scalars, per-channel or
broadcast constants packed to the base, per-token vectors, plain tensors packed with padding);
LayerNorm, softmax and channel reductions mask the padding lanes out of their statistics (the
first two write them as zeros); a Linear reads zero lanes against zero weight rows, a matmul
reads inner sizes that are not multiples of 4 through zero-padded gathers. Nothing else reads
padding lanes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np
import tvm
from tvm import relax, topi
from tvm.ir.expr import GenericConst

from ...core.registry import TOKEN_GATHER, TOKEN_MATMUL, TOKEN_NORM, TOKEN_STAT
from ...legalize import tokens as kernels
from .packing import LANES, REDUCERS, _ceil4, _dtype, _float, _out_dtype, _shape, _shape_of_type, _unpack_map, pack_weight_array
from .token_views import TokenView, apply_op, element_table, identity, is_padded, nchw_view, padded, row_gather, texel_sources

#: rearranging ops: only the view's table changes
REARRANGE = {
    "relax.reshape",
    "relax.squeeze",
    "relax.expand_dims",
    "relax.flatten",
    "relax.permute_dims",
    "relax.strided_slice",
    "relax.broadcast_to",
    "relax.take",
}
#: elementwise ops carried on token tensors besides the packed layout's unary and binary ones
#: (results of any dtype: a bool or int token tensor is packed too, and stays a buffer)
TOKEN_UNARY = {"relax.astype", "relax.full_like", "relax.zeros_like", "relax.ones_like", "relax.logical_not", "relax.isnan", "relax.isinf"}
TOKEN_ELEMENTWISE = {
    "relax.equal", "relax.not_equal", "relax.less", "relax.less_equal", "relax.greater", "relax.greater_equal",
    "relax.logical_and", "relax.logical_or", "relax.where",
}  # fmt: skip
#: largest constant (elements) broadcast to a token tensor's full shape and packed
MAX_PACKED_CONSTANT = 1 << 22


@dataclass
class Tokens:
    """The stand-in of a logical tensor: ``view`` over the packed base ``var`` (``(1, cols/4, 1,
    rows, 4)``)."""

    var: relax.Var
    view: TokenView
    #: the NCHW4c stand-in this base was converted from (its plain value is cheaper to unpack)
    origin: Optional[relax.Var] = None

    @property
    def shape(self):
        return self.view.shape

    def seen_as(self, view: TokenView) -> "Tokens":
        """The same base through another view."""
        return Tokens(self.var, view, self.origin)


def _map_view(packed) -> TokenView:
    """The token view of an unpadded NCHW4c map ``(1, C/4, H, W, 4)`` of logical layout NCHW or
    NHWC, over its texels as a base of ``H*W`` rows."""
    _, c4, h, w, _ = _shape(packed.var)
    return nchw_view(c4 * LANES, h, w) if packed.layout == "NCHW" else identity((1, h, w, c4 * LANES))


def _token_pack_map(shape: Sequence[int]) -> tvm.tirx.IndexMap:
    """``[..., C] -> (1, C/4, 1, M, 4)``: the leading axes flattened into the row, C packed by 4."""
    strides = [math.prod(shape[i + 1 : -1]) for i in range(len(shape) - 1)]
    zero = tvm.tirx.const(0, "int64")

    def index(*axes):
        row = sum((axis * stride for axis, stride in zip(axes[:-1], strides)), zero)
        return (zero, axes[-1] // LANES, zero, row, axes[-1] % LANES)

    return tvm.tirx.IndexMap.from_func(index, ndim=len(shape))


def _packed_shape(args: Sequence[relax.Expr]) -> tuple:
    """The packed shape of a matmul operand given as ``[packed]`` or ``[base, texel table]``."""
    if len(args) == 2:
        texels, rows = _shape(args[1])
        return (1, texels, 1, rows, LANES)
    return tuple(_shape(args[0]))


def _broadcasts(shape, out_shape) -> bool:
    """Whether ``shape`` (of the same rank) broadcasts to ``out_shape``."""
    return len(shape) == len(out_shape) and all(a in (1, b) for a, b in zip(shape, out_shape))


def _padded_channels(value: GenericConst) -> relax.Constant:
    """A per-channel constant of ``C`` values as ``(1, ceil(C/4), 1, 1, 4)``, zeros in the padding lanes."""
    array = value.value.numpy().reshape(-1)
    vector = np.zeros(_ceil4(array.size), array.dtype)
    vector[: array.size] = array
    return relax.const(vector.reshape(1, -1, 1, 1, LANES))


def _ints(expr) -> list:
    values = expr.fields if isinstance(expr, relax.Tuple) else expr
    return [int(getattr(getattr(v, "value", v), "value", getattr(v, "value", v))) for v in values]


def _as_tokens_array(array: np.ndarray) -> np.ndarray:
    """A logical ``[..., C]`` array packed to ``(1, C/4, 1, M, 4)`` in numpy (a last axis that is
    not a multiple of 4 padded with zeros)."""
    array = np.pad(array, [(0, 0)] * (array.ndim - 1) + [(0, -array.shape[-1] % LANES)])
    rows = array.reshape(-1, array.shape[-1] // LANES, LANES)
    return np.ascontiguousarray(rows.transpose(1, 0, 2)[None, :, None])


class TokenOps:
    """The token-layout half of the layout stage's mutator (mixed into it; uses its ``_emit``,
    ``packed`` table of NCHW4c stand-ins and ``Packed`` class)."""

    tokens: dict
    token_packs: dict

    # --------------------------------------------------------------- stand-ins
    def _tokens_of(self, expr) -> Optional[Tokens]:
        """The token stand-in of ``expr``: its own, or an NCHW4c map of batch 1 seen as tokens."""
        if not isinstance(expr, relax.Var):
            return None
        found = self.tokens.get(expr)
        if found is not None:
            return found
        if expr in self.token_packs:  # a plain tensor packed before: its value is bound too
            return self.token_packs[expr]
        packed = self.packed.get(expr)
        if packed is None or packed.padded:
            return None
        shape = _shape(packed.var)
        if shape is None or len(shape) != 5 or shape[0] != 1:
            return None
        _, c4, h, w, _ = shape
        base = self._reshape_packed(packed.var, (1, c4, 1, h * w, LANES))
        found = Tokens(base, _map_view(packed), origin=expr)
        self.tokens[expr] = found
        return found

    def _pack_tokens(self, expr, pad: bool = False) -> Optional[Tokens]:
        """A plain tensor ``[..., C]`` packed as tokens (C a multiple of 4; else, with ``pad``, a
        padded base whose padding lanes are zeros: fit for a Linear's input)."""
        shape = _shape(expr)
        if shape is None or len(shape) < 2 or (shape[-1] % LANES and not pad):
            return None
        if isinstance(expr, GenericConst):
            return Tokens(relax.const(_as_tokens_array(expr.value.numpy())), padded(shape))
        if isinstance(expr, relax.Var) and expr in self.token_packs:
            return self.token_packs[expr]
        value = self.visit_expr(expr)
        zero = tvm.tirx.const(0, str(value.ty.dtype)) if shape[-1] % LANES else None
        # one transform from the logical shape (no reshaped and transposed copy in between)
        base = self._emit(relax.op.layout_transform(value, _token_pack_map(shape), pad_value=zero))
        packed = Tokens(base, padded(shape))
        if isinstance(expr, relax.Var):
            self.token_packs[expr] = packed  # packed once per block
        return packed

    def _texel_table(self, t: Tokens, transpose_last: bool = False) -> Tuple[bool, Optional[relax.Constant]]:
        """Whether the view (or its transpose) is whole texels of its base, and then the flat texel
        table that gathers it (``c4 * M + m`` per output texel; None when it is the base itself)."""
        view = t.view
        if view.is_identity and not transpose_last:
            return True, None
        sources = texel_sources(view, transpose_last)
        if sources is None:
            return False, None
        row_of, texel_of = sources
        rows = row_gather(view, sources)
        if rows is not None and rows.size == view.rows and np.array_equal(rows, np.arange(view.rows)):
            return True, None
        return True, relax.const(np.ascontiguousarray((texel_of * view.rows + row_of).T).astype("int32"))

    def _realize(self, t: Tokens, transpose_last: bool = False, pad: bool = False) -> Optional[relax.Var]:
        """A packed tensor holding exactly the view (or the view with its last two axes swapped):
        the base itself, a texel gather, or an element gather. A view whose last axis is not a
        multiple of 4 is only realized with ``pad`` (zero lanes: fit for a matmul's operands, not
        for ops that reduce or divide along that axis)."""
        whole, table = self._texel_table(t, transpose_last)
        if whole:
            if table is None:
                return t.var
            # one kernel for every gather (a ``take`` with a data-dependent index would be an
            # opaque kernel, which the registry keeps in buffers); injective, so that FuseOps
            # fuses it with elementwise neighbours (a residual add) and other gathers (a concat)
            return self._emit_te(kernels.token_gather, [t.var, table], "token_gather", TOKEN_GATHER, kernels.INJECTIVE)
        view = t.view
        shape = view.shape
        last = shape[-2] if transpose_last else shape[-1]
        if len(shape) < (2 if transpose_last else 1) or (last % LANES and not pad):
            return None
        table = relax.const(element_table(view, transpose_last))
        return self._emit_te(
            kernels.token_element_gather, [t.var, table], "token_element_gather", TOKEN_GATHER, kernels.INJECTIVE, cols=view.cols
        )

    def _reshape_packed(self, x: relax.Expr, shape: Sequence[int]) -> relax.Var:
        """A reshape of a packed tensor as a kernel (``relax.reshape`` is a buffer view, which a
        texture cannot be: its image extents change)."""
        return self._emit(self.builder_.call_te(topi.reshape, x, list(shape), primfunc_name_hint="packed_reshape"))

    def _emit_te(self, func, args: Sequence[relax.Expr], name: str, op: str, pattern: Optional[int] = None, **kwargs) -> relax.Var:
        attrs = kernels.attrs(op, pattern)
        return self._emit(self.builder_.call_te(func, *args, primfunc_name_hint=name, primfunc_attrs=attrs, **kwargs))

    def _identity_of(
        self, expr, shape: Optional[Sequence[int]] = None, pad: bool = False, transpose_last: bool = False, texels_only: bool = False
    ) -> Optional[relax.Var]:
        """``expr`` as a packed tensor of its own (broadcast to ``shape`` first when given; with
        ``transpose_last``, of its transpose; ``texels_only``: only when no element gather is
        needed). None when it is no token tensor or cannot be realized."""
        t = self._view_of(expr, shape, transpose_last, texels_only)
        return self._realize(t, transpose_last, pad) if t is not None else None

    def _view_of(
        self, expr, shape: Optional[Sequence[int]] = None, transpose_last: bool = False, texels_only: bool = False
    ) -> Optional[Tokens]:
        """The token view of ``expr`` (broadcast to ``shape`` when given), None when it is no token
        tensor, does not broadcast, or (``texels_only``) is not whole texels of its base."""
        t = self._tokens_of(expr)
        if t is None:
            return None
        if shape is not None and tuple(t.shape) != tuple(shape):
            try:
                view = t.view.with_table(np.broadcast_to(t.view.indices(), tuple(shape)))
            except ValueError:
                return None
            if view is None:
                return None
            t = t.seen_as(view)
        if texels_only and not self._texel_table(t, transpose_last)[0]:
            return None
        return t

    def _matmul_operand(self, expr, shape, transpose_last: bool = False, texels_only: bool = False):
        """A matmul operand: ``([base, table], True)`` for a view that is whole texels of its
        base (the matmul reads it through the table: no gather kernel), else ``([packed], False)``
        (``None`` when it cannot be realized)."""
        t = self._view_of(expr, shape, transpose_last, texels_only)
        if t is None:
            return None
        whole, table = self._texel_table(t, transpose_last)
        if whole and table is not None:
            return [t.var, table], True
        packed = self._realize(t, transpose_last, pad=True)
        return ([packed], False) if packed is not None else None

    def _unpack_tokens(self, t: Tokens) -> relax.Expr:
        """The plain (unpacked) logical value of a stand-in: from the NCHW4c map it came from when
        there is one (its own unpacking, then a reshape or a take), else from its base."""
        view = t.view
        if t.origin is not None:
            origin = _map_view(self.packed[t.origin])
            position = np.empty(view.rows * view.cols, np.int64)
            position[origin.indices().reshape(-1)] = np.arange(position.size)  # base index -> logical position
            order = position[view.indices()]
            plain = self.visit_expr(t.origin)  # the map's own unpacking (bound once)
            if np.array_equal(order.reshape(-1), np.arange(order.size)) and order.size == position.size:
                return relax.op.reshape(plain, view.shape)
            flat = self._emit(relax.op.reshape(plain, (position.size,)))
            return relax.op.take(flat, relax.const(order.astype("int32")), axis=0)
        # (1, C/4, 1, M, 4) -> [1, C, 1, M] by the layout transform (which may read a texture),
        # then plain reshapes and permutes of the buffer
        x = self._emit(relax.op.layout_transform(t.var, _unpack_map))
        x = self._emit(relax.op.permute_dims(self._emit(relax.op.reshape(x, (view.cols, view.rows))), [1, 0]))
        if view.is_identity:
            return relax.op.reshape(x, view.shape)
        if is_padded(view):  # the padding lanes sliced off (injective: fuses with the unpacking)
            real = self._emit(relax.op.strided_slice(x, axes=[1], begin=[0], end=[view.shape[-1]]))
            return relax.op.reshape(real, view.shape)
        flat = self._emit(relax.op.reshape(x, (view.rows * view.cols,)))
        return relax.op.take(flat, relax.const(view.table.astype("int32")), axis=0)

    def _tokens_as_map(self, t: Tokens, layout: str):
        """A token view of logical ``[1, C, H, W]`` (NCHW) or ``[1, H, W, C]`` (NHWC) as an NCHW4c
        map ``(1, C/4, H, W, 4)`` (a ``Packed``), or None."""
        shape = t.shape
        if len(shape) != 4 or shape[0] != 1:
            return None
        if layout == "NCHW":
            _, c, h, w = shape
            table = t.view.indices().transpose(0, 2, 3, 1)
        else:
            _, h, w, c = shape
            table = t.view.indices()
        if c % LANES:
            return None
        view = t.view.with_table(table)
        flat = self._realize(t.seen_as(view)) if view is not None else None
        if flat is None:
            return None
        return self.Packed(self._reshape_packed(flat, (1, c // LANES, h, w, LANES)), c, True, layout)

    # ------------------------------------------------------------- dispatch
    def _operand_vars(self, call: relax.Call):
        for arg in call.args:
            for field in arg.fields if isinstance(arg, relax.Tuple) else [arg]:
                if isinstance(field, relax.Var):
                    yield field

    def _touches_tokens(self, call: relax.Call) -> bool:
        """Whether an operand is a token stand-in (an NCHW4c map merely *seen* as tokens once does
        not count: CNN ops on maps stay on maps)."""
        return any(v in self.tokens and v not in self.packed for v in self._operand_vars(call))

    def _touches_maps(self, call: relax.Call) -> bool:
        return any(v in self.packed for v in self._operand_vars(call))

    def _token_convert(self, call: relax.Call):
        name = call.op.name
        if name in REARRANGE:
            return self._token_rearrange(call)
        if name == "relax.matmul":
            return self._token_matmul(call)
        if name == "relax.nn.layer_norm":
            return self._token_layer_norm(call)
        if name == "relax.nn.softmax":
            return self._token_softmax(call)
        if name in self.UNARY or name in TOKEN_UNARY:
            return self._token_unary(call)
        if name in self.BINARY or name in TOKEN_ELEMENTWISE:
            return self._token_elementwise(call)
        if name in self.REDUCE:
            return self._token_reduce(call)
        if name == "relax.concat":
            return self._token_concat(call)
        if name == "relax.split":
            return self._token_split(call)
        return None

    # ------------------------------------------------------------- ops
    def _token_rearrange(self, call: relax.Call):
        t = self._tokens_of(call.args[0])
        out_shape = _shape(call)
        if t is None or out_shape is None:
            return None
        name = call.op.name
        if name in ("relax.reshape", "relax.squeeze", "relax.expand_dims", "relax.flatten"):
            view = apply_op(t.view, "reshape", shape=out_shape)
        elif name == "relax.permute_dims":
            axes = call.attrs.axes
            view = apply_op(t.view, "permute_dims", axes=None if axes is None else [int(a) for a in axes])
        elif name == "relax.broadcast_to":
            view = apply_op(t.view, "broadcast_to", shape=out_shape)
        elif name == "relax.strided_slice":
            axes, begin, end = (_ints(a) for a in call.args[1:4])
            strides = _ints(call.args[4]) if len(call.args) > 4 else [1] * len(axes)
            view = apply_op(t.view, "strided_slice", axes=axes, begin=begin, end=end, strides=strides)
        else:  # take
            if not isinstance(call.args[1], GenericConst) or str(call.attrs.mode) not in ("fast", "clip", "wrap", "None"):
                return None
            view = apply_op(t.view, "take", indices=call.args[1].value.numpy(), axis=int(call.attrs.axis or 0))
        if view is None or tuple(view.shape) != tuple(out_shape):
            return None
        return t.seen_as(view)

    def _token_unary(self, call: relax.Call):
        src = self._identity_of(call.args[0])
        if src is None:
            return self._token_transposed(call) or self._token_in_place(call)
        args = [src] + [self.visit_expr(x) for x in call.args[1:]]
        return Tokens(self._emit(relax.Call(call.op, args, call.attrs, call.ty_args)), identity(_shape(call)))

    def _token_in_place(self, call: relax.Call):
        """An elementwise op on the *base* of its token operands, which all read one base through
        one view that covers it (a padded Linear's output, a transposed view): the result is the
        same view of the new base. Other operands must be scalars, or on a padded base per-channel
        or broadcast constants or per-token vectors."""
        out_shape = _shape(call)
        views = [self._tokens_of(a) for a in call.args if isinstance(a, relax.Var) and a in self.tokens]
        if out_shape is None or not views:
            return None
        first = views[0].view
        if tuple(first.shape) != tuple(out_shape) or first.table is None or first.table.size < first.rows * first.cols * 3 // 4:
            return None  # a view of a small part of its base: gather it instead
        args = []
        for arg in call.args:
            t = self._tokens_of(arg) if isinstance(arg, relax.Var) and arg in self.tokens else None
            if t is not None:
                same = (t.view.rows, t.view.cols) == (first.rows, first.cols) and np.array_equal(t.view.table, first.table)
                if not same:
                    return None
                args.append(t.var)
                continue
            shape = _shape(arg)
            if shape is None:
                return None
            full = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
            if math.prod(shape) == 1:
                args.append(self._scalar(arg))
            elif not is_padded(first):
                return None
            elif isinstance(arg, GenericConst) and full[-1] == out_shape[-1] and math.prod(shape) == shape[-1]:
                args.append(_padded_channels(arg))
            elif full[-1] == 1 and full[:-1] == tuple(out_shape[:-1]):  # per token (a padded base's rows are the tokens)
                args.append(self._emit(relax.op.reshape(self.visit_expr(arg), (1, 1, 1, first.rows, 1))))
            elif _broadcasts(full, out_shape) and not isinstance(arg, GenericConst):  # a plain tensor, packed to the padded base
                plain = self._pack_tokens(self._full_size(arg, full, out_shape), pad=True)
                if plain is None:
                    return None
                args.append(plain.var)
            elif isinstance(arg, GenericConst) and math.prod(out_shape) <= MAX_PACKED_CONSTANT:  # (a causal mask)
                try:
                    args.append(relax.const(_as_tokens_array(np.broadcast_to(arg.value.numpy().reshape(full), tuple(out_shape)))))
                except ValueError:
                    return None
            else:
                return None
        return Tokens(self._emit(relax.Call(call.op, args, call.attrs, call.ty_args)), first)

    def _token_transposed(self, call: relax.Call):
        """An elementwise op whose token operands are transposed views (``k.transpose(-2, -1) *
        scale``): computed on their transposes, the result a transposed view of it. Other
        operands must be scalars."""
        out_shape = _shape(call)
        if out_shape is None or len(out_shape) < 2 or out_shape[-2] % LANES:
            return None
        args = []
        for arg in call.args:
            t = self._tokens_of(arg) if isinstance(arg, relax.Var) else None
            if t is not None:
                if tuple(t.shape) != tuple(out_shape):
                    return None
                realized = self._realize(t, transpose_last=True)
                if realized is None:
                    return None
                args.append(realized)
                continue
            shape = _shape(arg)
            if shape is None or math.prod(shape) != 1:
                return None
            args.append(self._scalar(arg))
        swapped = tuple(out_shape[:-2]) + (out_shape[-1], out_shape[-2])
        result = self._emit(relax.Call(call.op, args, call.attrs, call.ty_args))
        view = identity(swapped)
        return Tokens(result, view.with_table(np.swapaxes(view.indices(), -1, -2)))

    def _scalar(self, expr) -> relax.Expr:
        """A one-element operand as a 0-d tensor (it broadcasts against any packed tensor; a
        ``[1, 1, ...]`` of higher rank would raise the result's rank)."""
        if isinstance(expr, GenericConst):
            return relax.const(expr.value.numpy().reshape(()))
        return self._emit(relax.op.reshape(self.visit_expr(expr), ()))

    def _token_operand(self, expr, out_shape) -> Optional[relax.Expr]:
        """An operand of a binary op whose result is the token tensor ``out_shape``, in a form that
        broadcasts against ``(1, C/4, 1, M, 4)``."""
        if isinstance(expr, relax.Var) and (expr in self.tokens or expr in self.packed):
            return self._identity_of(expr, out_shape)
        shape = _shape(expr)
        if shape is None or len(shape) > len(out_shape):
            return None
        full = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
        c, rows = out_shape[-1], math.prod(out_shape[:-1])
        if math.prod(full) == 1:
            return self._scalar(expr)
        if all(d == 1 for d in full[:-1]) and full[-1] == c:  # per channel
            form = (1, c // LANES, 1, 1, LANES)
        elif full[-1] == 1 and full[:-1] == tuple(out_shape[:-1]):  # per token
            form = (1, 1, 1, rows, 1)
        elif isinstance(expr, GenericConst):
            if math.prod(out_shape) > MAX_PACKED_CONSTANT:
                return None
            try:
                array = np.broadcast_to(expr.value.numpy().reshape(full), tuple(out_shape))
            except ValueError:
                return None
            return relax.const(_as_tokens_array(np.ascontiguousarray(array)))
        elif _broadcasts(full, out_shape):  # (an attention mask input [B, 1, 1, N])
            packed = self._pack_tokens(self._full_size(expr, full, out_shape))
            return packed.var if packed is not None else None
        else:
            return None
        if isinstance(expr, GenericConst):
            return relax.const(np.ascontiguousarray(expr.value.numpy()).reshape(form))
        return self._emit(relax.op.reshape(self.visit_expr(expr), form))

    def _full_size(self, expr, shape, out_shape) -> relax.Expr:
        """A plain operand of ``shape`` broadcast to ``out_shape`` (itself when it has that shape)."""
        if tuple(shape) == tuple(out_shape):
            return expr
        return self._emit(relax.op.broadcast_to(self.visit_expr(expr), tuple(out_shape)))

    def _token_elementwise(self, call: relax.Call):
        out_shape = _shape(call)
        if out_shape is None or len(out_shape) < 2:
            return None
        if out_shape[-1] % LANES:  # (a transposed ``k`` of a token count that is not a multiple of 4)
            return self._token_transposed(call) or self._token_in_place(call)
        operands = [self._token_operand(x, out_shape) for x in call.args]
        if any(x is None for x in operands):
            return self._token_transposed(call) or self._token_in_place(call)
        return Tokens(self._emit(relax.Call(call.op, operands, call.attrs, call.ty_args)), identity(out_shape))

    def _token_input(self, expr, pad: bool = False) -> Optional[relax.Var]:
        """A packed tensor for an entry op's data: its stand-in, or the plain tensor packed here
        when it is a sequence (more than one token); ``pad``: a last axis that is not a multiple
        of 4 is padded with zero lanes."""
        src = self._identity_of(expr, pad=pad)
        if src is not None:
            return src
        if isinstance(expr, relax.Var) and (expr in self.tokens or expr in self.packed):
            return None
        shape = _shape(expr)
        if shape is None or len(shape) < 2 or math.prod(shape[:-1]) < 2 or isinstance(expr, GenericConst):
            return None
        packed = self._pack_tokens(expr, pad=pad)
        return packed.var if packed is not None else None

    def _token_matmul(self, call: relax.Call):
        a, b = call.args
        out_shape, a_shape, b_shape = _shape(call), _shape(a), _shape(b)
        if None in (out_shape, a_shape, b_shape) or len(a_shape) < 2 or len(b_shape) < 2:
            return None
        if not (_float(a) and _float(b)):
            return None
        matrix = self._constant_matrix(b)
        if matrix is not None:  # a Linear: a 1x1 conv on [1, C, 1, M]
            if math.prod(out_shape[:-1]) != math.prod(a_shape[:-1]):
                return None  # the weight's batch axes broadcast the data: not one Linear
            src = self._token_input(a, pad=bool(matrix.shape[0] % LANES))  # (zero lanes times zero weights)
            if src is None:
                return None
            matrix = np.pad(matrix, ((0, -matrix.shape[0] % LANES), (0, 0)))
            weight = matrix.T.reshape(matrix.shape[1], matrix.shape[0], 1, 1)
            conv = relax.op.nn.conv2d(
                src, relax.const(pack_weight_array(weight)), 1, 0, 1, 1, "NCHW4c", "OIHW4o", "NCHW4c", _out_dtype(call.attrs)
            )
            return Tokens(self._emit(conv), padded(out_shape))  # outputs padded to a multiple of 4 (zero weights)
        ta, tb = self._tokens_of(a), self._tokens_of(b)
        if ta is None or tb is None:
            return None
        lead = tuple(out_shape[:-2])
        rows, inner, cols = a_shape[-2], a_shape[-1], b_shape[-1]
        lhs = self._matmul_operand(a, lead + (rows, inner))
        rhs = self._matmul_operand(b, lead + (inner, cols), texels_only=True)
        transpose_b = rhs is None
        if transpose_b:
            rhs = self._matmul_operand(b, lead + (inner, cols), transpose_last=True)
        if lhs is None or rhs is None:
            return None
        (a_args, a_gathered), (b_args, b_gathered) = lhs, rhs
        shapes = [_packed_shape(args) for args in (a_args, b_args)]
        kwargs = dict(rows=rows, inner=inner, cols=cols, transpose_b=transpose_b)
        pattern = kernels.matmul_pattern(*shapes, str(_dtype(call)), **kwargs)  # (as if read directly)
        result = self._emit_te(
            kernels.token_matmul, [a_args[0], b_args[0]] + a_args[1:] + b_args[1:], "token_matmul", TOKEN_MATMUL, pattern,
            gathered=(a_gathered, b_gathered), **kwargs,
        )
        return Tokens(result, padded(out_shape))  # the padding lanes (if any) unused

    def _constant_matrix(self, expr) -> Optional[np.ndarray]:
        """The ``[C, O]`` weight of a Linear: a 2-D constant, or one broadcast over batch axes
        (``nn.MultiheadAttention``'s projections are batched matmuls by ``broadcast_to(W)``)."""
        if isinstance(expr, relax.Var) and isinstance(self.bound.get(expr), relax.Call):
            value = self.bound[expr]
            if isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.broadcast_to":
                expr = value.args[0]
        if not isinstance(expr, GenericConst) or not _float(expr):
            return None
        array = expr.value.numpy()
        if array.ndim < 2:
            return None
        flat = array.reshape(-1, *array.shape[-2:])
        return flat[0] if (flat == flat[:1]).all() else None

    def _channel_stat(self, make, x: relax.Var, channels: Optional[int] = None) -> relax.Var:
        """A reduction over the packed channels (``[..., 1]`` statistics, ``(1, 1, 1, M, 1)``):
        the channel-reduce kernel for sum/max/min (mean: the sum scaled, by ``channels`` when the
        base is padded)."""
        kind = {relax.op.sum: "sum", relax.op.mean: "sum", relax.op.max: "max", relax.op.min: "min"}[make]
        stat = self._emit_te(kernels.token_channel_reduce, [x], "token_channel_" + kind, TOKEN_STAT, kind=kind, channels=channels)
        if make is relax.op.mean:
            channels = channels or _shape(x)[1] * LANES
            stat = self._emit(relax.op.multiply(stat, relax.const(np.array(1.0 / channels, str(x.ty.dtype)))))
        return stat

    def _padded_base(self, expr) -> Optional[Tokens]:
        """The stand-in of ``expr`` when it reads a padded base in order (its padding lanes must be
        masked by what reduces over it), else None."""
        t = self._tokens_of(expr)
        return t if t is not None and is_padded(t.view) else None

    def _affine_term(self, value, shape):
        """LayerNorm's gain or bias in a form that broadcasts against the packed ``shape``; over a
        width that is not a multiple of 4, only a per-channel constant (zero padding lanes)."""
        if not shape[-1] % LANES:
            return self._token_operand(value, shape)
        if isinstance(value, GenericConst) and math.prod(_shape(value)) == shape[-1]:
            return _padded_channels(value)
        return None

    def _token_layer_norm(self, call: relax.Call):
        x, gamma, beta = call.args
        shape = _shape(x)
        if shape is None or len(shape) < 2 or not _float(x):
            return None
        axes = [int(a) % len(shape) for a in call.attrs.axes]
        if axes != [len(shape) - 1]:
            return None
        padding = bool(shape[-1] % LANES)  # (on a padded base: its own, else packed or gathered with zero lanes)
        base = self._padded_base(x) if padding else None
        src = base.var if base is not None else self._token_input(x, pad=padding)
        if src is None:
            return None
        flags = (bool(call.attrs.scale), bool(call.attrs.center))
        affine = [self._affine_term(value, shape) for flag, value in zip(flags, (gamma, beta)) if flag]
        if any(a is None for a in affine):
            return None
        per_channel = (1, _ceil4(shape[-1]) // LANES, 1, 1, LANES)
        if all(_shape(a) == per_channel for a in affine):  # (LayerNorm's usual gain and bias)
            out = self._emit_te(kernels.token_layer_norm, [src, *affine], "token_layer_norm", TOKEN_NORM, eps=float(call.attrs.epsilon),
                                scale=flags[0], center=flags[1], channels=shape[-1] if padding else None)  # fmt: skip
            return Tokens(out, padded(shape))
        # (a gain or bias that is not one value per channel: decomposed, on an unpadded base)
        scale, center = affine[0] if flags[0] else None, affine[-1] if flags[1] else None
        dtype = str(x.ty.dtype)
        centered = self._emit(relax.op.subtract(src, self._channel_stat(relax.op.mean, src)))
        variance = self._channel_stat(relax.op.mean, self._emit(relax.op.multiply(centered, centered)))
        eps = relax.const(np.array(float(call.attrs.epsilon), dtype))
        inv = self._emit(relax.op.rsqrt(self._emit(relax.op.add(variance, eps))))
        out = self._emit(relax.op.multiply(centered, inv))
        if scale is not None:
            out = self._emit(relax.op.multiply(out, scale))
        if center is not None:
            out = self._emit(relax.op.add(out, center))
        return Tokens(out, identity(shape))

    def _token_softmax(self, call: relax.Call):
        shape = _shape(call)
        if shape is None or int(call.attrs.axis) % len(shape) != len(shape) - 1:
            return None
        base = self._padded_base(call.args[0])  # (its padding lanes masked)
        src = base.var if base is not None else self._identity_of(call.args[0])
        if src is None:
            return None
        out = self._emit_te(kernels.token_softmax, [src], "token_softmax", TOKEN_NORM, channels=shape[-1] if base is not None else None)
        return Tokens(out, base.view if base is not None else identity(shape))

    def _token_reduce(self, call: relax.Call):
        t = self._tokens_of(call.args[0])
        out_shape = _shape(call)
        if t is None or out_shape is None or call.attrs.axis is None:
            return None
        rank = len(t.shape)
        axes = sorted({int(a) % rank for a in call.attrs.axis})
        make = REDUCERS[call.op.name]
        if axes == [rank - 1]:  # per token: small statistics, a plain value
            base = self._padded_base(call.args[0])  # (its padding lanes take no part)
            src = base.var if base is not None else self._identity_of(call.args[0])
            if src is None:
                return None
            return relax.op.reshape(self._channel_stat(make, src, channels=t.shape[-1] if base is not None else None), out_shape)
        kept = [d for i, d in enumerate(t.shape[:-1]) if i not in axes]
        if rank - 1 in axes or any(d != 1 for d in kept):
            return None
        src = self._identity_of(call.args[0])  # every token reduced: one row
        if src is None:
            return None
        # reduced into a small buffer (a GPU reduction rule splits the rows over threads; a kernel
        # writing texels reduces each one serially), then copied into the one-row token tensor
        pooled = self._emit(make(src, [3], keepdims=False))
        return Tokens(self._reshape_packed(pooled, (1, _shape(src)[1], 1, 1, LANES)), identity(out_shape))

    def _token_concat(self, call: relax.Call):
        """Concatenation along the last axis (of packed tensors, along their texel axis) or along
        any other axis: of views of one base, a view; else the parts realized one after another
        along the row axis, and a view that interleaves them."""
        fields = call.args[0].fields if isinstance(call.args[0], relax.Tuple) else None
        out_shape = _shape(call)
        if not fields or out_shape is None:
            return None
        rank = len(out_shape)
        axis = int(call.attrs.axis) % rank
        if axis == rank - 1:
            if out_shape[-1] % LANES or any(_shape(f) is None or _shape(f)[-1] % LANES for f in fields):
                return None
            parts = [self._token_input(f) for f in fields]
            if any(p is None for p in parts):
                return None
            return Tokens(self._emit(relax.op.concat(parts, axis=1)), identity(out_shape))
        stand_ins = [self._tokens_of(f) if isinstance(f, relax.Var) else None for f in fields]
        if all(t is not None for t in stand_ins):
            first = stand_ins[0]
            if all(t.var.same_as(first.var) and (t.view.rows, t.view.cols) == (first.view.rows, first.view.cols) for t in stand_ins):
                view = first.view.with_table(np.concatenate([t.view.indices() for t in stand_ins], axis=axis))
                return first.seen_as(view) if view is not None else None
        parts, tables, offset = [], [], 0
        for field in fields:  # (a last axis that is not a multiple of 4: padded parts, a padded base)
            if isinstance(field, GenericConst):  # (a class token)
                constant = self._pack_tokens(field, pad=True)
                part = constant.var if constant is not None else None
            else:
                part = self._token_input(field, pad=True)
            shape = _shape(field)
            if part is None or shape is None:
                return None
            parts.append(part)
            tables.append(padded(shape).indices() + offset)
            offset += math.prod(shape[:-1]) * _ceil4(shape[-1])
        base = self._emit(relax.op.concat(parts, axis=3))
        cols = _ceil4(out_shape[-1])
        return Tokens(base, identity((offset // cols, cols)).with_table(np.concatenate(tables, axis=axis)))

    def _token_split(self, call: relax.Call):
        """``split`` (ONNX's Split of the qkv projection): a list of views, one per part."""
        t = self._tokens_of(call.args[0])
        if t is None or not isinstance(call.ty, relax.TupleType):
            return None
        rank = len(t.shape)
        axis = int(call.attrs.axis) % rank
        parts = [_shape_of_type(f) for f in call.ty.fields]
        if any(p is None for p in parts):
            return None
        out, begin = [], 0
        for part in parts:
            end = begin + part[axis]
            view = apply_op(t.view, "strided_slice", axes=[axis], begin=[begin], end=[end], strides=[1])
            if view is None or tuple(view.shape) != tuple(part):
                return None
            out.append(t.seen_as(view))
            begin = end
        return out

