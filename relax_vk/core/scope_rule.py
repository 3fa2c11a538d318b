"""The one rule that picks a texture mapping for a tensor. Change it here and only here.

Rule (declared, not set order):

1. An op registration may declare a preferred mapping order for an argument; the first one that
   fits the target limits wins.
2. Otherwise the tensor's *role* decides:

   * ``ACTIVATION`` -> ``global.texture`` (width W, height H, layers N*C/4: the spatial axes stay
     2-D, so a 3x3 window is a 2-D neighbourhood in the texture cache), then
     ``global.texture-nhwc`` (width H*W), then ``global.texture-weight``;
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


def mapping_order(role: Role, preference: Optional[Sequence[MemoryScope]] = None) -> Tuple[MemoryScope, ...]:
    """Texture scopes in the order the rule tries them."""
    order = list(preference or ())
    order += [s for s in ROLE_ORDER[role] if s not in order]
    return tuple(order)


def choose_scope(
    shape: Optional[Sequence[int]],
    dtype: str,
    allowed: Iterable[MemoryScope],
    limits: TextureLimits,
    role: Role = Role.ACTIVATION,
    preference: Optional[Sequence[MemoryScope]] = None,
) -> MemoryScope:
    """The preferred scope among ``allowed`` for this tensor: the first fitting texture, else buffer.

    Raises ``ValueError`` when ``allowed`` holds neither a fitting texture nor ``global``.
    """
    allowed = set(allowed)
    for scope in mapping_order(role, preference):
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
