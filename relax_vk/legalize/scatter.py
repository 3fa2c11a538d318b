"""``relax.scatter_elements`` / ``relax.scatter_nd`` as gathers over the updates, which every
schedule rule handles.

TOPI's scatters are ``ir_builder`` kernels: serial loops over the updates writing through
data-dependent indices, with no block a GPU schedule rule can bind to threads ("no schedule fits
it"; ONNX ``ScatterElements`` crashed on both APIs, ``ScatterND`` failed export). Here each output
element is a reduction over the updates whose index (negative ones counted from the end) points at
it (for ``scatter_nd``, whose index tuple matches the element's leading indices):

* ``update`` (no reduction): the last such update, else the input (ONNX leaves duplicates
  unspecified; the last one is what a sequential scatter writes);
* ``add`` / ``mul`` / ``max`` / ``min``: the input combined with every such update.

That is the number of updates on the element's line (all of them for ``scatter_nd``) times the
work of a sequential scatter.
"""

from __future__ import annotations

from tvm import relax, te, tirx


def scatter_elements_compute(data: te.Tensor, indices: te.Tensor, updates: te.Tensor, axis: int, reduction: str) -> te.Tensor:
    """``data`` with ``updates`` scattered along ``axis`` at ``indices`` (ONNX ScatterElements)."""
    ndim = len(data.shape)
    axis = int(axis) % ndim
    extent = data.shape[axis]
    count = updates.shape[axis]
    _check_count(count)
    dtype = str(data.dtype)

    def target(idx, u):
        """Whether update ``(idx with u on the axis)`` lands on output ``idx``; False outside the
        updates' extent along the other axes."""
        at = tuple(u if d == axis else idx[d] for d in range(ndim))
        raw = indices[at].astype("int64")
        wrapped = tirx.Select(raw < 0, raw + tirx.const(int(extent), "int64"), raw)
        inside = tirx.const(True, "bool")
        for d in range(ndim):
            if d != axis:
                inside = tirx.And(inside, idx[d] < updates.shape[d])
        return tirx.And(inside, wrapped == idx[axis].astype("int64")), at

    def clamp_at(idx, u):
        """The update position ``target`` reads, clamped into the updates (reads are unguarded)."""
        return tuple(u if d == axis else tirx.min(idx[d], updates.shape[d] - 1) for d in range(ndim))

    if reduction in ("update", "none"):
        last = te.compute(
            data.shape,
            lambda *idx: _last_hit(idx, count, target),
            name="scatter_last",
        )

        def value(*idx):
            u = last[idx].astype("int32")
            safe = tirx.max(u, 0)
            return tirx.Select(u >= 0, updates[clamp_at(idx, safe)], data[idx])

        return te.compute(data.shape, value, name="scatter_elements")

    fn, reducer, identity = _combiner(reduction, dtype)

    def reduced(*idx):
        u = te.reduce_axis((0, count), name="u")
        hit, _ = target(idx, u)
        return reducer(tirx.Select(hit, updates[clamp_at(idx, u)], identity), axis=u)

    gathered = te.compute(data.shape, reduced, name="scatter_reduce")
    return te.compute(data.shape, lambda *idx: fn(data[idx], gathered[idx]), name="scatter_elements")


def _combiner(reduction: str, dtype: str):
    """``(combine, reducer, identity)`` of a scatter reduction other than ``update`` (TVM's own
    reducers where there is one: its cross-thread reduction matches only known reducers)."""
    if reduction == "add":
        return (lambda a, b: a + b), te.sum, tirx.const(0, dtype)
    if reduction == "max":
        return (lambda a, b: tirx.max(a, b)), te.max, tirx.min_value(dtype)
    if reduction == "min":
        return (lambda a, b: tirx.min(a, b)), te.min, tirx.max_value(dtype)
    if reduction == "mul":
        return (lambda a, b: a * b), te.comm_reducer(lambda a, b: a * b, lambda t: tirx.const(1, t), name="product"), tirx.const(1, dtype)
    from ..core.errors import UnsupportedError

    raise UnsupportedError(f"scatter reduction {reduction!r}: relax_vk computes update, add, mul, max and min")


def scatter_nd_compute(data: te.Tensor, indices: te.Tensor, updates: te.Tensor, reduction: str) -> te.Tensor:
    """``data`` with ``updates[u...]`` scattered to ``data[indices[u..., :]]`` (ONNX ScatterND)."""
    from tvm import topi

    ndim, depth = len(data.shape), int(indices.shape[-1])
    count = 1
    for d in indices.shape[:-1]:
        count *= int(d)
    _check_count(count)
    flat_indices = topi.reshape(indices, [count, depth])
    flat_updates = topi.reshape(updates, [count] + [int(d) for d in data.shape[depth:]])
    dtype = str(data.dtype)

    def target(idx, u):
        hit = tirx.const(True, "bool")
        for j in range(depth):
            raw = flat_indices[u, j].astype("int64")
            wrapped = tirx.Select(raw < 0, raw + tirx.const(int(data.shape[j]), "int64"), raw)
            hit = tirx.And(hit, wrapped == idx[j].astype("int64"))
        return hit

    def update_at(idx, u):
        return flat_updates[(u,) + tuple(idx[depth:ndim])]

    if reduction in ("update", "none"):
        def last_hit(*idx):
            u = te.reduce_axis((0, count), name="u")
            return te.max(tirx.Select(target(idx, u), u.var.astype("float32"), tirx.const(-1.0, "float32")), axis=u)

        last = te.compute(data.shape, last_hit, name="scatter_last")
        def value(*idx):
            u = last[idx].astype("int32")
            return tirx.Select(u >= 0, update_at(idx, tirx.max(u, 0)), data[idx])

        return te.compute(data.shape, value, name="scatter_nd")
    fn, reducer, identity = _combiner(reduction, dtype)

    def reduced(*idx):
        u = te.reduce_axis((0, count), name="u")
        return reducer(tirx.Select(target(idx, u), update_at(idx, u), identity), axis=u)

    gathered = te.compute(data.shape, reduced, name="scatter_reduce")
    return te.compute(data.shape, lambda *idx: fn(data[idx], gathered[idx]), name="scatter_nd")


def legalize_scatter_nd(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    return bb.call_te(scatter_nd_compute, *call.args[:3], str(call.attrs.reduction), primfunc_name_hint="scatter_nd")


#: the most updates one output element may choose between (float32 holds every integer up to 2**24)
MAX_UPDATES = 1 << 24


def _check_count(count: int) -> None:
    if int(count) > MAX_UPDATES:
        from ..core.errors import UnsupportedError

        raise UnsupportedError(f"a scatter of {int(count)} updates per element: relax_vk computes at most {MAX_UPDATES}")


def _last_hit(idx, count, target):
    """The largest update position landing on ``idx``, or -1, reduced in float32 (a maximum GPU
    reduction rules match; positions are exact up to 2**24)."""
    u = te.reduce_axis((0, count), name="u")
    hit, _ = target(idx, u)
    return te.max(tirx.Select(hit, u.var.astype("float32"), tirx.const(-1.0, "float32")), axis=u)


def legalize_scatter_elements(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    return bb.call_te(scatter_elements_compute, *call.args[:3], int(call.attrs.axis), str(call.attrs.reduction),
                      primfunc_name_hint="scatter_elements")  # fmt: skip
