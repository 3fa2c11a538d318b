"""Memory scopes: where a tensor lives and, for textures, how it maps onto a 2-D image array.

A packed tensor of shape ``(a0, ..., a_{r-2}, 4)`` (the last axis is the 4-lane RGBA texel) is
flattened onto an ``image2d_array`` by an *axis separator* ``s``: axes ``[0, s-1)`` multiply into
the array layers, axis ``s-1`` is the image height, axes ``[s, r-1)`` multiply into the width.
These are exactly the conventions of TVM's ``TextureFlatten`` and OpenCL runtime, so the scope
string is all a later stage needs. For the 5-D ``(a0, a1, a2, a3, 4)`` case:

==========================  ===============  ===========  =================
scope                       width            height       layers
==========================  ===============  ===========  =================
``global.texture``          a3               a2           a0 * a1
``global.texture-nhwc``     a2 * a3          a1           a0
``global.texture-weight``   a1 * a2 * a3     a0           1
``global`` (buffer)         --               --           --
==========================  ===============  ===========  =================

Invariants checked here: a texture scope only ever describes a tensor that is texturable
(static shape, rank 5 with last axis 4, float32/float16), and extents are compared against
inclusive limits (an OpenCL ``CL_DEVICE_IMAGE2D_MAX_WIDTH`` is a maximum, not a bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Optional, Sequence, Tuple

from .errors import RelaxVKError

TEXEL_LANES = 4
TEXTURE_DTYPES = ("float32", "float16")


class Storage(Enum):
    """The storage kind of a memory scope."""

    BUFFER = "buffer"
    TEXTURE = "texture"


@dataclass(frozen=True)
class TextureLimits:
    """Largest image a device accepts: width/height (``spatial``) and array layers (``depth``)."""

    spatial: int = 16384
    depth: int = 2048

    def __post_init__(self) -> None:
        if self.spatial < 1 or self.depth < 1:
            raise ValueError(f"texture limits must be positive, got {self}")


@dataclass(frozen=True)
class ImageExtents:
    """Extents of a 2-D image array in texels."""

    width: int
    height: int
    layers: int

    def violations(self, limits: TextureLimits) -> Tuple[str, ...]:
        """Human-readable list of the limits these extents exceed (empty when they fit)."""
        out = []
        if self.width > limits.spatial:
            out.append(f"width {self.width} > spatial limit {limits.spatial}")
        if self.height > limits.spatial:
            out.append(f"height {self.height} > spatial limit {limits.spatial}")
        if self.layers > limits.depth:
            out.append(f"layers {self.layers} > depth limit {limits.depth}")
        return tuple(out)

    def as_tuple(self) -> Tuple[int, int, int]:
        return (self.width, self.height, self.layers)


class TextureLimitError(RelaxVKError, ValueError):
    """A tensor does not fit a texture scope that an op requires."""


def static_shape(shape) -> Optional[Tuple[int, ...]]:
    """The shape as Python ints, or None when any extent is symbolic."""
    out = []
    for dim in shape:
        value = getattr(dim, "value", dim)
        if not isinstance(value, int):
            return None
        out.append(int(value))
    return tuple(out)


#: rank of the tensors texture scopes hold: packed NCHW4c activations and OIHW4o weights
PACKED_RANK = 5


def is_texturable(shape: Optional[Sequence[int]], dtype: str) -> bool:
    """Whether a tensor can live in any texture scope at all (limits aside): a packed tensor
    (rank 5, last axis the 4 texel lanes) of a texture dtype with a static shape.

    :meth:`MemoryScope.image_extents` flattens any rank >= 3, but an unpacked tensor whose last
    axis happens to be 4 (an NCHW tensor with W = 4) would make W the texel lanes: a kernel that
    reads a packed texture (lanes = channels) and writes such a tensor cannot vectorise its texel
    store, and TVM's texture lowering fails on it."""
    return (
        shape is not None
        and len(shape) == PACKED_RANK
        and shape[-1] == TEXEL_LANES
        and str(dtype) in TEXTURE_DTYPES
        and all(d > 0 for d in shape)
    )


@dataclass(frozen=True)
class MemoryScope:
    """One memory scope: its TVM scope string and, for textures, its axis separator rule."""

    name: str
    storage: Storage
    # Axis separator as an offset from the rank (``rank + sep_from_rank``) or, when
    # ``sep_absolute`` is set, an absolute axis index.
    sep_from_rank: int = 0
    sep_absolute: Optional[int] = None

    @property
    def is_texture(self) -> bool:
        return self.storage is Storage.TEXTURE

    def separator(self, rank: int) -> int:
        if not self.is_texture:
            raise ValueError(f"{self.name} is a buffer scope and has no axis separator")
        return self.sep_absolute if self.sep_absolute is not None else rank + self.sep_from_rank

    def image_extents(self, shape: Sequence[int]) -> ImageExtents:
        """Image extents of ``shape`` in this texture scope (TVM's texture flattening)."""
        if not self.is_texture:
            raise ValueError(f"{self.name} is a buffer scope and has no image extents")
        rank = len(shape)
        if rank < 3 or shape[-1] != TEXEL_LANES:
            raise ValueError(
                f"{self.name} needs a packed tensor (rank >= 3, last axis {TEXEL_LANES}), got {tuple(shape)}"
            )
        sep = self.separator(rank)
        layers = math.prod(shape[: sep - 1])
        height = shape[sep - 1]
        width = math.prod(shape[sep : rank - 1])
        return ImageExtents(int(width), int(height), int(layers))

    def fits(self, shape: Optional[Sequence[int]], dtype: str, limits: TextureLimits) -> bool:
        """Whether a tensor can be held in this scope under ``limits`` (buffers always fit)."""
        if not self.is_texture:
            return True
        if not is_texturable(shape, dtype):
            return False
        return not self.image_extents(shape).violations(limits)

    def check(self, shape: Optional[Sequence[int]], dtype: str, limits: TextureLimits, what: str) -> None:
        """Raise :class:`TextureLimitError` naming ``what`` when the tensor does not fit."""
        if self.fits(shape, dtype, limits):
            return
        if not is_texturable(shape, dtype):
            raise TextureLimitError(
                f"{what}: shape {shape} dtype {dtype} cannot be a texture "
                f"(needs a static packed shape ending in {TEXEL_LANES} and one of {TEXTURE_DTYPES})"
            )
        ext = self.image_extents(shape)
        raise TextureLimitError(
            f"{what}: shape {tuple(shape)} in {self.name} needs image {ext.as_tuple()} (w, h, layers): "
            + "; ".join(ext.violations(limits))
        )

    def __str__(self) -> str:
        return self.name


GLOBAL = MemoryScope("global", Storage.BUFFER)
TEXTURE = MemoryScope("global.texture", Storage.TEXTURE, sep_from_rank=-2)
TEXTURE_NHWC = MemoryScope("global.texture-nhwc", Storage.TEXTURE, sep_absolute=2)
TEXTURE_WEIGHT = MemoryScope("global.texture-weight", Storage.TEXTURE, sep_absolute=1)

ALL_SCOPES: Tuple[MemoryScope, ...] = (GLOBAL, TEXTURE, TEXTURE_NHWC, TEXTURE_WEIGHT)
TEXTURE_SCOPES: Tuple[MemoryScope, ...] = (TEXTURE, TEXTURE_NHWC, TEXTURE_WEIGHT)
#: the activation texture scopes whose tensors are stored folded at origins of shared images
#: (:mod:`relax_vk.codegen.texture_origins`); weights are constants, which never share
PLACED_SCOPES: Tuple[MemoryScope, ...] = (TEXTURE, TEXTURE_NHWC)
PLACED_SCOPE_NAMES = frozenset(s.name for s in PLACED_SCOPES)
_BY_NAME = {s.name: s for s in ALL_SCOPES}


def scope_from_name(name: str) -> MemoryScope:
    """The :class:`MemoryScope` for a TVM scope string; unknown strings are an error."""
    try:
        return _BY_NAME[str(name)]
    except KeyError:
        raise ValueError(f"unknown memory scope {name!r}; known: {sorted(_BY_NAME)}") from None


def tensor_bytes(shape: Sequence[int], dtype: str) -> int:
    """Size of a dense tensor in bytes."""
    import numpy as np

    return int(math.prod(shape)) * np.dtype(str(dtype)).itemsize


#: the most texture origins a kernel takes on each API (relax_vk.codegen.texture_origins: each is
#: an integer argument, a word of the kernel's one uniform block on Vulkan); a folded texture past
#: it sits at (0, 0) of an image of its own
MAX_ORIGINS = {"opencl": 64, "vulkan": 64}


def folded_width(ext: ImageExtents, spatial_limit: int) -> Optional[int]:
    """The width of a folded texture's placed rectangle (:mod:`relax_vk.codegen.texture_origins`).

    A ``(w, h, layers)`` image is ``n = w * h * layers`` texels in order, row ``r = z h + y`` after
    row (layer by layer). Folded into a rectangle ``W`` wide, texel ``i = r w + x`` sits at ``(i %
    W, i // W)``: the texels keep their order, so the i-th texel of the logical image is the i-th of
    the rectangle, row by row, whatever ``W``. ``W`` is ``k w`` (``k`` rows side by side in a line,
    ``k`` a power of two dividing ``h * layers``) or ``w / m`` (each row wrapped over ``m`` lines,
    ``m`` a power of two dividing ``w``), whichever makes the most nearly square rectangle within
    ``spatial_limit`` (on a tie, the one nearer ``w``): the rectangles of a downsampling CNN's
    tensors then nest in one another's images (a 56x56x16-texel tensor is 224 x 224, the stem
    input's image) where tall one-column strips (56 x 896) fit no earlier image, and a token
    layout's wide rows (256 tokens x 8) wrap into 64 x 32. None when no ``W`` fits."""
    rows, n, best = ext.height * ext.layers, ext.width * ext.height * ext.layers, None
    widths = []
    k = 1
    while rows % k == 0 and k * ext.width <= spatial_limit:
        widths.append(k * ext.width)
        k *= 2
    m = 2
    while ext.width % m == 0:
        widths.append(ext.width // m)
        m *= 2
    for width in widths:
        height = n // width
        if width <= spatial_limit and height <= spatial_limit:
            key = (round(abs(math.log(width / height)), 9), abs(math.log(width / ext.width)))
            if best is None or key < best[0]:
                best = (key, width)
    return None if best is None else best[1]


def placed_extents(shape: Optional[Sequence[int]], dtype: str, scope: MemoryScope, spatial_limit: int) -> Optional[ImageExtents]:
    """Extents of an activation texture (:data:`PLACED_SCOPES`) stored *folded* at an origin of a
    shared image (:mod:`relax_vk.codegen.texture_origins`): its ``(w, h, layers)`` image as one
    layer's ``W x (w h layers / W)`` rectangle (:func:`folded_width`), when one fits
    ``spatial_limit``; else None (the tensor keeps an image of its own extents). The texels keep
    their order: the i-th texel of the logical image is the i-th of the folded one."""
    if scope not in PLACED_SCOPES or not is_texturable(shape, dtype):
        return None
    ext = scope.image_extents(shape)
    width = folded_width(ext, spatial_limit)
    if width is None:
        return None
    return ImageExtents(width, ext.width * ext.height * ext.layers // width, 1)
