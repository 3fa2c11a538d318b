"""CollectProducerScopeInfo: decide every producer's output scope by consumer demand and cost.

Requires: ``CollectConsumerScopeInfo`` (its attribute is recomputed when missing or stale).

Algorithm: one sweep over call sites in *reverse* order, so a call's consumers are decided before
the call itself. For each output slot the candidate scopes are the producer's admissible set; the
cost of a candidate is the bytes copied: one copy of the tensor per *distinct* demanded scope that
differs from it (consumers that want the same scope share one copy). The cheapest candidate wins;
ties go to the scope most consumers demand, then to texture over buffer (rule order). Outputs of
an op registered with synced outputs are decided together. Slots that escape the dataflow block
are buffers. Once a call's first output is decided, its arguments' demands follow the sync rules
(an io-synced elementwise op asks its inputs for the scope its output got).

Example: one producer with two texture consumers and one buffer consumer becomes a texture, with
one copy to a buffer (upstream TVM makes it a buffer and copies once per texture consumer).

Guarantees: a ``relax_vk.producer_scope_info`` attribute with, per call site, the decided scope of
each output and the demanded scope of each tensor argument. The IR is otherwise unchanged.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import tvm
from tvm import relax

from ...core import target as _target
from ...core.options import ScopeOptions
from ...core.registry import OpRegistry
from ...core.representation import SiteDemand
from ...core.scope import GLOBAL, scope_from_name, tensor_bytes
from ...core.scope_rule import rank_scopes
from . import scope_info
from .collect_consumer_scope_info import collect_consumer_scope_info
from .scope_graph import ScopeGraph, Slot, scope_module_pass


def _slot_cost(scope: str, demanded: Sequence[str], nbytes: int) -> int:
    return nbytes * len({d for d in demanded if d != scope})


def _choose(candidates: List[str], demands: List[List[str]], nbytes: List[int]) -> str:
    """The candidate minimising bytes copied over all slots decided together."""
    if not candidates:
        raise ValueError("no admissible scope")
    order = [s.name for s in rank_scopes(scope_from_name(c) for c in candidates)]

    def key(scope: str):
        cost = sum(_slot_cost(scope, d, b) for d, b in zip(demands, nbytes))
        votes = sum(d.count(scope) for d in demands)
        return (cost, -votes, order.index(scope))

    return min(order, key=key)


def _slot_bytes(graph: ScopeGraph, slot: Slot) -> int:
    spec = graph.slot_spec(slot)
    return tensor_bytes(spec.shape, spec.dtype) if spec.shape is not None and spec.dtype != "void" else 0


def _decide_outputs(graph: ScopeGraph, site, demand: SiteDemand, wanted: Dict[Slot, List[str]]) -> List[str]:
    """The scope of each output of ``site``, given what its (already decided) consumers want."""
    outs = [GLOBAL.name] * len(site.outs)
    n = len(site.outs)
    groups = [list(range(n))] if demand.sync_outs and n else [[k] for k in range(n)]
    for group in groups:
        slots = [(site.index, k) for k in group]
        common = None
        for slot, k in zip(slots, group):
            allowed = set(demand.out_allowed[k])
            if slot in graph.pinned and GLOBAL.name in allowed:
                allowed = {GLOBAL.name}  # escapes the block: a buffer
            common = allowed if common is None else common & allowed
        common = common or {GLOBAL.name}
        demanded = [wanted.get(slot, []) for slot in slots]
        if any(demanded):
            chosen = _choose(sorted(common), demanded, [_slot_bytes(graph, slot) for slot in slots])
        else:  # unused or escaping only: a buffer when the op can write one
            chosen = GLOBAL.name if GLOBAL.name in common else rank_scopes(scope_from_name(c) for c in common)[0].name
        for k in group:
            outs[k] = chosen
    return outs


def decide_scopes(graph: ScopeGraph, demands: Dict[int, SiteDemand]) -> Dict[int, dict]:
    """Per call site: ``{"outs": [scope per output], "args": [scope per tensor argument]}``."""
    wanted: Dict[Slot, List[str]] = {}
    decisions: Dict[int, dict] = {}
    for site in reversed(graph.sites):
        demand = demands[site.index]
        outs = _decide_outputs(graph, site, demand, wanted)
        args = demand.arg_scopes_given_output(outs[0] if outs else None)
        for arg, scope in zip(site.args, args):
            if arg.slot is not None:
                wanted.setdefault(arg.slot, []).append(scope)
        decisions[site.index] = {"outs": outs, "args": args}
    return decisions


def scope_decisions(
    graph: ScopeGraph,
    target: "tvm.target.Target | str | None" = None,
    registry: Optional[OpRegistry] = None,
    options: Optional[ScopeOptions] = None,
    limits=None,
) -> Dict[int, dict]:
    """Decisions for ``graph.func``: the attached ones when fresh, else computed from scratch."""
    func = graph.func
    attached = scope_info.read(func, scope_info.PRODUCER_ATTR, graph)
    if attached is not None:
        return attached
    consumer = scope_info.read(func, scope_info.CONSUMER_ATTR, graph)
    if consumer is not None:
        demands = scope_info.demands_from(consumer)
    else:
        lim = _target.texture_limits(_target.resolve(target), limits)
        demands = collect_consumer_scope_info(graph, lim, registry, options)
    return decide_scopes(graph, demands)


def CollectProducerScopeInfo(
    target: "tvm.target.Target | str | None" = None,
    registry: Optional[OpRegistry] = None,
    options: Optional[ScopeOptions] = None,
    limits=None,
) -> tvm.transform.Pass:
    """Decide producer scopes and attach them to every scoped function (see module docstring)."""

    def rewrite(_mod: tvm.IRModule, graph: ScopeGraph) -> relax.Function:
        decisions = scope_decisions(graph, target, registry, options, limits)
        return scope_info.attach(graph.func, scope_info.PRODUCER_ATTR, graph, decisions)

    return scope_module_pass("relax_vk.CollectProducerScopeInfo", rewrite)
