"""The plan graph: tensors, edges through aliases, copies marked, and the drawing."""

import pytest

import relax_vk
from relax_vk.models import build_example
from relax_vk.tools.plan_graph import SCOPE_COLOURS, dataflow_graph


def test_graph_of_mixed_consumers_marks_the_one_copy():
    # the RFC's registry: the softmax's unpacking transform reads a buffer, so the conv's texture
    # output is copied once for it
    mod = relax_vk.scope_pipeline(registry=relax_vk.rfc_registry())(build_example("mixed-consumers"))
    graph = dataflow_graph(mod)
    copies = graph.copies
    assert len(copies) == 1
    copy = copies[0]
    src = graph.node(copy.inputs[0])
    assert src.op == "nn.conv2d" and src.scope == "global.texture"
    assert copy.scope == "global"
    readers = [n for n in graph.nodes if copy.name in n.inputs]
    assert readers and all(r.scope == "global" for r in readers)
    assert graph.outputs == [graph.nodes[-1].name]
    assert len(relax_vk.plan(mod).tensors) and relax_vk.plan(mod).copies == len(copies)


def test_graph_edges_follow_the_dataflow():
    mod = relax_vk.scope_pipeline()(build_example("rfc-conv2d"))
    graph = dataflow_graph(mod)
    conv = next(n for n in graph.nodes if n.op == "nn.conv2d")
    assert [graph.node(i).scope for i in conv.inputs] == ["global.texture", "global.texture-weight"]
    depth = graph.depths()
    assert depth["x"] == 0 and depth[conv.name] == 2 and depth[graph.outputs[0]] == 3


def test_draw_plan_colours_nodes_by_scope(monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from relax_vk.tools.plan_graph import draw_plan

    mod = relax_vk.scope_pipeline(registry=relax_vk.rfc_registry())(build_example("mixed-consumers"))
    ax = draw_plan(mod)
    boxes = [t for t in ax.texts if t.get_bbox_patch() is not None]
    assert len(boxes) == len(dataflow_graph(mod).nodes)
    colours = {matplotlib.colors.to_hex(b.get_bbox_patch().get_facecolor()) for b in boxes}
    assert colours == {SCOPE_COLOURS["global"], SCOPE_COLOURS["global.texture"]}
    assert "copy (1)" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert "without reuse" in ax.get_title() and "lower bound" in ax.get_title()
    assert any("shares #" in b.get_text() for b in boxes)  # each intermediate names its shared allocation
