"""Token views: the index algebra behind packed token layouts (numpy only).

A *token tensor* is a logical tensor ``[d0, ..., d_{r-2}, C]`` whose last axis is packed by 4 into
texels and whose leading axes are folded into one row axis ``M = d0 * ... * d_{r-2}``: the packed
tensor is ``(1, C/4, 1, M, 4)``, the NCHW4c form of an ``[1, C, 1, M]`` map, so a ``Linear`` is a 1x1
conv, a residual add or a GELU a packed elementwise op, and in a texture each texel holds four
consecutive channels of one token (width M, height 1, C/4 layers).

Multi-head attention, window partitions and patch unfolding rearrange these tensors many times
between two computations (reshape, permute, slice, squeeze, broadcast, take). Instead of running
each rearrangement, the layout stage keeps a :class:`TokenView`: the packed tensor it reads from
(the *base*, a logical ``(M, C)`` matrix) and a table giving, for every element of the view's
logical shape, the base element it is (a flat index ``m * C + c``). Rearrangements only transform
the table (:func:`apply_op`); when a computation needs the view as a packed tensor of its own,
:func:`texel_sources` says whether it can be gathered texel by texel (each group of four
consecutive view elements along its last axis is one whole base texel, lanes in order) and from
which texels; any other view is gathered element by element (:func:`element_table`, its last
axis padded with zeros to a multiple of 4). Invariant (checked in ``__post_init__``): the table has the view's shape and indexes
inside the base.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

LANES = 4
#: views whose tables would exceed this many entries are not built (the tensor is materialized)
MAX_TABLE = 1 << 24


@dataclass(frozen=True)
class TokenView:
    """A logical tensor of ``shape`` whose elements are elements of a packed base ``(rows, cols)``.

    ``table`` is None for the identity view (``shape[-1] == cols`` and the leading axes enumerate
    the rows in order)."""

    rows: int
    cols: int
    shape: Tuple[int, ...]
    table: Optional[np.ndarray] = None

    def __post_init__(self) -> None:
        if self.cols % LANES:
            raise ValueError(f"a token base needs a multiple of {LANES} columns, got {self.cols}")
        if self.table is None:
            if not self.shape or self.shape[-1] != self.cols or math.prod(self.shape[:-1]) != self.rows:
                raise ValueError(f"identity view {self.shape} does not match its base ({self.rows}, {self.cols})")
        elif tuple(self.table.shape) != tuple(self.shape):
            raise ValueError(f"view table of shape {self.table.shape} for a view of shape {self.shape}")
        elif self.table.size and (self.table.min() < 0 or self.table.max() >= self.rows * self.cols):
            raise ValueError("view table indexes outside its base")

    @property
    def is_identity(self) -> bool:
        return self.table is None

    def indices(self) -> np.ndarray:
        """The explicit table (the identity's too)."""
        if self.table is not None:
            return self.table
        return np.arange(self.rows * self.cols, dtype=np.int64).reshape(self.shape)

    def with_table(self, table: np.ndarray) -> Optional["TokenView"]:
        """A view of the same base through ``table`` (normalized to the identity when it is one)."""
        table = np.ascontiguousarray(table)
        if table.size > MAX_TABLE:
            return None
        shape = tuple(int(d) for d in table.shape)
        if (
            shape
            and shape[-1] == self.cols
            and table.size == self.rows * self.cols
            and np.array_equal(table.reshape(-1), np.arange(table.size))
        ):
            return TokenView(self.rows, self.cols, shape)
        return TokenView(self.rows, self.cols, shape, table)


def identity(shape: Sequence[int]) -> TokenView:
    """The view of a freshly packed tensor of logical ``shape``."""
    shape = tuple(int(d) for d in shape)
    return TokenView(math.prod(shape[:-1]), shape[-1], shape)


def padded(shape: Sequence[int]) -> TokenView:
    """The view of logical ``shape`` over a base whose columns are ``shape[-1]`` rounded up to a
    multiple of 4 (the padding lanes unused): a Linear or matmul with that many outputs."""
    shape = tuple(int(d) for d in shape)
    cols = -(-shape[-1] // LANES) * LANES
    base = identity(shape[:-1] + (cols,))
    return base if cols == shape[-1] else TokenView(base.rows, cols, shape, np.ascontiguousarray(base.indices()[..., : shape[-1]]))


def is_padded(view: TokenView) -> bool:
    """Whether ``view`` is :func:`padded` of its shape (a padded base read in order)."""
    if view.is_identity or math.prod(view.shape[:-1]) != view.rows or view.cols != -(-view.shape[-1] // LANES) * LANES:
        return False
    return np.array_equal(view.table, padded(view.shape).table)


def nchw_view(channels: int, height: int, width: int) -> TokenView:
    """An NCHW4c map ``(1, C/4, H, W, 4)`` seen as a token base of ``H*W`` rows and ``C`` columns
    (the same texels in the same order): the view of logical shape ``[1, C, H, W]``."""
    table = identity((height, width, channels)).indices().transpose(2, 0, 1)[None]
    return TokenView(height * width, channels, (1, channels, height, width), np.ascontiguousarray(table))


def apply_op(view: TokenView, op: str, **attrs) -> Optional[TokenView]:
    """The view after a rearranging op, or None when the op is not a pure rearrangement we know.

    ``op`` is a Relax op name without the ``relax.`` prefix; ``attrs`` hold its static attributes
    (the layout stage reads them from the call)."""
    e = view.indices()
    if op == "reshape":
        shape = tuple(int(d) for d in attrs["shape"])
        if math.prod(shape) != e.size:
            return None
        out = e.reshape(shape)
    elif op == "permute_dims":
        axes = attrs.get("axes")
        out = e.transpose(None if axes is None else [int(a) for a in axes])
    elif op == "squeeze":
        axis = attrs.get("axis")
        out = np.squeeze(e, axis=None if axis is None else tuple(int(a) for a in axis))
    elif op == "expand_dims":
        out = e
        for a in sorted(int(a) % (e.ndim + len(attrs["axis"])) for a in attrs["axis"]):
            out = np.expand_dims(out, a)
    elif op == "broadcast_to":
        try:
            out = np.broadcast_to(e, tuple(int(d) for d in attrs["shape"]))
        except ValueError:
            return None
    elif op == "strided_slice":
        index = [slice(None)] * e.ndim
        for axis, begin, end, stride in zip(attrs["axes"], attrs["begin"], attrs["end"], attrs["strides"]):
            if int(stride) <= 0:
                return None
            index[int(axis)] = slice(int(begin), int(end), int(stride))
        out = e[tuple(index)]
    elif op == "take":
        indices = np.asarray(attrs["indices"]).astype(np.int64)
        axis = int(attrs["axis"]) % e.ndim
        n = e.shape[axis]
        if indices.size and (indices.min() < -n or indices.max() >= n):
            return None
        out = np.take(e, indices % n, axis=axis)
    else:
        return None
    if out.ndim == 0 or out.size == 0:
        return None
    return view.with_table(out)


def texel_sources(view: TokenView, transpose_last: bool = False) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """Where each texel of the view's own packed form comes from: ``(rows, texels)``, two int arrays
    of shape ``(M', C'/4)`` (the base row and base texel column of view texel ``(m', c4')``), or
    None when some four consecutive elements along the last axis are not one whole base texel in
    lane order. ``transpose_last``: the same question for the view with its last two axes swapped
    (the ``B`` of ``A @ B^T`` read as ``B^T``)."""
    e = view.indices()
    if transpose_last:
        if e.ndim < 2:
            return None
        e = np.swapaxes(e, -1, -2)
    last = e.shape[-1]
    if last % LANES:
        return None
    texels = e.reshape(-1, last // LANES, LANES)
    first = texels[..., 0]
    if (first % LANES).any() or not np.array_equal(texels, first[..., None] + np.arange(LANES)):
        return None
    return first // view.cols, (first % view.cols) // LANES


def row_gather(view: TokenView, sources: Tuple[np.ndarray, np.ndarray]) -> Optional[np.ndarray]:
    """The base rows to take, in order, when the view's texels are whole base rows (same columns):
    the gather is then a ``take`` along the row axis. None otherwise."""
    rows, texels = sources
    if texels.shape[1] != view.cols // LANES or not (texels == np.arange(view.cols // LANES)).all():
        return None
    if not (rows == rows[:, :1]).all():
        return None
    return rows[:, 0]


def element_table(view: TokenView, transpose_last: bool = False) -> np.ndarray:
    """The element-gather table of the view's own packed form (its last axis padded to a
    multiple of 4): ``(C'/4, M', 4)`` int32, each entry a base flat index or -1 (a zero lane)."""
    e = view.indices()
    if transpose_last:
        e = np.swapaxes(e, -1, -2)
    last = e.shape[-1]
    padded = -(-last // LANES) * LANES
    rows = e.reshape(-1, last)
    if padded != last:
        rows = np.concatenate([rows, np.full((rows.shape[0], padded - last), -1, rows.dtype)], axis=1)
    return np.ascontiguousarray(rows.reshape(rows.shape[0], padded // LANES, LANES).transpose(1, 0, 2)).astype("int32")
