"""Small IR queries shared by passes and legalizers."""

from __future__ import annotations

from typing import Set

import tvm
from tvm import relax

from .scope import GLOBAL, MemoryScope, scope_from_name


def tensor_scope(ty) -> MemoryScope:
    """The memory scope a tensor type's VDevice names; ``global`` without one (or for non-tensors)."""
    if isinstance(ty, relax.TensorType) and ty.vdevice is not None:
        return scope_from_name(str(ty.vdevice.memory_scope))
    return GLOBAL


def ops_in(mod: tvm.IRModule) -> Set[str]:
    """Names of the Relax ops called anywhere in ``mod``'s Relax functions."""
    names: Set[str] = set()

    def visit(expr):
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
            names.add(expr.op.name)

    for _, func in mod.functions_items():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return names


def tir_uses_any(expr, variables) -> bool:
    """Whether the TIR expression ``expr`` reads any of ``variables``."""
    if not variables:
        return False
    from tvm import tirx

    free = tirx.analysis._ffi_api.UndefinedVars(expr, [])
    return any(any(v.same_as(u) for u in variables) for v in free)


def rewrite_functions(mutator: relax.PyExprMutator, mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with each of its Relax functions visited by ``mutator`` (a ``PyExprMutator`` made on
    ``mod``): the module of the mutator's builder."""
    for gv, func in list(mod.functions_items()):
        if isinstance(func, relax.Function):
            mutator.builder_.update_func(gv, mutator.visit_expr(func))
    return mutator.builder_.get()


def run_time_size(func) -> bool:
    """Whether a TIR PrimFunc's sizes depend on run-time dims: it takes an int64 scalar parameter
    (a size; a finalized device kernel's other scalars, texture origins, are int32), or a buffer
    parameter has an extent that is not a constant (a scheduled kernel's buffers)."""
    from tvm import tirx
    from tvm.tirx.buffer import BufferType

    for p in func.params:
        ty = p.ty
        if isinstance(ty, tvm.ir.PrimType) and str(ty.dtype) == "int64":
            return True
        if isinstance(ty, BufferType) and any(not isinstance(d, tirx.IntImm) for d in ty.shape):
            return True
    return False


def node_id(node) -> int:
    """A TVM node's identity as an int (what ``same_as`` compares: its address, unique while the
    node is alive)."""
    return hash(node)


class NodeDict(dict):
    """A dict keyed by TVM nodes by identity. A plain dict calls the key's ``__eq__`` whenever the
    lookup holds another Python wrapper of the same node (every traversal makes new ones), and
    TVM's ``Expr.__eq__`` reads the node's type through the FFI first (a PrimExpr's builds an
    ``EQ`` node): measured, a sixth of emitting mobilenet_v2's WGSL. Keys are held as
    :func:`node_id` (the nodes must stay alive while the dict is used: they are the function's)."""

    def __getitem__(self, node):
        return dict.__getitem__(self, node_id(node))

    def __setitem__(self, node, value) -> None:
        dict.__setitem__(self, node_id(node), value)

    def __contains__(self, node) -> bool:
        return dict.__contains__(self, node_id(node))

    def get(self, node, default=None):
        return dict.get(self, node_id(node), default)


class NodeSet(set):
    """A set of TVM nodes by identity (see :class:`NodeDict`); its members are :func:`node_id`
    ints, which a :class:`NodeDict` also takes as keys."""

    def add(self, node) -> None:
        set.add(self, node_id(node))

    def __contains__(self, node) -> bool:
        return set.__contains__(self, node_id(node))
