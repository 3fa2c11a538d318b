"""The op registry: which memory scopes each op's tensors may take, declared, and open to users.

A registration names an op and gives its admissible :class:`~relax_vk.core.representation.TensorRepSet`
for inputs and outputs. The *shape of the registration* declares the sync rules (ExecuTorch
Vulkan's convention):

* ``inputs=ONE_SET`` (or a one-element list): all tensor inputs share one representation;
  ``inputs=[set_a, set_b, ...]``: each input is independent;
* ``outputs`` likewise for outputs;
* ``outputs`` omitted: outputs default to the primary input's set and the primary input and the
  first output share one representation.

Calls are matched as follows (first match wins):

1. a Relax op call: the registration of its op name, if its ``applies`` predicate accepts the call;
2. a ``call_tir`` of a kernel that relax_vk's partial legalization produced: the registration of
   the op it came from (``relax_vk.source_op`` PrimFunc attribute), then the kernel's own
   ``op_pattern`` rule;
3. ``call_tir`` by ``op_pattern`` (from ``AnnotateTIROpPattern``): elementwise, broadcast and
   injective kernels (pattern < 3) take any scope, all synced; everything else is a buffer;
4. anything else (unknown ops, calls to Relax functions, extern/packed functions): buffers.

Defaults: NCHW4c conv2d (data, weight and output texture-capable, weight as a ``WEIGHT``), NCHW4c
max/avg/adaptive-avg pool2d (texture-capable), layout transforms (input and output each
texture-capable), mean/sum/max/min (texture-capable, output synced with the input; only packed
tensors are texturable, and the layout stage packs only spatial reductions and the channel
reductions of token tensors), the packed token kernels (gathers, channel statistics, batched matmul: operands
and result texture-capable, synced), the Winograd conv kernel (as a conv). Users add or replace
entries with :func:`register_op`. The RFC's listing keeps layout-transform inputs in buffers;
:func:`rfc_registry` reproduces it.

"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import tvm
from tvm import relax

from .representation import ANY_SCOPE, BUFFER_ONLY, TensorRepSet
from .scope import MemoryScope
from .scope_rule import Role

RepSetSpec = Union[TensorRepSet, Sequence[TensorRepSet]]

#: op_pattern values of TVM's ``OpPatternKind``
ELEMWISE, BROADCAST, INJECTIVE, COMM_REDUCE, OUT_ELEMWISE_FUSABLE, TUPLE, OPAQUE = 0, 1, 2, 3, 4, 7, 8
SOURCE_OP_ATTR = "relax_vk.source_op"
REDUCTIONS = ("relax.mean", "relax.sum", "relax.max", "relax.min")
#: the packed token kernels the layout stage emits (``relax_vk.legalize.tokens``)
TOKEN_GATHER, TOKEN_MATMUL, TOKEN_STAT = "relax_vk.token_gather", "relax_vk.token_matmul", "relax_vk.token_stat"
TOKEN_NORM = "relax_vk.token_norm"  # LayerNorm / softmax over the channels, one kernel
#: the Winograd conv kernel ChooseConvAlgorithm emits (``relax_vk.legalize.winograd``)
WINOGRAD_CONV = "relax_vk.winograd_conv2d"


@dataclass(frozen=True)
class OpRegistration:
    """How one op's tensors may be stored.

    Attributes
    ----------
    name: Relax op name (``"relax.nn.conv2d"``), or a PrimFunc name for hand-written kernels.
    inputs, outputs: admissible sets; their shape declares the sync rules (module docstring).
    roles: role of each input for the mapping rule (default ``ACTIVATION``).
    preferences: optional per-input texture mapping order that overrides the role's order.
    applies: predicate on the ``relax.Call``; when it returns False the call is treated as
        unregistered (buffers), e.g. a conv2d that is not in NCHW4c.
    keep_for_scoping: keep this op un-legalized until scopes are assigned (its attributes are
        needed); its type inference is made to honour the decided output VDevice.
    reason: one line shown in memory plans for tensors this registration keeps in buffers.
    """

    name: str
    inputs: RepSetSpec
    outputs: Optional[RepSetSpec] = None
    roles: Tuple[Role, ...] = ()
    preferences: Tuple[Optional[Tuple[MemoryScope, ...]], ...] = ()
    applies: Optional[Callable[[relax.Call], bool]] = None
    keep_for_scoping: bool = False
    reason: str = ""

    def role(self, i: int) -> Role:
        return self.roles[i] if i < len(self.roles) else Role.ACTIVATION

    def accepts(self, call: relax.Call) -> bool:
        return self.applies is None or bool(self.applies(call))


UNKNOWN = OpRegistration("<unknown>", BUFFER_ONLY, BUFFER_ONLY, reason="op not registered: buffer")
OPAQUE_CALL = OpRegistration("<opaque call>", BUFFER_ONLY, BUFFER_ONLY, reason="call to a function or extern: buffer")
PATTERN_ANY = OpRegistration("<op_pattern < 3>", ANY_SCOPE, reason="elementwise/broadcast/injective kernel")
PATTERN_BUFFER = OpRegistration(
    "<op_pattern >= 3>", BUFFER_ONLY, BUFFER_ONLY, reason="reduction or opaque kernel: buffer"
)


class OpRegistry:
    """A mutable table of :class:`OpRegistration` keyed by op name."""

    def __init__(self, entries: Iterable[OpRegistration] = ()) -> None:
        self._entries: Dict[str, OpRegistration] = {}
        for entry in entries:
            self.register(entry)

    def register(self, entry: OpRegistration, override: bool = False) -> OpRegistration:
        if entry.name in self._entries and not override:
            raise ValueError(f"op {entry.name!r} is already registered; pass override=True to replace it")
        self._entries[entry.name] = entry
        if entry.keep_for_scoping:
            from .op_typing import honour_ty_args

            honour_ty_args(entry.name)
        return entry

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)

    def get(self, name: str) -> Optional[OpRegistration]:
        return self._entries.get(name)

    def copy(self) -> "OpRegistry":
        return OpRegistry(self._entries.values())

    def keep_for_scoping(self) -> List[str]:
        """Op names partial legalization must skip."""
        return sorted(n for n, e in self._entries.items() if e.keep_for_scoping)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def __iter__(self):
        return iter(self._entries.values())

    def lookup(self, call: relax.Call, mod: Optional[tvm.IRModule] = None) -> OpRegistration:
        """The registration that governs ``call`` (see the module docstring for the order)."""
        op = call.op
        if isinstance(op, tvm.ir.Op):
            if op.name == "relax.call_tir":
                return self._lookup_kernel(call.args[0], mod)
            entry = self._entries.get(op.name)
            if entry is not None and entry.accepts(call):
                return entry
            return UNKNOWN
        return OPAQUE_CALL

    def _lookup_kernel(self, gvar, mod: Optional[tvm.IRModule]) -> OpRegistration:
        func = mod.functions.get(gvar) if mod is not None else None
        attrs = func.attrs if func is not None and func.attrs is not None else {}
        for key in (str(gvar.name_hint), str(attrs[SOURCE_OP_ATTR]) if SOURCE_OP_ATTR in attrs else None):
            entry = self._entries.get(key) if key else None
            if entry is not None and not entry.keep_for_scoping:
                return entry
        pattern = int(attrs["op_pattern"]) if "op_pattern" in attrs else OPAQUE
        return PATTERN_ANY if pattern < COMM_REDUCE else PATTERN_BUFFER


def _layout_is(**expected: str) -> Callable[[relax.Call], bool]:
    def check(call: relax.Call) -> bool:
        return all(str(getattr(call.attrs, k, "")) == v for k, v in expected.items())

    return check


def _default_entries() -> List[OpRegistration]:
    conv = OpRegistration(
        "relax.nn.conv2d",
        inputs=[ANY_SCOPE, ANY_SCOPE],
        outputs=[ANY_SCOPE],
        roles=(Role.ACTIVATION, Role.WEIGHT),
        applies=_layout_is(data_layout="NCHW4c", kernel_layout="OIHW4o", out_layout="NCHW4c"),
        keep_for_scoping=True,
    )
    pools = [
        OpRegistration(
            name, inputs=[ANY_SCOPE], outputs=[ANY_SCOPE], applies=_layout_is(layout="NCHW4c"), keep_for_scoping=True
        )
        for name in ("relax.nn.max_pool2d", "relax.nn.avg_pool2d", "relax.nn.adaptive_avg_pool2d")
    ]
    # independent sets: packing reads an NCHW buffer and may write a texture; unpacking may read
    # a texture (one texel per element, lane selected) and writes the NCHW result
    layout = OpRegistration("relax.layout_transform", inputs=[ANY_SCOPE], outputs=[ANY_SCOPE])
    # spatial reductions of packed tensors (global pooling as ``mean``): the output follows the input
    reductions = [OpRegistration(name, inputs=ANY_SCOPE) for name in REDUCTIONS]
    # token kernels: packed operands and result synced, except a gather's (it reads its input by
    # index, in whatever mapping that has: a token view of a map, tokens mapped as one image)
    tokens = [OpRegistration(name, inputs=ANY_SCOPE) for name in (TOKEN_MATMUL, TOKEN_STAT, TOKEN_NORM)]
    gather = OpRegistration(TOKEN_GATHER, inputs=[ANY_SCOPE, ANY_SCOPE], outputs=[ANY_SCOPE])
    # a Winograd conv: data, transformed weight (a weight, like a conv's) and output as a conv's
    winograd = OpRegistration(WINOGRAD_CONV, inputs=[ANY_SCOPE, ANY_SCOPE], outputs=[ANY_SCOPE], roles=(Role.ACTIVATION, Role.WEIGHT))
    return [conv, *pools, layout, *reductions, *tokens, gather, winograd]


_DEFAULT = OpRegistry(_default_entries())


def rfc_registry() -> OpRegistry:
    """The registry of the RFC's worked example: the defaults, except that layout transforms
    read buffers (so a conv feeding the NCHW output writes a buffer, as the RFC's listing shows).
    A fresh object each call."""
    reg = OpRegistry(e for e in _default_entries() if e.name != "relax.layout_transform")
    reg.register(
        OpRegistration(
            "relax.layout_transform", inputs=[BUFFER_ONLY], outputs=[ANY_SCOPE], reason="layout-transform input: buffer (RFC)"
        )
    )
    return reg


def default_registry() -> OpRegistry:
    """The process-wide registry the passes use when none is given."""
    return _DEFAULT


def register_op(
    name: str,
    inputs: RepSetSpec,
    outputs: Optional[RepSetSpec] = None,
    *,
    roles: Sequence[Role] = (),
    preferences: Sequence[Optional[Sequence[MemoryScope]]] = (),
    applies: Optional[Callable[[relax.Call], bool]] = None,
    keep_for_scoping: bool = False,
    reason: str = "",
    override: bool = False,
    registry: Optional[OpRegistry] = None,
) -> OpRegistration:
    """Register how op ``name`` may store its tensors (see :class:`OpRegistration`).

    Example: let a custom elementwise kernel read and write textures, all tensors synced::

        relax_vk.register_op("my_kernel", inputs=relax_vk.ANY_SCOPE)
    """
    entry = OpRegistration(
        name=name,
        inputs=inputs,
        outputs=outputs,
        roles=tuple(roles),
        preferences=tuple(tuple(p) if p is not None else None for p in preferences),
        applies=applies,
        keep_for_scoping=keep_for_scoping,
        reason=reason,
    )
    return (registry or _DEFAULT).register(entry, override=override)
