"""FuseGathers: let gathers on buffers fuse like the injective ops they are.

TVM's op-pattern analysis calls a kernel opaque when an index it reads is itself read from a buffer
(``take``, ``gather``, an embedding lookup: ``out[i, j] = x[idx[i], j]``), and ``FuseOps`` then
neither fuses it into its consumer nor anything into it: one launch and one intermediate tensor per
gather. The same holds for index arithmetic it cannot see through (``i % S`` with ``S`` a
run-time dim: flattening two run-time dims). Each output element of such a kernel still depends on
its own index alone, which is what injective means to fusion: its consumers (a ``where``, an add)
read it inline.

Requires: a legalized module whose PrimFuncs carry ``op_pattern`` (after
``AnnotateTIROpPattern``), before ``FuseOps``.

Guarantees: a PrimFunc marked opaque becomes ``kInjective`` exactly when its body is one spatial
block (no reduction, no other block) that writes its one output at its own iter vars and does not
read it, and every
``call_tir`` of it reads and writes buffers only (a texture's texels are not laid out in element
order: a gather from an image stays a kernel of its own, as before). Nothing else changes.
"""

from __future__ import annotations

import tvm
from tvm import relax, tirx

from ...core.ir_utils import tensor_scope
from ...core.scope import GLOBAL
from ...schedules.analysis import _blocks

OPAQUE, INJECTIVE = 8, 2  # TVM's OpPatternKind


def _is_gather(func: tirx.PrimFunc) -> bool:
    blocks = _blocks(func)
    if len(blocks) != 1 or len(blocks[0].writes) != 1:
        return False
    block = blocks[0]
    if any(iv.iter_type != tirx.IterVar.DataPar for iv in block.iter_vars) or block.init is not None:
        return False
    write = block.writes[0]
    if any(r.source.same_as(write.source) for r in block.reads):
        return False
    ivs = [iv.var for iv in block.iter_vars]
    return len(write.region) == len(ivs) and all(r.min.same_as(v) and int(getattr(r.extent, "value", 0)) == 1 for r, v in zip(write.region, ivs))


def _buffer_calls_only(mod: tvm.IRModule) -> dict:
    """``{PrimFunc name: whether every call of it reads and writes buffers only}``."""
    only: dict = {}

    def visit(expr):
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name == "relax.call_tir":
            args = expr.args[1].fields if isinstance(expr.args[1], relax.Tuple) else [expr.args[1]]
            types = [a.ty for a in args] + [expr.ty]
            ok = all(tensor_scope(t) == GLOBAL for t in types)
            name = expr.args[0].name_hint
            only[name] = only.get(name, True) and ok

    for _, func in mod.functions_items():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return only


def FuseGathers() -> tvm.transform.Pass:
    """Gathers on buffers marked injective, so that FuseOps fuses them (see module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        buffers = _buffer_calls_only(mod)
        for gvar, func in list(mod.functions_items()):
            if not isinstance(func, tirx.PrimFunc) or func.attrs is None or int(func.attrs.get("op_pattern", -1)) != OPAQUE:
                continue
            if buffers.get(gvar.name_hint) and _is_gather(func):
                mod[gvar] = func.with_attr("op_pattern", INJECTIVE)
        return mod

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.FuseGathers")
