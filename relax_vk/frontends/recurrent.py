"""Recurrent layers (LSTM, GRU, RNN) with the sequence length a run-time dim, for both front doors.

TVM's ONNX importer has no LSTM, GRU or RNN converter, and its PyTorch importer unrolls a single
layer over a fixed number of steps. Here a layer is two kernels, whatever the sequence length:

1. the input projection of every step at once, ``XP = X @ W^T + biases`` (``[T, B, D*G*H]``): a
   matmul the ordinary schedules handle, over run-time rows;
2. the recurrence (:mod:`relax_vk.schedules.recurrence`): one workgroup per (direction, batch row)
   steps through time in a loop whose extent is the run-time ``T``: no host round trip per step,
   one launch per layer for both directions.

The canonical form is ONNX's (operator docs, opset 14): time-major ``X [T, B, I]``; ``W [D, G*H,
I]``, ``R [D, G*H, H]``, ``B [D, 2*G*H]`` (``Wb`` then ``Rb``); gates ``i, o, f, c`` (LSTM),
``z, r, h`` (GRU); ``Y [T, D, B, H]``, ``Y_h``/``Y_c [D, B, H]``; a reverse direction reads and
writes ``Y`` at the input's time positions. The PyTorch converters reorder their gates into it.
Weights must be constants (initializers, parameters): they are rearranged once at import.
``sequence_lens`` (a length per batch row, clamped to the sequence) is honoured as ONNX says: steps
past a row's length keep its state and write zeros. Unsupported attributes (``input_forget``,
activations other than Sigmoid/Tanh/Relu, different activations per direction, hidden sizes past
:data:`~relax_vk.schedules.recurrence.MAX_HIDDEN`) are :class:`~relax_vk.core.errors.UnsupportedError` naming the node.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Optional, Tuple

import numpy as np

from ..core.errors import UnsupportedError
from ..schedules.recurrence import ACTIVATIONS, ALL_STEPS, DEFAULT_ACTIVATIONS, Cell, recurrence_kernel
from .errors import onnx_node


def _const(expr, what: str, where: str) -> np.ndarray:
    from tvm.ir import GenericConst

    if not isinstance(expr, GenericConst):
        raise UnsupportedError(f"{where}: {what} must be a constant (an initializer or a parameter), not a run-time tensor")
    return expr.value.numpy()


def emit_recurrence(bb, cell: Cell, x, w: np.ndarray, r: np.ndarray, bias: Optional[np.ndarray], h0=None, c0=None, peephole: Optional[np.ndarray] = None,
                    lengths=None):  # fmt: skip
    """One layer in ONNX's form (module docstring): ``x`` a Relax tensor ``[T, B, I]``; ``w``, ``r``,
    ``bias`` (``[D, 2*G*H]`` or None), ``peephole`` (``[D, 3H]``) numpy; ``h0``/``c0`` Relax tensors
    ``[D, B, H]`` or None (zeros); ``lengths`` a Relax int32 ``[B]`` (ONNX's ``sequence_lens``) or
    None (every row runs every step). Returns Relax ``(Y [T, D, B, H], Y_h [D, B, H], Y_c or None)``."""
    from tvm import relax

    D, H, G = cell.directions, cell.hidden, cell.gates
    seq, batch, inputs = x.ty.shape.values
    if str(x.ty.dtype) != "float32":
        raise UnsupportedError(f"{cell.kind.upper()} on {x.ty.dtype} inputs: float32 only")
    w = np.asarray(w, np.float32).reshape(D, G * H, -1)
    r = np.asarray(r, np.float32).reshape(D, G * H, H)
    bias = np.zeros((D, 2 * G * H), np.float32) if bias is None else np.asarray(bias, np.float32).reshape(D, 2 * G * H)
    wb, rb = bias[:, : G * H], bias[:, G * H :]
    aux = np.zeros((D, cell.aux), np.float32)
    folded = wb + rb
    if cell.kind == "gru":  # the h gate's recurrent bias stays apart (it is multiplied by r)
        folded = wb.copy()
        folded[:, : 2 * H] += rb[:, : 2 * H]
        aux[:, :] = rb[:, 2 * H :]
    if cell.kind == "lstm" and peephole is not None:
        aux[:, :] = np.asarray(peephole, np.float32).reshape(D, 3 * H)
    w_t = relax.const(np.ascontiguousarray(w.reshape(D * G * H, -1).T))
    xp = bb.emit(relax.op.add(relax.op.matmul(x, w_t), relax.const(folded.reshape(-1))))
    states = (h0, c0) if cell.kind == "lstm" else (h0,)
    zeros = relax.op.zeros(relax.ShapeExpr([D, batch, H]), "float32")
    s0 = bb.emit(relax.op.stack([s if s is not None else zeros for s in states], axis=0))
    rt = relax.const(np.ascontiguousarray(r.transpose(0, 2, 1)))
    kernel = bb.add_func(recurrence_kernel(cell), f"{cell.kind}_recurrence")
    out = bb.emit(
        relax.call_tir(
            kernel, [xp, rt, relax.const(aux), s0, lengths if lengths is not None else relax.const(np.array([ALL_STEPS], np.int32))],
            out_ty=[relax.TensorType([seq, D, batch, H], "float32"), relax.TensorType([cell.states, D, batch, H], "float32")],
        )
    )  # fmt: skip
    y = bb.emit(relax.TupleGetItem(out, 0))
    final = bb.emit(relax.TupleGetItem(out, 1))
    y_h = bb.emit(relax.op.squeeze(relax.op.strided_slice(final, [0], [0], [1]), [0]))
    y_c = bb.emit(relax.op.squeeze(relax.op.strided_slice(final, [0], [1], [2]), [0])) if cell.kind == "lstm" else None
    return y, y_h, y_c


# ---------------------------------------------------------------- ONNX
def _names(values) -> Tuple[str, ...]:
    known = {a.lower(): a for a in ACTIVATIONS}
    out = []
    for v in values:
        name = v.decode() if isinstance(v, bytes) else str(v)
        out.append(known.get(name.lower(), name))
    return tuple(out)


def onnx_converter(kind: str):
    """The converter of ONNX's ``LSTM`` / ``GRU`` / ``RNN`` (``kind`` lstm, gru, rnn) for relax_vk's
    importer (:func:`relax_vk.frontends.onnx._importer_class`): outputs ``Y``, ``Y_h`` (and ``Y_c``)."""

    def convert(bb, inputs, attrs):
        from tvm import relax

        where = onnx_node(attrs, kind.upper())
        inputs = list(inputs) + [None] * (8 - len(inputs))
        x, w, r, b, seq_lens, h0 = inputs[:6]
        c0, p = (inputs[6], inputs[7]) if kind == "lstm" else (None, None)
        if seq_lens is not None and str(seq_lens.ty.dtype) != "int32":
            seq_lens = bb.emit(relax.op.astype(seq_lens, "int32"))
        if kind == "lstm" and int(attrs.get("input_forget", 0)):
            raise UnsupportedError(f"{where}: input_forget=1 is not supported")
        if "activation_alpha" in attrs or "activation_beta" in attrs:
            raise UnsupportedError(f"{where}: activation_alpha/activation_beta are not supported (Sigmoid, Tanh and Relu take none)")
        direction = attrs.get("direction", b"forward")
        direction = direction.decode() if isinstance(direction, bytes) else str(direction)
        reverse = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}.get(direction)
        if reverse is None:
            raise UnsupportedError(f"{where}: direction {direction!r}")
        wv, rv = _const(w, "W", where), _const(r, "R", where)
        hidden = int(attrs.get("hidden_size", rv.shape[-1]))
        if rv.ndim != 3 or rv.shape[-1] != hidden or rv.shape[1] % hidden:
            raise UnsupportedError(f"{where}: R of shape {list(rv.shape)} does not match hidden_size {hidden}")
        for name, allowed in (("layout", (0, 1)), ("linear_before_reset", (0, 1))):
            if int(attrs.get(name, 0)) not in allowed:
                raise UnsupportedError(f"{where}: {name}={int(attrs[name])}; ONNX allows {' or '.join(map(str, allowed))}")
        acts = _names(attrs.get("activations", ()))
        per = len(DEFAULT_ACTIVATIONS[kind])
        if acts and len(acts) != per * len(reverse):
            raise UnsupportedError(f"{where}: {len(acts)} activations for {len(reverse)} direction(s); {per} each expected")
        if acts and len(reverse) == 2 and acts[:per] != acts[per:]:
            raise UnsupportedError(f"{where}: different activations per direction ({list(acts)}) are not supported")
        try:
            cell = Cell(kind, hidden, reverse, acts[:per], None if "clip" not in attrs else float(attrs["clip"]), bool(int(attrs.get("linear_before_reset", 0))))
        except ValueError as err:
            raise UnsupportedError(f"{where}: {err}") from None
        batch_first = int(attrs.get("layout", 0)) == 1
        if batch_first:
            x = bb.emit(relax.op.permute_dims(x, [1, 0, 2]))
            h0, c0 = (None if s is None else bb.emit(relax.op.permute_dims(s, [1, 0, 2])) for s in (h0, c0))
        bias = None if b is None else _const(b, "B", where)
        peephole = None if p is None else _const(p, "P", where)
        y, y_h, y_c = emit_recurrence(bb, cell, x, wv, rv, bias, h0, c0, peephole, seq_lens)
        if batch_first:
            y = bb.emit(relax.op.permute_dims(y, [2, 0, 1, 3]))
            y_h, y_c = (None if s is None else bb.emit(relax.op.permute_dims(s, [1, 0, 2])) for s in (y_h, y_c))
        return relax.Tuple([y, y_h] + ([y_c] if y_c is not None else []))

    return convert


ONNX_CONVERTERS = {"LSTM": onnx_converter("lstm"), "GRU": onnx_converter("gru"), "RNN": onnx_converter("rnn")}


# ---------------------------------------------------------------- PyTorch
#: ONNX's gate order as rows of PyTorch's (LSTM i,f,g,o -> i,o,f,c; GRU r,z,n -> z,r,h)
TORCH_GATES = {"lstm": (0, 3, 1, 2), "gru": (1, 0, 2), "rnn": (0,)}


def _onnx_rows(kind: str, a: np.ndarray) -> np.ndarray:
    parts = np.split(np.asarray(a, np.float32), len(TORCH_GATES[kind]), axis=0)
    return np.concatenate([parts[i] for i in TORCH_GATES[kind]], axis=0)


def emit_torch_layers(bb, kind: str, x, hx, params, has_biases: bool, num_layers: int, bidirectional: bool, batch_first: bool, where: str, nonlinearity: str = "tanh"):
    """``torch.nn.LSTM`` / ``GRU`` / ``RNN`` (``kind``) as Relax, from the arguments of PyTorch's
    ``aten.lstm.input`` (and its GRU/RNN twins): ``x`` ``[T, B, I]`` (``[B, T, I]`` batch first,
    ``[T, I]`` unbatched), ``hx`` None or Relax ``[(h0, c0)]`` / ``[h0]`` of ``[L*D, B, H]``,
    ``params`` numpy ``w_ih, w_hh[, b_ih, b_hh]`` per layer and direction. Returns ``(output,
    h_n[, c_n])`` as PyTorch does (``output [T, B, D*H]``)."""
    from tvm import relax

    D = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    if len(params) != per * D * num_layers:
        raise UnsupportedError(f"{where}: {len(params)} weights for {num_layers} layer(s) x {D} direction(s) (projections, proj_size > 0, are not supported)")
    unbatched = x.ty.ndim == 2
    if unbatched:
        x = bb.emit(relax.op.expand_dims(x, 1))
        hx = [None if s is None else bb.emit(relax.op.expand_dims(s, 1)) for s in hx] if hx else hx
    elif batch_first:
        x = bb.emit(relax.op.permute_dims(x, [1, 0, 2]))
    hidden = int(params[1].shape[-1])
    acts = ("Relu",) if kind == "rnn" and nonlinearity == "relu" else ()
    cell = Cell(kind, hidden, (False, True)[:D], acts, None, linear_before_reset=True)
    finals = [[] for _ in range(cell.states)]
    for layer in range(num_layers):
        group = params[layer * per * D : (layer + 1) * per * D]
        dirs = [group[i * per : (i + 1) * per] for i in range(D)]
        w = np.stack([_onnx_rows(kind, p[0]) for p in dirs])
        r = np.stack([_onnx_rows(kind, p[1]) for p in dirs])
        bias = np.stack([np.concatenate([_onnx_rows(kind, p[2]), _onnx_rows(kind, p[3])]) for p in dirs]) if has_biases else None
        init = [None if not hx or s is None else bb.emit(relax.op.strided_slice(s, [0], [layer * D], [(layer + 1) * D])) for s in (hx or [None] * cell.states)]
        y, y_h, y_c = emit_recurrence(bb, cell, x, w, r, bias, init[0], init[1] if kind == "lstm" else None)
        for i, s in enumerate((y_h, y_c)[: cell.states]):
            finals[i].append(s)
        seq, batch = y.ty.shape.values[0], y.ty.shape.values[2]
        x = bb.emit(relax.op.reshape(relax.op.permute_dims(y, [0, 2, 1, 3]), relax.ShapeExpr([seq, batch, D * hidden])))
    out = x
    states = [bb.emit(relax.op.concat(f, axis=0)) if len(f) > 1 else f[0] for f in finals]
    if unbatched:
        out = bb.emit(relax.op.squeeze(out, [1]))
        states = [bb.emit(relax.op.squeeze(s, [1])) for s in states]
    elif batch_first:
        out = bb.emit(relax.op.permute_dims(out, [1, 0, 2]))
    return (out, *states)


_OP = []


def _recurrent_op():
    """``relax_vk::recurrent``: a whole ``nn.LSTM`` / ``GRU`` / ``RNN`` as one ``torch.library``
    op, registered on first use. PyTorch's own ``aten.lstm`` decomposes into a loop over the steps
    when exported, which fixes the sequence length; this op keeps it a ``Dim``."""
    if _OP:
        return _OP[0]
    import torch

    schema = ("(Tensor x, Tensor[] hx, Tensor[] params, str kind, bool has_biases, int num_layers, bool bidirectional, "
              "bool batch_first, str nonlinearity) -> (Tensor, Tensor, Tensor)")  # fmt: skip

    @torch.library.custom_op("relax_vk::recurrent", mutates_args=(), schema=schema)
    def recurrent(x, hx, params, kind, has_biases, num_layers, bidirectional, batch_first, nonlinearity):
        if not hx:
            shape = (num_layers * (2 if bidirectional else 1), *([] if x.dim() == 2 else [x.shape[0 if batch_first else 1]]), params[1].shape[1])
            hx = [x.new_zeros(shape)] * (2 if kind == "lstm" else 1)
        args = (params, has_biases, num_layers, 0.0, False, bidirectional, batch_first)
        if kind == "lstm":
            out, h, c = torch._VF.lstm(x, hx, *args)
            return out, h, c
        run = torch._VF.gru if kind == "gru" else torch._VF.rnn_relu if nonlinearity == "relu" else torch._VF.rnn_tanh
        out, h = run(x, hx[0], *args)
        return out, h, h.clone()

    @recurrent.register_fake
    def _(x, hx, params, kind, has_biases, num_layers, bidirectional, batch_first, nonlinearity):
        D, H = (2 if bidirectional else 1), params[1].shape[1]
        if x.dim() == 2:
            out, state = x.new_empty((x.shape[0], D * H)), x.new_empty((num_layers * D, H))
        else:
            T, B = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
            out = x.new_empty((B, T, D * H) if batch_first else (T, B, D * H))
            state = x.new_empty((num_layers * D, B, H))
        return out, state, state.new_empty(state.shape)

    _OP.append(torch.ops.relax_vk.recurrent.default)
    return _OP[0]


def _exportable_forward(layer, kind: str, input, hx=None):
    import torch

    if isinstance(input, torch.nn.utils.rnn.PackedSequence):
        raise UnsupportedError(f"{type(layer).__name__}: packed sequences are not supported; pass the padded tensor")
    if getattr(layer, "proj_size", 0):
        raise UnsupportedError(f"{type(layer).__name__}: proj_size > 0 is not supported")
    states = [] if hx is None else list(hx) if kind == "lstm" else [hx]
    nonlinearity = getattr(layer, "nonlinearity", "tanh")
    out, h, c = _recurrent_op()(input, states, list(layer._flat_weights), kind, layer.bias, layer.num_layers, layer.bidirectional, layer.batch_first, nonlinearity)
    return (out, (h, c)) if kind == "lstm" else (out, h)


@contextmanager
def exportable_recurrent_layers(module):
    """While in the ``with`` block, every ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` of ``module`` (or
    subclass that keeps its ``forward``) runs as :func:`_recurrent_op`, so ``torch.export`` keeps
    its sequence length a run-time dim; the modules are restored on exit."""
    import functools

    import torch

    kinds = {torch.nn.LSTM: "lstm", torch.nn.GRU: "gru", torch.nn.RNN: "rnn"}

    def kind_of(sub):
        return next((k for base, k in kinds.items() if isinstance(sub, base) and type(sub).forward is base.forward), None)

    patched = [(sub, kind_of(sub)) for sub in module.modules() if kind_of(sub) is not None]
    for sub, kind in patched:
        sub.forward = functools.partial(_exportable_forward, sub, kind)
    try:
        yield
    finally:
        for sub, _ in patched:
            del sub.forward
