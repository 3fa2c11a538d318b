"""Representation sets and per-op representation constraints (after ExecuTorch Vulkan's ``OpRepSets``).

A :class:`TensorRepSet` is the set of memory scopes a tensor may take. An :class:`OpRepSets` holds,
for one call, the admissible set of every tensor argument and output, already filtered by the
texture limits for the actual shapes, plus three sync rules inferred from how the op was
registered (see :mod:`relax_vk.core.registry`):

* ``sync_args``: all tensor inputs take one representation (registered with ONE input set);
* ``sync_outs``: all outputs take one representation (registered with ONE output set);
* ``sync_primary_io``: the primary input and the first output take one representation
  (registered without an explicit output set: outputs default to the primary input's set, as
  ExecuTorch's ``outputs_storage`` defaults to ``inputs_storage[0]``).

Arguments whose shape cannot be a texture at all (scalars, 1-D bias vectors, int8, dynamic) are
*neutral* for syncing: they stay buffers and do not pull the synced group into a buffer.
Invariant (checked in ``__post_init__``): every set is non-empty after filtering, or the op is
texture-only and the error names the op, argument and limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

from .scope import ALL_SCOPES, GLOBAL, TEXTURE_SCOPES, MemoryScope, TextureLimitError, TextureLimits, is_texturable
from .scope_rule import Role, choose_scope


@dataclass(frozen=True)
class TensorRepSet:
    """An admissible set of memory scopes for one tensor."""

    scopes: FrozenSet[MemoryScope]

    @staticmethod
    def of(*scopes: MemoryScope) -> "TensorRepSet":
        return TensorRepSet(frozenset(scopes))

    def intersect(self, other: "TensorRepSet") -> "TensorRepSet":
        return TensorRepSet(self.scopes & other.scopes)

    def union(self, other: "TensorRepSet") -> "TensorRepSet":
        return TensorRepSet(self.scopes | other.scopes)

    def is_empty(self) -> bool:
        return not self.scopes

    def has_texture(self) -> bool:
        return any(s.is_texture for s in self.scopes)

    def __contains__(self, scope: MemoryScope) -> bool:
        return scope in self.scopes

    def filtered(self, shape, dtype: str, limits: TextureLimits) -> "TensorRepSet":
        """Drop the texture scopes this tensor does not fit."""
        return TensorRepSet(frozenset(s for s in self.scopes if s.fits(shape, dtype, limits)))

    def names(self) -> List[str]:
        order = {s: i for i, s in enumerate(ALL_SCOPES)}
        return [s.name for s in sorted(self.scopes, key=order.__getitem__)]


ANY_SCOPE = TensorRepSet(frozenset(ALL_SCOPES))
BUFFER_ONLY = TensorRepSet.of(GLOBAL)
TEXTURE_ONLY = TensorRepSet(frozenset(TEXTURE_SCOPES))


@dataclass(frozen=True)
class TensorSpec:
    """A tensor argument or output as the scope passes see it."""

    shape: Optional[Tuple[int, ...]]  # None when dynamic
    dtype: str
    role: Role = Role.ACTIVATION

    @property
    def texturable(self) -> bool:
        return is_texturable(self.shape, self.dtype)


@dataclass
class OpRepSets:
    """Admissible scopes of every tensor argument and output of one call, with sync rules applied."""

    op_name: str
    args: List[TensorSpec]
    outs: List[TensorSpec]
    arg_sets: List[TensorRepSet]
    out_sets: List[TensorRepSet]
    sync_args: bool
    sync_outs: bool
    sync_primary_io: bool
    limits: TextureLimits
    preferences: List[Optional[Tuple[MemoryScope, ...]]] = field(default_factory=list)
    primary: Optional[int] = None

    def __post_init__(self) -> None:
        self.arg_sets = [s.filtered(t.shape, t.dtype, self.limits) for s, t in zip(self.arg_sets, self.args)]
        self.out_sets = [s.filtered(t.shape, t.dtype, self.limits) for s, t in zip(self.out_sets, self.outs)]
        self.primary = next((i for i, t in enumerate(self.args)), None)
        self._peers: Dict[Tuple[str, int], List[Tuple[str, int]]] = {}  # synced texturable members
        if self.sync_args:
            self._sync([("arg", i) for i in range(len(self.args))])
        if self.sync_outs:
            self._sync([("out", i) for i in range(len(self.outs))])
        if self.sync_primary_io and self.primary is not None and self.outs:
            group = [("arg", i) for i in range(len(self.args))] if self.sync_args else [("arg", self.primary)]
            group += [("out", i) for i in range(len(self.outs))] if self.sync_outs else [("out", 0)]
            self._sync(group)
        for kind, sets, specs in (("argument", self.arg_sets, self.args), ("output", self.out_sets, self.outs)):
            for i, (s, t) in enumerate(zip(sets, specs)):
                if s.is_empty():
                    raise TextureLimitError(
                        f"op {self.op_name}: {kind} {i} (shape {t.shape}, {t.dtype}) fits none of its "
                        f"registered scopes under limits spatial={self.limits.spatial}, depth={self.limits.depth}"
                    )

    def _sync(self, members: Sequence[Tuple[str, int]]) -> None:
        """Intersect the sets of the texturable members; neutral members keep their own set."""
        real = [(k, i) for k, i in members if self._spec(k, i).texturable]
        if len(real) < 2:
            return
        for member in real:
            known = self._peers.setdefault(member, [])
            known += [m for m in real if m != member and m not in known]
        common = self._set(*real[0])
        for k, i in real[1:]:
            common = common.intersect(self._set(k, i))
        if common.is_empty():
            common = BUFFER_ONLY
        for k, i in real:
            (self.arg_sets if k == "arg" else self.out_sets)[i] = common

    def _spec(self, kind: str, i: int) -> TensorSpec:
        return (self.args if kind == "arg" else self.outs)[i]

    def _set(self, kind: str, i: int) -> TensorRepSet:
        return (self.arg_sets if kind == "arg" else self.out_sets)[i]

    def preferred_arg_scope(self, i: int) -> MemoryScope:
        """What argument ``i`` asks for when nothing downstream constrains it."""
        t = self.args[i]
        pref = self.preferences[i] if i < len(self.preferences) else None
        peers = [self._spec(*m).shape for m in self._peers.get(("arg", i), [])]  # (they share its scope)
        return choose_scope(t.shape, t.dtype, self.arg_sets[i].scopes, self.limits, t.role, pref, peers)

    def demand(self, registration: str = "", reason: str = "") -> "SiteDemand":
        """The serialisable summary the producer decision works from."""
        follow: List[int] = []
        # a neutral output (one that cannot be a texture, e.g. the [..., 1] statistics of a
        # channel reduction) does not pull its inputs into a buffer, as in ``_sync``
        if self.sync_primary_io and self.primary is not None and self.outs and self.outs[0].texturable:
            follow = list(range(len(self.args))) if self.sync_args else [self.primary]
        share = [i for i, t in enumerate(self.args) if t.texturable] if self.sync_args and not follow else []
        return SiteDemand(
            op=self.op_name,
            registration=registration,
            reason=reason,
            arg_allowed=[s.names() for s in self.arg_sets],
            arg_preferred=[self.preferred_arg_scope(i).name for i in range(len(self.args))],
            arg_texturable=[t.texturable for t in self.args],
            follow_output=follow,
            share_among=share,
            out_allowed=[s.names() for s in self.out_sets],
            sync_outs=self.sync_outs,
        )


@dataclass
class SiteDemand:
    """What one call site accepts and prefers for each tensor, with its sync structure.

    ``follow_output``: argument positions whose scope follows the first output's (io sync);
    ``share_among``: texturable argument positions that share one scope (args sync without io);
    ``sync_outs``: all outputs take one scope.
    """

    op: str
    registration: str
    reason: str
    arg_allowed: List[List[str]]
    arg_preferred: List[str]
    arg_texturable: List[bool]
    follow_output: List[int]
    share_among: List[int]
    out_allowed: List[List[str]]
    sync_outs: bool

    def arg_scopes_given_output(self, out0: Optional[str]) -> List[str]:
        """The scope each argument demands once the first output's scope is decided."""
        result = list(self.arg_preferred)
        for i in self.follow_output:
            if out0 is not None and out0 in self.arg_allowed[i]:
                result[i] = out0
        if self.share_among:
            shared = result[self.share_among[0]]
            for i in self.share_among:
                if shared in self.arg_allowed[i]:
                    result[i] = shared
        return result

    def to_json(self) -> dict:
        return dict(self.__dict__)

    @staticmethod
    def from_json(data: dict) -> "SiteDemand":
        return SiteDemand(**data)


def make_op_repsets(
    op_name: str,
    args: Sequence[TensorSpec],
    outs: Sequence[TensorSpec],
    inputs: "TensorRepSet | Sequence[TensorRepSet]",
    outputs: "TensorRepSet | Sequence[TensorRepSet] | None",
    limits: TextureLimits,
    preferences: Iterable[Optional[Tuple[MemoryScope, ...]]] = (),
) -> OpRepSets:
    """Build an :class:`OpRepSets`, inferring the sync rules from the registration's shape."""
    sync_args = isinstance(inputs, TensorRepSet) or len(inputs) == 1
    given = [inputs] if isinstance(inputs, TensorRepSet) else list(inputs)
    arg_sets = _broadcast(given, len(args))
    sync_primary_io = outputs is None
    if outputs is None:
        # (a kernel with no tensor inputs, a generator like ``full``: its output may be stored as
        # the registration's inputs may, so its consumers decide; it is not forced into a buffer)
        outputs = arg_sets[0] if arg_sets else (given[0] if given else BUFFER_ONLY)
    sync_outs = isinstance(outputs, TensorRepSet) or len(outputs) == 1
    out_sets = _broadcast([outputs] if isinstance(outputs, TensorRepSet) else list(outputs), len(outs))
    return OpRepSets(
        op_name=op_name,
        args=list(args),
        outs=list(outs),
        arg_sets=arg_sets,
        out_sets=out_sets,
        sync_args=sync_args,
        sync_outs=sync_outs,
        sync_primary_io=sync_primary_io,
        limits=limits,
        preferences=list(preferences),
    )


def _broadcast(sets: List[TensorRepSet], n: int) -> List[TensorRepSet]:
    """ExecuTorch's ``TensorRepSetList`` broadcasting: a one-element list serves every position;
    positions past a longer list are buffers."""
    if len(sets) == 1:
        return sets * n
    return [sets[i] if i < len(sets) else BUFFER_ONLY for i in range(n)]
