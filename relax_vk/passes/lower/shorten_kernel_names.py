"""ShortenKernelNames: bound the length of every kernel's name.

Requires: a fused module (after ``FuseTIR``); names are final from here on, but for the
``_kernel`` suffix TVM's codegen appends.

Guarantees: every PrimFunc whose name is longer than :data:`MAX_NAME` characters is renamed to
its first characters, cut at an underscore, plus ``_`` and 8 hex digits of a hash of the whole
name (distinct names stay distinct; the same module always gets the same names; the whole name
stays in the attribute ``relax_vk.full_name``), and every call of it calls the new name. ``FuseOps`` names a fused kernel after every op it holds: a long
fusion chain (four elementwise branches, their resizes and a concat in a text detector's neck)
made a 280-character kernel name, which pocl writes as a file name (over the file system's
255-byte limit: the process aborts at the first launch) and which other tools truncate. Other
functions and names are untouched.
"""

from __future__ import annotations

import hashlib
from typing import Dict

import tvm
from tvm import relax, tirx

MAX_NAME = 120  # characters, before the codegen's "_kernel" (pocl: a file name, at most 255 bytes)
FULL_NAME_ATTR = "relax_vk.full_name"  # a renamed kernel keeps its whole name here


def short_name(name: str, limit: int = MAX_NAME) -> str:
    """``name`` if it is at most ``limit`` characters, else a readable prefix and a hash of it."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    head = name[: limit - len(digest) - 1]
    if "_" in head[limit // 2 :]:  # (cut at the last op boundary in the second half)
        head = head[: head.rindex("_")]
    return f"{head.rstrip('_')}_{digest}"


@relax.expr_functor.mutator
class _Rename(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule, renamed: Dict[tvm.ir.GlobalVar, tvm.ir.GlobalVar]):
        super().__init__(mod)
        self.renamed = renamed

    def visit_global_var_(self, gvar):
        return self.renamed.get(gvar, gvar)


def rename_functions(mod: tvm.IRModule, names: Dict[tvm.ir.GlobalVar, str], annotate=None) -> tvm.IRModule:
    """``mod`` with each function of ``names`` under its new name (``annotate(old gvar, func)``, when
    given, returns the function to store) and every call of it calling the new name. The new names
    must be free in ``mod``; ``mod`` is returned unchanged when ``names`` is empty."""
    if not names:
        return mod
    renamed = {}
    for gvar, name in names.items():  # (not BlockBuilder.add_func: it returns the old name of an identical function)
        renamed[gvar] = tvm.ir.GlobalVar(name)
        relax.expr._update_type(renamed[gvar], gvar.ty)
    functions = {}
    for gvar, func in mod.functions_items():
        if gvar in renamed:
            functions[renamed[gvar]] = annotate(gvar, func) if annotate else func
        else:
            functions[gvar] = _Rename(mod, renamed).visit_expr(func) if isinstance(func, relax.Function) else func
    return tvm.IRModule(functions, attrs=mod.attrs, global_infos=mod.global_infos)


def ShortenKernelNames(limit: int = MAX_NAME) -> tvm.transform.Pass:
    """Rename kernels whose names are longer than ``limit`` characters (module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        taken = {gv.name_hint for gv in mod.get_global_vars()}
        names: Dict[tvm.ir.GlobalVar, str] = {}
        for gvar, func in mod.functions_items():
            if isinstance(func, tirx.PrimFunc) and len(gvar.name_hint) > limit:
                name = short_name(gvar.name_hint, limit)
                while name in taken:  # (a clash with an existing short name: hash the hash)
                    name = short_name(name + "_", limit)
                taken.add(name)
                names[gvar] = name
        return rename_functions(mod, names, lambda gvar, func: func.with_attr(FULL_NAME_ATTR, gvar.name_hint))

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.ShortenKernelNames")
