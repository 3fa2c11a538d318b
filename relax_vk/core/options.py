"""Options of the scope passes, in one place."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScopeOptions:
    """Knobs of scope assignment.

    textures: when False every tensor stays in a buffer (the all-buffer plan used for
        side-by-side measurements).
    weights_in_texture: when False conv2d weights stay in buffers (what upstream TVM does
        today); the RFC puts them in ``global.texture-weight``.
    """

    textures: bool = True
    weights_in_texture: bool = True
