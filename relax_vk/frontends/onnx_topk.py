"""ONNX ``TopK`` whose ``K`` is the size of its axis: a sort (``torch.sort`` and ``argsort``
exported to ONNX write ``TopK(x, Shape(x)[axis])``).

TVM's converter needs ``K`` constant ("TopK k must be a constant"), and its importer refuses a
shape value as ``K`` before any converter runs ("cannot handle ShapeExpr inputs": the dynamo
exporter's ``Reshape`` of the size). At a static size onnxslim folds ``K`` to a constant; at a
run-time size of the axis :func:`rewrite_full_topk` finds ``K = Gather(Shape(x), axis)`` (through
``Reshape``, ``Unsqueeze``, ``Squeeze``, ``Cast`` and ``Identity``) on the graph, before import,
and replaces the node by relax_vk's ``SortAlongAxis`` (domain ``ai.relax_vk``, no ``K`` input),
which :func:`convert_sort` imports: every element kept, the values sorted by ``argsort``
(descending for ``largest=1``) and gathered along the axis, the indices int64 as ONNX gives them.
Any other ``K`` stays a ``TopK`` for TVM's converter (and its error).
"""

from __future__ import annotations

DOMAIN = "ai.relax_vk"
OP = "SortAlongAxis"
_PASS_THROUGH = ("Reshape", "Unsqueeze", "Squeeze", "Cast", "Identity")


def _constant(model, name: str):
    """The numpy value of ``name`` if it is an initializer or a ``Constant`` node's output, else None."""
    from onnx import numpy_helper

    for init in model.graph.initializer:
        if init.name == name:
            return numpy_helper.to_array(init)
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output[0] == name:
            for a in node.attribute:
                if a.name == "value":
                    return numpy_helper.to_array(a.t)
                if a.name in ("value_int", "value_ints"):
                    import numpy as np

                    return np.array(a.i if a.name == "value_int" else list(a.ints))
    return None


def _is_axis_size(model, producers: dict, k: str, data: str, axis: int, rank) -> bool:
    """Whether ``k`` is ``Gather(Shape(data), axis)`` through shape-preserving ops."""
    node = producers.get(k)
    while node is not None and node.op_type in _PASS_THROUGH:
        node = producers.get(node.input[0])
    if node is None or node.op_type != "Gather" or len(node.input) != 2:
        return False
    shape = producers.get(node.input[0])
    index = _constant(model, node.input[1])
    if shape is None or shape.op_type != "Shape" or shape.input[0] != data or index is None or index.size != 1:
        return False
    start = next((a.i for a in shape.attribute if a.name == "start"), 0)
    if any(a.name == "end" for a in shape.attribute) or (start < 0 and rank is None):
        return False
    first = start % rank if rank is not None and start < 0 else start
    i = int(index.reshape(-1)[0])
    return rank is not None and (first + i) % rank == axis % rank


def rewrite_full_topk(model) -> int:
    """Replace every ``TopK`` whose ``K`` is its axis's size by ``SortAlongAxis`` (module
    docstring); returns how many. ``model`` is changed in place."""
    from onnx import helper

    producers = {o: n for n in model.graph.node for o in n.output}
    ranks = {}
    for v in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape"):
            ranks[v.name] = len(v.type.tensor_type.shape.dim)
    count = 0
    for i, node in enumerate(model.graph.node):
        if node.op_type != "TopK" or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
            continue
        attrs = {a.name: a.i for a in node.attribute}
        axis = attrs.get("axis", -1)
        rank = ranks.get(node.input[0])
        if rank is None or not _is_axis_size(model, producers, node.input[1], node.input[0], axis % rank, rank):
            continue
        sort = helper.make_node(OP, [node.input[0]], list(node.output), name=node.name, domain=DOMAIN, axis=axis % rank, largest=attrs.get("largest", 1))
        model.graph.node.remove(node)
        model.graph.node.insert(i, sort)
        count += 1
    if count and not any(o.domain == DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    return count


def convert_sort(bb, inputs, attrs):
    """``SortAlongAxis``: ``(values, int64 indices)`` of the whole axis, sorted."""
    from tvm import relax

    data = inputs[0]
    axis = int(attrs.get("axis", -1))
    indices = bb.normalize(relax.op.argsort(data, axis=axis, descending=bool(attrs.get("largest", 1)), dtype="int64"))
    values = bb.normalize(relax.op.gather_elements(data, indices, axis=axis))
    return relax.Tuple([values, indices])


CONVERTERS = {OP: convert_sort}
