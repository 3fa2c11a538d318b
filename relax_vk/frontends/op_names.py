"""The model's own op names, caught while an importer converts the model (see
:mod:`relax_vk.core.provenance`, which follows them through the compiler).

Both of TVM's importers keep a table from the model's nodes to the Relax values their conversion
returned (``env`` for PyTorch FX nodes, ``_nodes`` for ONNX output names); :class:`RecordingTable`
stands in for that table and remembers, in conversion order, which variable each model op made.
"""

from __future__ import annotations

from typing import Callable, List, Tuple

from tvm import relax


class RecordingTable(dict):
    """A dict that records ``(variable name or call, model op name)`` for every Relax variable (or
    call, bound later) stored in it (``name_of(key)`` names the model op of a key; None: not a
    model op)."""

    def __init__(self, name_of: Callable[[object], "str | None"]):
        super().__init__()
        self.name_of = name_of
        self.made_by: List[Tuple[str, str]] = []

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        if isinstance(value, (relax.Var, relax.Call)):  # (ONNX keeps calls it binds later)
            name = self.name_of(key)
            if name:
                self.made_by.append((value.name if isinstance(value, relax.Var) else value, name))


def torch_op_name(node) -> "str | None":
    """A PyTorch FX node's name for the user: the path of the module that called it
    (``layer1.0.conv1``), with the node's own name after a ``/`` when that module calls more
    than one op (``layer1.0/add``); the node name for a call outside any module. None for what is
    not an op call (inputs, parameters)."""
    if getattr(node, "op", None) != "call_function":
        return None
    if _is_getitem(node) and node.args:  # an output of a multi-output op: that op
        return torch_op_name(node.args[0])
    stack = node.meta.get("nn_module_stack") or {}
    paths = [path for path, _type in stack.values() if path]
    if not paths:
        return node.name
    path = paths[-1]
    return path if _single_op_modules(node.graph).get(path) else f"{path}/{node.name}"


def _single_op_modules(graph) -> dict:
    """Module path -> whether exactly one op node of ``graph`` was called by that module (cached
    on the graph)."""
    cached = getattr(graph, "_relax_vk_single_op_modules", None)
    if cached is not None:
        return cached
    counts: dict = {}
    for n in graph.nodes:
        if n.op != "call_function" or _is_getitem(n):
            continue
        paths = [path for path, _type in (n.meta.get("nn_module_stack") or {}).values() if path]
        if paths:
            counts[paths[-1]] = counts.get(paths[-1], 0) + 1
    cached = {path: count == 1 for path, count in counts.items()}
    try:
        graph._relax_vk_single_op_modules = cached
    except AttributeError:
        pass
    return cached


def _is_getitem(node) -> bool:
    import operator

    return node.target is operator.getitem
