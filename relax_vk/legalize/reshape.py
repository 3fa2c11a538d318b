"""``relax.reshape`` of tensors with run-time dims, as an injective kernel that fuses.

TOPI's reshape reads input element ``unflatten(flatten(i))`` and takes every index modulo its dim,
the leading one included: with a run-time leading dim that is ``... % S``, which TVM's op-pattern
analysis cannot see through, so the kernel is marked opaque and FuseOps leaves it alone: one
kernel launch and one copy of the tensor per reshape (a decoder's head split and merge, 10 of the
34 launches of a layer's decode step). Here the leading index is the flat index divided by the
other dims, without a modulo (the flat index is below the element count), and the kernel is
injective: it fuses with its neighbours as a static reshape does. (An input with a run-time dim
after its first still needs ``% dim``: :class:`relax_vk.passes.FuseGathers` lets that one fuse.)
Static reshapes go to TVM's legalizer unchanged.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import relax, te, tirx

from ..core.scope import static_shape


def _same(a, b) -> bool:
    return tvm_ffi.structural_equal(a, b) or (isinstance(a, tirx.IntImm) and isinstance(b, tirx.IntImm) and int(a) == int(b))


def reshape_compute(x: te.Tensor, shape) -> te.Tensor:
    """``x`` with ``shape`` (same element count), row-major. Leading and trailing dims the two
    shapes share keep their index as it is (``[1, C, H, W] -> [1, C, H*W]`` reads ``x[n, c, m // W,
    m % W]``): only the dims in between are flattened and split again, so that TVM can bound the
    region each output reads (with a run-time dim in the flat index it could not, and a kernel
    fusing such a reshape could not inline its producers)."""
    in_shape = list(x.shape)
    lead = 0
    while lead < min(len(in_shape), len(shape)) - 1 and _same(in_shape[lead], shape[lead]):
        lead += 1
    trail = 0
    while trail < min(len(in_shape), len(shape)) - lead - 1 and _same(in_shape[-1 - trail], shape[-1 - trail]):
        trail += 1
    mid_in, mid_out = in_shape[lead : len(in_shape) - trail], list(shape[lead : len(shape) - trail])

    def value(*out):
        middle = out[lead : len(out) - trail]
        flat = middle[0] if middle else tirx.const(0, "int64")
        for index, dim in zip(middle[1:], mid_out[1:]):
            flat = flat * dim + index
        index = []
        for dim in reversed(mid_in[1:]):
            index.append(flat % dim)
            flat = flat // dim
        index.append(flat)  # (the leading index: no modulo, the flat index is in range)
        return x[tuple(out[:lead]) + tuple(reversed(index)) + tuple(out[len(out) - trail :])]

    return te.compute(shape, value, name="T_reshape")


def legalize_reshape(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    """relax_vk's compute when the input or the result has a run-time dim, else TVM's legalizer."""
    data, out_ty = call.args[0], call.ty
    shapes = [getattr(getattr(t, "shape", None), "values", None) for t in (data.ty, out_ty)]
    if any(s is None for s in shapes) or all(static_shape(s) is not None for s in shapes) or len(shapes[0]) == 0:
        return tvm.ir.Op.get("relax.reshape").get_attr("FLegalize")(bb, call)
    return bb.call_te(reshape_compute, data, list(shapes[1]), primfunc_name_hint="reshape")
