"""LegalizeWithScopes: legalize every remaining op so that each ``call_tir`` carries its VDevice.

Requires: a scoped module (``scope_pipeline`` output): every call's result type carries the
decided VDevice.

Guarantees: every op is legalized (relax_vk's NCHW4c conv2d for any ``groups``, TVM's legalizers
for the rest) and every resulting ``call_tir``'s ``out_ty`` carries the VDevice of the call it
replaces. TVM's ``gen_call_tir_inputs`` takes the VDevice from the first *positional* tensor
argument, so legalizers that pass tensors as keyword arguments (the default NCHW conv2d) lose it,
and a pool whose output scope differs from its input's gets its input's; both are corrected
here. A legalizer that does not produce a single ``call_tir`` for a call whose VDevice it dropped
is reported by name, never silently accepted.
"""

from __future__ import annotations

import tvm
from tvm import relax

from ...core.errors import RelaxVKError
from ...core.ir_utils import ops_in
from ...legalize import LEGALIZE_MAP


def _vdevices(ty):
    if isinstance(ty, relax.TupleType):
        return [f.vdevice if isinstance(f, relax.TensorType) else None for f in ty.fields]
    return [ty.vdevice if isinstance(ty, relax.TensorType) else None]


def _with_vdevices(ty, vdevs):
    if isinstance(ty, relax.TupleType):
        return relax.TupleType([relax.TensorType(f.shape, f.dtype, v) if v is not None else f for f, v in zip(ty.fields, vdevs)])
    return relax.TensorType(ty.shape, ty.dtype, vdevs[0]) if vdevs[0] is not None else ty


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return str(a.memory_scope) == str(b.memory_scope) and a.target.kind.name == b.target.kind.name


class ScopeLostError(RelaxVKError, RuntimeError):
    """A legalizer dropped the VDevice of a call in a way that cannot be repaired."""


def keep_vdevice(op_name: str, legalize):
    """Wrap a legalizer so the ``call_tir`` it returns has the original call's VDevice(s)."""

    def legalize_keeping_vdevice(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        result = legalize(bb, call)
        wanted = _vdevices(call.ty)
        if all(v is None for v in wanted):
            return result
        if isinstance(result, relax.Call) and isinstance(result.op, tvm.ir.Op) and result.op.name == "relax.call_tir":
            out_ty = result.ty_args[0]
            have = _vdevices(out_ty)
            if len(have) == len(wanted) and all(_same(h, w) for h, w in zip(have, wanted)):
                return result
            return relax.Call(result.op, result.args, result.attrs, [_with_vdevices(out_ty, wanted)])
        if isinstance(result, relax.Call) and result.same_as(call):
            return result  # not legalized here (e.g. no legalizer applies): left for a later pass
        got = _vdevices(bb.normalize(result).ty)
        if not all(_same(g, w) for g, w in zip(got, wanted)):
            raise ScopeLostError(
                f"legalizing {op_name} lost its memory scope: wanted {[str(w.memory_scope) for w in wanted if w]}, "
                f"the legalizer produced {type(result).__name__} typed {got}"
            )
        return result

    return legalize_keeping_vdevice


def legalize_map(mod: tvm.IRModule) -> dict:
    """The ``LegalizeOps`` customisation map for every op in ``mod``."""
    custom = {}
    for name in ops_in(mod):
        legalize = LEGALIZE_MAP.get(name) or tvm.ir.Op.get(name).get_attr("FLegalize")
        if legalize is not None:
            custom[name] = keep_vdevice(name, legalize)
    return custom


def LegalizeWithScopes() -> tvm.transform.Pass:
    """Legalize the remaining ops, keeping every decided VDevice (see module docstring)."""

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        return relax.transform.LegalizeOps(legalize_map(mod))(mod)

    return tvm.transform.module_pass(transform, opt_level=0, name="relax_vk.LegalizeWithScopes")
