"""Analysis results the scope passes hand to each other through function attributes.

``CollectConsumerScopeInfo`` attaches ``relax_vk.consumer_scope_info`` and
``CollectProducerScopeInfo`` attaches ``relax_vk.producer_scope_info``: JSON strings keyed by call
site index, stamped with the :class:`~relax_vk.passes.scope.scope_graph.ScopeGraph` fingerprint of the
function they describe. A reader whose fingerprint does not match (the function changed in
between) recomputes instead of trusting stale results; ``DefineVDevice`` removes both.
"""

from __future__ import annotations

import json
from typing import Dict, Optional

from tvm import relax

from ...core.representation import SiteDemand
from .scope_graph import ScopeGraph

CONSUMER_ATTR = "relax_vk.consumer_scope_info"
PRODUCER_ATTR = "relax_vk.producer_scope_info"


def attach(func: relax.Function, key: str, graph: ScopeGraph, sites: Dict[int, dict]) -> relax.Function:
    payload = {"fingerprint": graph.fingerprint(), "sites": {str(k): v for k, v in sites.items()}}
    return func.with_attr(key, json.dumps(payload, sort_keys=True))


def read(func: relax.Function, key: str, graph: ScopeGraph) -> Optional[Dict[int, dict]]:
    """The attached sites, or None when absent or stale."""
    if func.attrs is None or key not in func.attrs:
        return None
    payload = json.loads(str(func.attrs[key]))
    if payload.get("fingerprint") != graph.fingerprint():
        return None
    return {int(k): v for k, v in payload["sites"].items()}


def strip(func: relax.Function) -> relax.Function:
    """``func`` without the scope-analysis attributes."""
    if func.attrs is None or not any(k in func.attrs for k in (CONSUMER_ATTR, PRODUCER_ATTR)):
        return func
    for key in (CONSUMER_ATTR, PRODUCER_ATTR):
        if key in func.attrs:
            func = func.without_attr(key)
    return func


def demands_from(sites: Dict[int, dict]) -> Dict[int, SiteDemand]:
    return {k: SiteDemand.from_json(v) for k, v in sites.items()}
