"""``relax.gather_nd`` with indices of any integer dtype, as a TE compute.

``relax.gather_nd`` accepts only int64 indices, which a Vulkan kernel cannot hold in a buffer
(WGSL has no 64-bit integers). :class:`~relax_vk.passes.layout.edge_dtypes.EdgeDtypes` replaces
the op on such APIs with a ``call_te`` of :func:`gather_nd_compute` on int32 indices: every valid
index of a tensor under 2**31 elements fits, so the result is the same.
"""

from __future__ import annotations

from tvm import te, topi


def gather_nd_compute(data: te.Tensor, indices: te.Tensor, batch_dims: int = 0) -> te.Tensor:
    """``out[b, y] = data[b, indices[b, y, :]...]`` (ONNX GatherND: index tuples on the last axis
    of ``indices``, the first ``batch_dims`` axes shared with ``data``)."""
    ndim = len(indices.shape)
    # TOPI reads the index tuple on the first axis
    tuples_first = topi.transpose(indices, [ndim - 1] + list(range(ndim - 1)))
    return topi.gather_nd(data, tuples_first, int(batch_dims))
