"""The dataflow graph of a scoped module, for looking at a memory plan: every tensor a node
coloured by its memory scope, every copy (``to_vdevice``) marked, every intermediate labelled
with the shared allocation storage planning gave it (``#k``), and the memory numbers (without
reuse, with reuse, lower bound) in the title.

:func:`dataflow_graph` is plain data (tested like any analysis); :func:`draw_plan` renders it with
matplotlib (the ``notebook`` extra) as a layered drawing, inputs at the top.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List

import tvm
from tvm import relax

from ..core.ir_utils import tensor_scope
from ..core.scope import GLOBAL

#: node colours by memory scope (buffers grey, each texture flattening its own colour)
SCOPE_COLOURS = {
    "global": "#b0b0b0",
    "global.texture": "#4c9be8",
    "global.texture-nhwc": "#7fd17f",
    "global.texture-weight": "#f2b84b",
}
COPY_COLOUR = "#e5484d"


@dataclass
class GraphNode:
    """One tensor: a function parameter, a call output, or a copy."""

    name: str
    op: str  # op or kernel name; "param" for parameters; "copy" for to_vdevice
    scope: str  # scope of the (first) tensor it produces
    is_copy: bool = False
    inputs: List[str] = field(default_factory=list)  # names of the nodes it reads


@dataclass
class PlanGraph:
    nodes: List[GraphNode]
    outputs: List[str]

    @property
    def copies(self) -> List[GraphNode]:
        return [n for n in self.nodes if n.is_copy]

    def node(self, name: str) -> GraphNode:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def depths(self) -> Dict[str, int]:
        """Longest distance from a parameter, per node (the drawing's rows)."""
        depth: Dict[str, int] = {}
        for n in self.nodes:  # nodes are in binding order, so inputs come first
            depth[n.name] = 1 + max((depth[i] for i in n.inputs if i in depth), default=-1)
        return depth


def _scope_of(ty) -> str:
    if isinstance(ty, relax.TupleType):
        return _scope_of(ty.fields[0]) if len(ty.fields) else GLOBAL.name
    return tensor_scope(ty).name


def _op_name(call: relax.Call) -> str:
    if isinstance(call.op, tvm.ir.Op):
        if call.op.name in ("relax.call_tir", "relax.call_tir_inplace") and isinstance(call.args[0], relax.GlobalVar):
            return call.args[0].name_hint
        return call.op.name.replace("relax.", "")
    if isinstance(call.op, relax.GlobalVar):
        return call.op.name
    return type(call.op).__name__


def dataflow_graph(mod: tvm.IRModule, func: str = "main") -> PlanGraph:
    """The tensors of ``mod[func]`` and who reads whom. Aliases (``y = x``, ``y = t[k]``,
    tuple literals) are looked through, so edges connect producers to their real consumers;
    constants are left out (they are listed in :func:`relax_vk.plan`)."""
    fn = mod[func]
    alias: Dict[relax.Var, List[str]] = {}
    nodes: List[GraphNode] = []

    def sources(expr) -> List[str]:
        if isinstance(expr, relax.Var):
            return alias.get(expr, [expr.name])
        if isinstance(expr, relax.Tuple):
            return [s for f in expr.fields for s in sources(f)]
        if isinstance(expr, relax.TupleGetItem):
            return sources(expr.tuple_value)
        if isinstance(expr, relax.Call):
            return [s for a in expr.args for s in sources(a)]
        return []

    for p in fn.params:
        nodes.append(GraphNode(p.name, "param", _scope_of(p.ty)))
    body = fn.body
    for block in body.blocks if isinstance(body, relax.SeqExpr) else []:
        for b in block.bindings:
            value = getattr(b, "value", None)
            if isinstance(value, (relax.Var, relax.Tuple, relax.TupleGetItem)):
                alias[b.var] = sources(value)
                continue
            if not isinstance(value, relax.Call):
                continue
            op = _op_name(value)
            is_copy = op == "to_vdevice"
            is_tir = isinstance(value.op, tvm.ir.Op) and value.op.name.startswith("relax.call_tir")
            inputs = list(dict.fromkeys(sources(value.args[1]) if is_tir else sources(value)))  # unique, in order
            nodes.append(GraphNode(b.var.name, "copy" if is_copy else op, _scope_of(b.var.ty), is_copy, inputs))
    outputs = sources(body.body) if isinstance(body, relax.SeqExpr) else []
    return PlanGraph(nodes, outputs)


def draw_plan(mod: tvm.IRModule, func: str = "main", ax=None, max_label: int = 24):
    """Draw the dataflow graph of a scoped module: one box per tensor, coloured by scope, copies
    in red with their edges dashed. Returns the matplotlib ``Axes``."""
    from ..core.extras import require

    plt = require("matplotlib.pyplot", "notebook")
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from ..passes.layout.derive_identifiers import source_name
    from ..analysis.memory_plan import plan as memory_plan

    graph = dataflow_graph(mod, func)
    memory = memory_plan(mod)
    single = len([t for t in memory.tensors if "/" in t.name]) == 0
    shares = {t.name: t.object for t in memory.tensors if t.object is not None} if single else {}
    depth = graph.depths()
    rows: Dict[int, List[GraphNode]] = {}
    for n in graph.nodes:
        rows.setdefault(depth[n.name], []).append(n)
    pos: Dict[str, tuple] = {}
    width = max(len(r) for r in rows.values())
    for d in sorted(rows):
        row = rows[d]
        # order each row by where its inputs sit (fewer crossing edges), stable for ties
        row.sort(key=lambda n: sum(pos[i][0] for i in n.inputs if i in pos) / max(1, sum(i in pos for i in n.inputs)))
        for i, n in enumerate(row):
            pos[n.name] = ((i + 0.5) * width / len(row), -d)
    if ax is None:
        _, ax = plt.subplots(figsize=(max(5.0, 2.4 * width), max(3.0, 0.9 * len(rows))))
    for n in graph.nodes:
        for src in n.inputs:
            if src not in pos:
                continue
            (x0, y0), (x1, y1) = pos[src], pos[n.name]
            style = "--" if n.is_copy else "-"
            colour = COPY_COLOUR if n.is_copy else "#555555"
            ax.annotate("", xy=(x1, y1 + 0.18), xytext=(x0, y0 - 0.18),
                        arrowprops=dict(arrowstyle="->", linestyle=style, color=colour, lw=1.2))
    for n in graph.nodes:
        x, y = pos[n.name]
        label = n.op if len(n.op) <= max_label else n.op[: max_label - 1] + "…"
        obj = shares.get(source_name(mod[func], n.name))
        if n.op != "param" and not n.is_copy:
            label = f"{n.name}\n{label}" + (f"\nshares #{obj}" if obj is not None else "")
        elif n.op == "param":
            label = f"{n.name}\n(input)"
        else:
            label = f"{n.name}\ncopy -> {n.scope.replace('global.', '')}"
        ax.text(x, y, label, ha="center", va="center", fontsize=8,
                bbox=dict(boxstyle="round,pad=0.3", fc=SCOPE_COLOURS.get(n.scope, "#dddddd"),
                          ec=COPY_COLOUR if n.is_copy else "#333333", lw=2.0 if n.is_copy else 0.8))
    for name in graph.outputs:
        if name in pos:
            x, y = pos[name]
            ax.annotate("output", xy=(x, y - 0.2), xytext=(x, y - 0.6), ha="center", fontsize=8,
                        arrowprops=dict(arrowstyle="->", color="#333333"))
    ax.set_xlim(-0.2, width + 0.2)
    ax.set_ylim(-max(rows) - 1, 0.7)
    ax.axis("off")
    used = sorted({n.scope for n in graph.nodes})
    handles = [Patch(fc=SCOPE_COLOURS.get(s, "#dddddd"), ec="#333333", label=s) for s in used]
    if graph.copies:
        handles.append(Line2D([], [], color=COPY_COLOUR, linestyle="--", label=f"copy ({len(graph.copies)})"))
    ax.legend(handles=handles, loc="upper right", fontsize=8, frameon=False)
    if memory.storage is not None:
        m, mib = memory.storage, 1 << 20
        ax.set_title(f"intermediates: {m.without_reuse_bytes / mib:.2f} MiB without reuse, {m.with_reuse_bytes / mib:.2f} MiB with reuse\n"
                     f"({len(m.objects)} shared objects), lower bound {m.lower_bound_bytes / mib:.2f} MiB ({m.ratio:.2f}x)", fontsize=8)  # fmt: skip
    return ax
