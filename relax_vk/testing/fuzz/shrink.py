"""Shrink a failing graph to a minimal reproducer (greedy delta debugging over nodes).

A candidate removes one node: its consumers read the node's first input instead (when the
shapes still agree; otherwise they are removed too, transitively), tensors are renumbered and the
outputs follow. Candidates that are not valid graphs are skipped; one is kept when the predicate
(the same failure) still holds. Extra outputs are dropped the same way. The result is 1-minimal
with respect to single-node removal.
"""

from __future__ import annotations

from typing import Callable, List, Optional

from .graph import GraphSpec, Node, infer_shapes


def remove_node(spec: GraphSpec, index: int) -> Optional[GraphSpec]:
    """``spec`` without node ``index`` (see the module docstring), or None when nothing valid remains."""
    try:
        shapes = infer_shapes(spec)
    except ValueError:
        return None
    removed = {index}
    replacement = {index + 1: spec.nodes[index].inputs[0]}  # tensor id -> the tensor that stands in
    for i in range(index + 1, len(spec.nodes)):
        node = spec.nodes[i]
        for t in node.inputs:
            if t - 1 in removed:
                src = replacement.get(t)
                if src is None or shapes[src] != shapes[t]:
                    removed.add(i)
                    break
    if len(removed) == len(spec.nodes):
        return None
    new_id = {0: 0}
    nodes: List[Node] = []
    for i, node in enumerate(spec.nodes):
        if i in removed:
            continue
        inputs = []
        for t in node.inputs:
            while t - 1 in removed and t in replacement:
                t = replacement[t]
            inputs.append(new_id[t])
        nodes.append(Node(node.op, inputs, dict(node.params)))
        new_id[i + 1] = len(nodes)
    outputs = []
    for o in spec.outputs:
        while o - 1 in removed and o in replacement:
            o = replacement[o]
        if o in new_id and new_id[o] > 0 and new_id[o] not in outputs:
            outputs.append(new_id[o])
    if not outputs:
        outputs = [len(nodes)]
    candidate = GraphSpec(spec.input_shape, nodes, outputs, spec.seed)
    try:
        infer_shapes(candidate)
    except ValueError:
        return None
    return candidate


def shrink(spec: GraphSpec, still_fails: Callable[[GraphSpec], bool], budget: int = 60) -> GraphSpec:
    """The smallest spec reachable by single-node removals for which ``still_fails`` holds
    (at most ``budget`` predicate calls)."""
    calls = 0
    changed = True
    while changed and calls < budget:
        changed = False
        if len(spec.outputs) > 1:
            for keep in spec.outputs:
                candidate = GraphSpec(spec.input_shape, spec.nodes, [keep], spec.seed)
                calls += 1
                if still_fails(candidate):
                    spec, changed = candidate, True
                    break
        for index in reversed(range(len(spec.nodes))):
            if calls >= budget:
                break
            candidate = remove_node(spec, index)
            if candidate is None:
                continue
            calls += 1
            if still_fails(candidate):
                spec, changed = candidate, True
                break
    return spec
