"""The recurrence of LSTM, GRU and RNN layers: a hand-scheduled kernel that steps through time.

A layer's input projection (every step at once) is an ordinary matmul; what is left is serial in
time. :func:`recurrence_kernel` runs it in one launch whatever the sequence length: one workgroup
per (direction, batch row) loops over the run-time ``n`` steps. Its threads own hidden units; each
step reads the previous hidden state from workgroup memory, computes its units' gates from the
recurrent weights, and after a barrier publishes the new state (GRU with
``linear_before_reset=0`` needs ``r * h`` of every unit first: one more barrier). The cell state
of an LSTM stays with the thread that owns the unit (in the final-state output).

The same steps, as :func:`~tvm.script.tirx.macro` bodies, also make a serial CPU form
(``cpu=True``): the CPU reference (:mod:`relax_vk.analysis.reference`) runs it in place of the GPU
form (which llvm cannot compile), found by the :data:`CELL_ATTR` the GPU form carries.

Everything is in ONNX's conventions (operator docs, opset 14): gates ``i, o, f, c`` (LSTM), ``z,
r, h`` (GRU), activations ``f, g, h``, ``clip`` on the activations' inputs, LSTM peepholes ``P``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Optional, Tuple

#: gates per cell kind, in ONNX's order
GATES = {"lstm": 4, "gru": 3, "rnn": 1}
#: each cell's default activations (ONNX: f, g, h for LSTM; f, g for GRU; f for RNN)
DEFAULT_ACTIVATIONS = {"lstm": ("Sigmoid", "Tanh", "Tanh"), "gru": ("Sigmoid", "Tanh"), "rnn": ("Tanh",)}
ACTIVATIONS = ("Sigmoid", "Tanh", "Relu")
#: the largest hidden size (three ``[H]`` float32 vectors in workgroup memory, whose guaranteed
#: minimum is 16 KiB on Vulkan)
MAX_HIDDEN = 1024
#: threads of a recurrence workgroup at most (Vulkan guarantees 128 invocations)
MAX_THREADS = 128
#: the length that runs every step (``LENS`` when a layer has no per-row lengths)
ALL_STEPS = 2**31 - 1
#: the PrimFunc attribute holding the cell (JSON) of a recurrence kernel
CELL_ATTR = "relax_vk.recurrence"


@dataclass(frozen=True)
class Cell:
    """One recurrent layer: ``kind`` (lstm, gru, rnn), ``hidden`` units, ``reverse`` (one flag per
    direction: ``(False,)`` forward, ``(True,)`` reverse, ``(False, True)`` bidirectional),
    ``activations`` (the cell's slots, :data:`DEFAULT_ACTIVATIONS` when empty), ``clip`` (inputs of
    the activations clamped to ``[-clip, clip]``) and GRU's ``linear_before_reset``. Checked on
    construction (ValueError)."""

    kind: str
    hidden: int
    reverse: Tuple[bool, ...] = (False,)
    activations: Tuple[str, ...] = ()
    clip: Optional[float] = None
    linear_before_reset: bool = False

    def __post_init__(self):
        if self.kind not in GATES:
            raise ValueError(f"cell kind {self.kind!r}: lstm, gru or rnn")
        object.__setattr__(self, "reverse", tuple(bool(r) for r in self.reverse))
        object.__setattr__(self, "activations", tuple(self.activations) or DEFAULT_ACTIVATIONS[self.kind])
        if len(self.activations) != len(DEFAULT_ACTIVATIONS[self.kind]) or any(a not in ACTIVATIONS for a in self.activations):
            raise ValueError(f"activations {list(self.activations)}: {len(DEFAULT_ACTIVATIONS[self.kind])} of {', '.join(ACTIVATIONS)}")
        if not 1 <= self.hidden <= MAX_HIDDEN:
            raise ValueError(f"hidden_size {self.hidden}: 1 to {MAX_HIDDEN}")
        if len(self.reverse) not in (1, 2):
            raise ValueError(f"{len(self.reverse)} directions: 1 or 2")
        if self.clip is not None and not self.clip > 0:
            raise ValueError(f"clip {self.clip}: a positive threshold")

    @property
    def gates(self) -> int:
        return GATES[self.kind]

    @property
    def directions(self) -> int:
        return len(self.reverse)

    @property
    def states(self) -> int:
        """State tensors carried between steps: h (and c for an LSTM)."""
        return 2 if self.kind == "lstm" else 1

    @property
    def aux(self) -> int:
        """Per-direction extra parameters the kernel reads: LSTM peepholes ``[3H]`` (i, o, f), GRU's
        recurrent bias of the h gate ``[H]``, none for an RNN (one unused element)."""
        return {"lstm": 3 * self.hidden, "gru": self.hidden, "rnn": 1}[self.kind]

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Cell":
        return cls(**json.loads(text))


def _activation(name: str, clip: Optional[float]):
    from tvm.script import tirx as T

    def clipped(x):
        return x if clip is None else T.max(T.min(x, T.float32(clip)), T.float32(-clip))

    if name == "Sigmoid":
        return lambda x: T.float32(1) / (T.float32(1) + T.exp(-clipped(x)))
    if name == "Tanh":
        return lambda x: T.tanh(clipped(x))
    return lambda x: T.max(clipped(x), T.float32(0))


def recurrence_kernel(cell: Cell, cpu: bool = False):
    """The recurrence of ``cell`` (module docstring), float32:

    ``XP [n, B, D*G*H]`` (the input projection with the biases that add before the gates), ``RT
    [D, H, G*H]`` (the recurrent weights transposed: a thread's unit is a column, adjacent threads
    read adjacent words), ``AUX [D, A]`` (:attr:`Cell.aux`), ``S0 [S, D, B, H]`` (initial h, c),
    ``LENS`` int32 (each batch row's length, clamped to ``0..n``, as ONNX's ``sequence_lens``: steps
    past it keep the state and write zeros, a row of length 0 ends in zero states, as onnxruntime's;
    one element of :data:`ALL_STEPS` when every row runs every step) ->
    ``Y [n, D, B, H]`` (a reverse direction writes at the input's time positions), ``SF [S, D, B,
    H]`` (final h, c). ``n`` and ``B`` are the call's. ``cpu``: the serial form for llvm.
    """
    from tvm.script import tirx as T

    from .apply import hand_scheduled_attrs

    D, H, G, S, A = cell.directions, cell.hidden, cell.gates, cell.states, cell.aux
    threads = min(MAX_THREADS, -(-H // 32) * 32)
    U = -(-H // threads)
    kind, lbr = cell.kind, cell.linear_before_reset
    f = _activation(cell.activations[0], cell.clip)
    g = _activation(cell.activations[1], cell.clip) if len(cell.activations) > 1 else None
    # (LSTM's h(C): onnxruntime clips the gates' inputs, not the cell state the output reads)
    h_act = _activation(cell.activations[2], None) if len(cell.activations) > 2 else None
    rev0, rev1 = cell.reverse[0], cell.reverse[-1]

    # each macro is one unit j's part of a phase (the phases are separated by barriers on the GPU),
    # of direction d, batch row b, time t, on the kernel's buffers
    @T.macro
    def start(j, d, b, S0, SF, hs):
        hs[j] = S0[0, d, b, j]
        if kind == "lstm":
            SF[1, d, b, j] = S0[1, d, b, j]

    @T.macro
    def reset_gate(j, d, b, t, XP, RT, hs, rh, acc):  # GRU, linear_before_reset=0: r * h for the h gate's recurrent product
        acc[1] = XP[t, b, (d * G + 1) * H + j]
        for q in range(H):
            acc[1] = acc[1] + RT[d, q, H + j] * hs[q]
        rh[j] = f(acc[1]) * hs[j]

    @T.macro
    def step(j, d, b, t, XP, RT, AUX, Y, SF, hs, hn, rh, acc, hv):
        for gate in range(G):
            acc[gate] = XP[t, b, (d * G + gate) * H + j]
        if kind == "gru" and lbr:
            acc[2] = T.float32(0)  # the h gate's recurrent product alone: r scales it
        if kind == "gru" and not lbr:
            for q in range(H):
                acc[0] = acc[0] + RT[d, q, j] * hs[q]
                acc[2] = acc[2] + RT[d, q, 2 * H + j] * rh[q]
        else:
            for q in range(H):
                for gate in range(G):
                    acc[gate] = acc[gate] + RT[d, q, gate * H + j] * hs[q]
        if kind == "lstm":
            c_prev = SF[1, d, b, j]
            i_gate = f(acc[0] + AUX[d, j] * c_prev)
            f_gate = f(acc[2] + AUX[d, 2 * H + j] * c_prev)
            c_new = f_gate * c_prev + i_gate * g(acc[3])
            SF[1, d, b, j] = c_new
            hv[0] = f(acc[1] + AUX[d, H + j] * c_new) * h_act(c_new)
        elif kind == "gru":
            z = f(acc[0])
            if lbr:
                hv[0] = (T.float32(1) - z) * g(XP[t, b, (d * G + 2) * H + j] + f(acc[1]) * (acc[2] + AUX[d, j])) + z * hs[j]
            else:
                hv[0] = (T.float32(1) - z) * g(acc[2] + AUX[d, j]) + z * hs[j]
        else:
            hv[0] = f(acc[0])
        hn[j] = hv[0]
        Y[t, d, b, j] = hv[0]

    @T.macro
    def hold(j, d, b, s, Y, hs, hn):  # a step past the row's length: state kept, output zero
        hn[j] = hs[j]
        Y[s, d, b, j] = T.float32(0)

    @T.macro
    def publish(j, hs, hn):
        hs[j] = hn[j]

    @T.macro
    def finish(j, d, b, SF, hs, ln):  # (a row of no steps ends in zeros, as onnxruntime's)
        if ln > 0:
            SF[0, d, b, j] = hs[j]
        else:
            for i in range(S):
                SF[i, d, b, j] = T.float32(0)

    @T.macro
    def advance(j, d, b, s, t, ln, XP, RT, AUX, Y, SF, hs, hn, rh, acc, hv):  # step s of unit j
        if s < ln:
            step(j, d, b, t, XP, RT, AUX, Y, SF, hs, hn, rh, acc, hv)
        else:
            hold(j, d, b, s, Y, hs, hn)

    def length(LENS, L, b, n):  # the row's steps (ALL_STEPS: every step)
        return T.min(T.max(T.Cast("int64", LENS[b % L]), T.int64(0)), n)

    def time(d, s, ln):  # the position step s of direction d reads and writes
        return T.if_then_else(d == 0, T.if_then_else(rev0, ln - 1 - s, s), T.if_then_else(rev1, ln - 1 - s, s))

    attrs = hand_scheduled_attrs("recurrence", cpu)

    @T.prim_func(private=True)
    def recurrence(xp_h: T.handle, RT: T.Buffer((D, H, G * H), "float32"), AUX: T.Buffer((D, A), "float32"), s0_h: T.handle, lens_h: T.handle, y_h: T.handle, sf_h: T.handle):
        T.func_attr(attrs)
        n = T.int64()
        B = T.int64()
        L = T.int64()
        XP = T.match_buffer(xp_h, (n, B, D * G * H), "float32")
        S0 = T.match_buffer(s0_h, (S, D, B, H), "float32")
        LENS = T.match_buffer(lens_h, (L,), "int32")
        Y = T.match_buffer(y_h, (n, D, B, H), "float32")
        SF = T.match_buffer(sf_h, (S, D, B, H), "float32")
        if cpu:  # every phase a loop over the units, one (direction, row) after the other
            hs = T.alloc_buffer((H,), "float32")
            hn = T.alloc_buffer((H,), "float32")
            rh = T.alloc_buffer((H,), "float32")
            acc = T.alloc_buffer((G,), "float32", scope="local")
            hv = T.alloc_buffer((1,), "float32", scope="local")
            for bx in range(D * B):
                d = bx // B
                b = bx % B
                for j in range(H):
                    start(j, d, b, S0, SF, hs)
                for s in range(n):
                    ln = length(LENS, L, b, n)
                    t = time(d, s, ln)
                    if kind == "gru" and not lbr:
                        for j in range(H):
                            if s < ln:
                                reset_gate(j, d, b, t, XP, RT, hs, rh, acc)
                    for j in range(H):
                        advance(j, d, b, s, t, ln, XP, RT, AUX, Y, SF, hs, hn, rh, acc, hv)
                    for j in range(H):
                        publish(j, hs, hn)
                for j in range(H):
                    finish(j, d, b, SF, hs, length(LENS, L, b, n))
        else:  # a workgroup per (direction, row), its threads own units, barriers between phases
            bx = T.launch_thread("blockIdx.x", D * B)
            tx = T.launch_thread("threadIdx.x", threads)
            hs = T.alloc_buffer((H,), "float32", scope="shared")
            hn = T.alloc_buffer((H,), "float32", scope="shared")
            rh = T.alloc_buffer((H,), "float32", scope="shared")
            acc = T.alloc_buffer((G,), "float32", scope="local")
            hv = T.alloc_buffer((1,), "float32", scope="local")
            d = bx // B
            b = bx % B
            for k in range(U):
                if tx + k * threads < H:
                    start(tx + k * threads, d, b, S0, SF, hs)
            T.tvm_storage_sync("shared")
            for s in range(n):
                ln = length(LENS, L, b, n)
                t = time(d, s, ln)
                if kind == "gru" and not lbr:
                    for k in range(U):
                        if tx + k * threads < H and s < ln:
                            reset_gate(tx + k * threads, d, b, t, XP, RT, hs, rh, acc)
                    T.tvm_storage_sync("shared")
                for k in range(U):
                    if tx + k * threads < H:
                        advance(tx + k * threads, d, b, s, t, ln, XP, RT, AUX, Y, SF, hs, hn, rh, acc, hv)
                T.tvm_storage_sync("shared")
                for k in range(U):
                    if tx + k * threads < H:
                        publish(tx + k * threads, hs, hn)
                T.tvm_storage_sync("shared")
            for k in range(U):
                if tx + k * threads < H:
                    finish(tx + k * threads, d, b, SF, hs, length(LENS, L, b, n))

    return recurrence if cpu else recurrence.with_attr(CELL_ATTR, cell.to_json())


def cpu_form(func):
    """The serial CPU form of a recurrence kernel (None for any other PrimFunc)."""
    if func.attrs is None or CELL_ATTR not in func.attrs:
        return None
    return recurrence_kernel(Cell.from_json(str(func.attrs[CELL_ATTR])), cpu=True)
