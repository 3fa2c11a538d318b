"""The one rule that picks a texture mapping for a tensor. Change it here and only here.

Rule (declared, not set order):

1. An op registration may declare a preferred mapping order for an argument; the first one that
   fits the target limits wins.
2. Otherwise the tensor's *role* decides:

   * ``ACTIVATION`` -> ``global.texture`` (width W, height H, layers N*C/4: the spatial axes stay
     2-D, so a 3x3 window is a 2-D neighbourhood in the texture cache), then
     ``global.texture-nhwc`` (width H*W), then ``global.texture-weight``; except that a tensor of
     height 1 (a token tensor ``(1, C/4, 1, M, 4)``, a 1xW map) tries ``global.texture-nhwc``
     first: one 2-D image of width W and height C/4 instead of C/4 layers one texel row high
     (GPUs tile textures in 2-D blocks; a one-row layer fills a sliver of each) -- when the
     tensors an op makes share its scope are all of height 1 too (a pool to 1x1 reads a map);
   * ``WEIGHT`` -> ``global.texture-weight`` (one 2-D image, a row per output-channel block),
     then ``global.texture``, then ``global.texture-nhwc``.

3. A mapping is only chosen if the tensor fits it under the limits; when none fits the tensor
   stays in a buffer (``global``). This differs from upstream TVM, which tries the weight mapping
   first even for activations.
"""

from __future__ import annotations

from enum import Enum
from typing import Iterable, Optional, Sequence, Tuple

from .scope import GLOBAL, TEXTURE, TEXTURE_NHWC, TEXTURE_WEIGHT, MemoryScope, TextureLimits


class Role(Enum):
    """What a tensor argument is to its consumer."""

    ACTIVATION = "activation"
    WEIGHT = "weight"


ROLE_ORDER = {
    Role.ACTIVATION: (TEXTURE, TEXTURE_NHWC, TEXTURE_WEIGHT),
    Role.WEIGHT: (TEXTURE_WEIGHT, TEXTURE, TEXTURE_NHWC),
}


def _one_row(shape: Optional[Sequence[int]], wide: bool = True) -> bool:
    """Whether ``global.texture`` would give this packed tensor layers of height 1 (``wide``: and
    width above 1; a ``(1, C/4, 1, 1, 4)`` vector is one texel either way)."""
    return shape is not None and len(shape) == 5 and int(shape[2]) == 1 and (int(shape[3]) > 1 or not wide)


def mapping_order(
    role: Role, preference: Optional[Sequence[MemoryScope]] = None, shape: Optional[Sequence[int]] = None,
    peers: Sequence[Optional[Sequence[int]]] = (),
) -> Tuple[MemoryScope, ...]:
    """Texture scopes in the order the rule tries them (for a tensor of ``shape``, when given, that
    shares its scope with tensors of the ``peers`` shapes: the one-row order if all are of height 1
    and one is wider than a texel: a LayerNorm's ``(1, C/4, 1, 1, 4)`` gain goes with its tokens)."""
    order = list(preference or ())
    base = ROLE_ORDER[role]
    group = [shape, *peers]
    if role is Role.ACTIVATION and all(_one_row(p, wide=False) for p in group) and any(_one_row(p) for p in group):
        base = (TEXTURE_NHWC,) + tuple(s for s in base if s is not TEXTURE_NHWC)
    order += [s for s in base if s not in order]
    return tuple(order)


def choose_scope(
    shape: Optional[Sequence[int]],
    dtype: str,
    allowed: Iterable[MemoryScope],
    limits: TextureLimits,
    role: Role = Role.ACTIVATION,
    preference: Optional[Sequence[MemoryScope]] = None,
    peers: Sequence[Optional[Sequence[int]]] = (),
) -> MemoryScope:
    """The preferred scope among ``allowed`` for this tensor: the first fitting texture, else buffer
    (``peers``: shapes of the tensors the op makes share its scope).

    Raises ``ValueError`` when ``allowed`` holds neither a fitting texture nor ``global``.
    """
    allowed = set(allowed)
    for scope in mapping_order(role, preference, shape, peers):
        if scope in allowed and scope.fits(shape, dtype, limits):
            return scope
    if GLOBAL in allowed:
        return GLOBAL
    raise ValueError(f"no scope among {sorted(s.name for s in allowed)} can hold shape {shape} {dtype}")


def rank_scopes(
    candidates: Iterable[MemoryScope], role: Role = Role.ACTIVATION, preference: Optional[Sequence[MemoryScope]] = None
) -> Tuple[MemoryScope, ...]:
    """``candidates`` ordered by the rule (textures in rule order, buffer last): used for tie-breaks."""
    candidates = set(candidates)
    ordered = [s for s in mapping_order(role, preference) if s in candidates]
    if GLOBAL in candidates:
        ordered.append(GLOBAL)
    return tuple(ordered)
