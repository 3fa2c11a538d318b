"""CollectConsumerScopeInfo: what every consumer accepts and prefers for each tensor it reads.

Requires: a module after partial legalization (``call_tir`` kernels carry ``op_pattern``; ops kept
for scoping are still Relax ops with their attributes).

Guarantees: every scoped Relax function gets a ``relax_vk.consumer_scope_info`` attribute holding,
per call site, the admissible scopes of each tensor argument and output (registry sets filtered by
the target's texture limits for the actual shapes, sync rules applied), the argument's preferred
scope by :mod:`relax_vk.core.scope_rule`, and the sync structure. A module whose
``ChooseMemoryKind`` decision is ``buffer`` is scoped as with ``ScopeOptions(textures=False)``. The IR is otherwise unchanged.
Tensors reached through tuples, ``TupleGetItem`` and tuple-producing calls (``split``) are traced
to their producer (see :mod:`relax_vk.passes.scope.scope_graph`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, Optional

import tvm
from tvm import relax

from ...core import target as _target
from ...core.options import ScopeOptions
from ...core.registry import OpRegistry, default_registry
from ...core.representation import BUFFER_ONLY, SiteDemand, TensorRepSet, TensorSpec, make_op_repsets
from ...core.scope import TextureLimits
from ...core.scope_rule import Role
from . import scope_info
from .choose_memory_kind import effective_options
from .scope_graph import CallSite, ScopeGraph, scope_module_pass


def site_demand(
    site: CallSite,
    mod: Optional[tvm.IRModule],
    registry: OpRegistry,
    limits: TextureLimits,
    options: ScopeOptions,
    reg=None,
) -> SiteDemand:
    """The :class:`SiteDemand` of one call site (``reg``: its registration, when already looked up)."""
    reg = reg or registry.lookup(site.call, mod)
    args = [TensorSpec(a.spec.shape, a.spec.dtype, reg.role(a.position)) for a in site.args]
    inputs, outputs = reg.inputs, reg.outputs
    if not options.textures:
        inputs, outputs = BUFFER_ONLY, BUFFER_ONLY
    elif not options.weights_in_texture and any(t.role is Role.WEIGHT for t in args):
        per_arg = [inputs] * len(args) if isinstance(inputs, TensorRepSet) else list(inputs)
        per_arg += [BUFFER_ONLY] * (len(args) - len(per_arg))
        inputs = [BUFFER_ONLY if t.role is Role.WEIGHT else s for s, t in zip(per_arg, args)]
        if outputs is None:
            outputs = per_arg[0]
    reps = make_op_repsets(site.name, args, site.outs, inputs, outputs, limits, reg.preferences)
    return reps.demand(registration=reg.name, reason=reg.reason)


def collect_consumer_scope_info(
    graph: ScopeGraph,
    limits: TextureLimits,
    registry: Optional[OpRegistry] = None,
    options: Optional[ScopeOptions] = None,
) -> Dict[int, SiteDemand]:
    """Per call site index, its :class:`SiteDemand` (the analysis behind the pass)."""
    registry = registry or default_registry()
    options = effective_options(graph.mod, options) if graph.mod is not None else (options or ScopeOptions())
    memo: Dict[tuple, SiteDemand] = {}
    result = {}
    for site in graph.sites:
        # sites with the same registration and tensor types have the same demand (conv chains
        # repeat a handful of shapes thousands of times)
        reg = registry.lookup(site.call, graph.mod)
        key = (id(reg), tuple(a.spec for a in site.args), tuple(site.outs))
        if key not in memo:
            memo[key] = site_demand(site, graph.mod, registry, limits, options, reg)
        demand = memo[key]
        result[site.index] = demand if demand.op == site.name else replace(demand, op=site.name)
    return result


def CollectConsumerScopeInfo(
    target: "tvm.target.Target | str | None" = None,
    registry: Optional[OpRegistry] = None,
    options: Optional[ScopeOptions] = None,
    limits: Optional[TextureLimits] = None,
) -> tvm.transform.Pass:
    """Attach each consumer's scope demands to every scoped function (see module docstring)."""

    lim = _target.texture_limits(_target.resolve(target), limits)

    def rewrite(_mod: tvm.IRModule, graph: ScopeGraph) -> relax.Function:
        demands = collect_consumer_scope_info(graph, lim, registry, options)
        return scope_info.attach(graph.func, scope_info.CONSUMER_ATTR, graph, {k: d.to_json() for k, d in demands.items()})

    return scope_module_pass("relax_vk.CollectConsumerScopeInfo", rewrite)
