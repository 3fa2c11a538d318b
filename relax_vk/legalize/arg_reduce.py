"""``argmax`` / ``argmin`` with int32 indices, for APIs whose kernels cannot hold int64.

TVM's legalization computes the indices in the dtype of the tensor's shape (int64 for every
Relax tensor), in its reduction's temporaries too; WGSL storage buffers hold 32-bit values only,
so a model ending in ``argmax`` (segmentation maps, token classifiers) built no Vulkan shader.
:func:`arg_reduce` is the same reduction (the first index wins ties, as in PyTorch and TVM) with
int32 indices; :class:`~relax_vk.passes.layout.edge_dtypes.EdgeDtypes` uses it on such APIs and
casts the result up to int64, a cast the output edge folds away (the host converts back).
"""

from __future__ import annotations

from tvm import te, tirx


#: the most positions an index is exact for (float32 holds every integer up to 2**24)
MAX_EXTENT = 1 << 24


def arg_reduce(x: te.Tensor, axis: int, keepdims: bool, smallest: bool) -> te.Tensor:
    """Indices (int32) of the largest (``smallest``: least) values of ``x`` along ``axis``: the
    extreme value first, then the least position holding it. Two plain reductions: one over
    (index, value) pairs would carry the index in the loop variable's int64 with its accumulator
    cast around, which no GPU reduction rule matches; so is an integer minimum, and the position
    is reduced in float32, exact up to :data:`MAX_EXTENT`."""
    rank = len(x.shape)
    axis %= rank
    extent = int(x.shape[axis])
    if extent > MAX_EXTENT:
        raise ValueError(f"arg_reduce over {extent} positions: at most {MAX_EXTENT}")
    kept = [d for i, d in enumerate(x.shape) if i != axis]

    def at(out, k):
        return x[tuple(list(out[:axis]) + [k] + list(out[axis:]))]

    k = te.reduce_axis((0, extent), name="k")
    extreme = te.compute(kept, lambda *out: (te.min if smallest else te.max)(at(out, k), axis=k), name="arg_reduce_value")
    j = te.reduce_axis((0, extent), name="j")
    last = tirx.const(float(extent), "float32")
    first = te.compute(
        kept, lambda *out: te.min(tirx.Select(at(out, j) == extreme(*out), j.var.astype("float32"), last), axis=j), name="arg_reduce_index"
    )
    if keepdims:
        shape = list(x.shape[:axis]) + [1] + list(x.shape[axis + 1 :])
        return te.compute(shape, lambda *i: first(*(i[:axis] + i[axis + 1 :])).astype("int32"), name="arg_reduce")
    return te.compute(kept, lambda *i: first(*i).astype("int32"), name="arg_reduce")
