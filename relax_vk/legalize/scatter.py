"""``relax.scatter_elements`` as a gather over the updates, which every schedule rule handles.

TOPI's ``scatter_elements`` is an ``ir_builder`` kernel: serial loops over the updates writing
through data-dependent indices, with no block a GPU schedule rule can bind to threads ("no
schedule fits it"; ONNX ``ScatterElements`` crashed on both APIs). Here each output element is a
reduction over the positions ``u`` of the scattered axis of ``updates`` whose index (negative ones
counted from the end) points at it:

* ``update`` (no reduction): the last such update, else the input (ONNX leaves duplicates
  unspecified; the last one is what a sequential scatter writes);
* ``add`` / ``mul`` / ``max`` / ``min``: the input combined with every such update.

That is the size of the scattered axis of ``updates`` times the work of a sequential scatter.
"""

from __future__ import annotations

from tvm import relax, te, tirx


def scatter_elements_compute(data: te.Tensor, indices: te.Tensor, updates: te.Tensor, axis: int, reduction: str) -> te.Tensor:
    """``data`` with ``updates`` scattered along ``axis`` at ``indices`` (ONNX ScatterElements)."""
    ndim = len(data.shape)
    axis = int(axis) % ndim
    extent = data.shape[axis]
    count = updates.shape[axis]
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
            u = last[idx]
            safe = tirx.max(u, 0)
            return tirx.Select(u >= 0, updates[clamp_at(idx, safe)], data[idx])

        return te.compute(data.shape, value, name="scatter_elements")

    combine = {
        "add": (lambda a, b: a + b, 0),
        "mul": (lambda a, b: a * b, 1),
        "max": (lambda a, b: tirx.max(a, b), None),
        "min": (lambda a, b: tirx.min(a, b), None),
    }
    if reduction not in combine:
        from ..core.errors import UnsupportedError

        raise UnsupportedError(f"scatter_elements reduction {reduction!r}: relax_vk computes update, add, mul, max and min")
    fn, unit = combine[reduction]
    if unit is None:  # max / min: the identity is the dtype's least / largest value
        extreme = tirx.max_value if reduction == "min" else tirx.min_value
        reducer = te.comm_reducer(fn, extreme, name=reduction)
        identity = extreme(dtype)
    else:
        reducer = te.comm_reducer(fn, lambda t: tirx.const(unit, t), name=reduction)
        identity = tirx.const(unit, dtype)

    def reduced(*idx):
        u = te.reduce_axis((0, count), name="u")
        hit, _ = target(idx, u)
        return reducer(tirx.Select(hit, updates[clamp_at(idx, u)], identity), axis=u)

    gathered = te.compute(data.shape, reduced, name="scatter_reduce")
    return te.compute(data.shape, lambda *idx: fn(data[idx], gathered[idx]), name="scatter_elements")


def _last_hit(idx, count, target):
    """The largest update position landing on ``idx``, or -1."""
    u = te.reduce_axis((0, count), name="u")
    hit, _ = target(idx, u)
    return te.max(tirx.Select(hit, u.var.astype("int32"), tirx.const(-1, "int32")), axis=u)


def legalize_scatter_elements(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    return bb.call_te(scatter_elements_compute, *call.args[:3], int(call.attrs.axis), str(call.attrs.reduction),
                      primfunc_name_hint="scatter_elements")  # fmt: skip
