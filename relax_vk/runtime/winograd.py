"""The numpy side of Winograd F(m, 3) convs, without TVM: the transform matrices and the weight
transform ``U = G g G^T``.

The compiler transforms constant weights with it at build time
(:mod:`relax_vk.legalize.winograd`); tools that move programs between machines without TVM use it
to derive transformed weights from the conv weights instead of shipping both
(``benchmarks/backend_latency.py``: a transformed weight is 16/9 or 4x its conv weight).
"""

from __future__ import annotations

from fractions import Fraction as Fr
from typing import Dict, Tuple

import numpy as np

LANES = 4
KERNEL = 3
#: the output tile sizes implemented: F(2,3) and F(4,3)
TILES = (2, 4)

_F = Fr
# Lavin's matrices (interpolation points 0, -1, 1 for F(2,3); 0, +-1, +-2 for F(4,3)), exact
_MATRICES: Dict[int, Tuple[list, list, list]] = {
    2: (
        [[1, 1, 1, 0], [0, 1, -1, -1]],  # A^T: m x a
        [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],  # B^T: a x a
        [[1, 0, 0], [_F(1, 2), _F(1, 2), _F(1, 2)], [_F(1, 2), _F(-1, 2), _F(1, 2)], [0, 0, 1]],  # G: a x 3
    ),
    4: (
        [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
        [
            [4, 0, -5, 0, 1, 0],
            [0, -4, -4, 1, 1, 0],
            [0, 4, -4, -1, 1, 0],
            [0, -2, -1, 2, 1, 0],
            [0, 2, -1, -2, 1, 0],
            [0, 4, 0, -5, 0, 1],
        ],
        [
            [_F(1, 4), 0, 0],
            [_F(-1, 6), _F(-1, 6), _F(-1, 6)],
            [_F(-1, 6), _F(1, 6), _F(-1, 6)],
            [_F(1, 24), _F(1, 12), _F(1, 6)],
            [_F(1, 24), _F(-1, 12), _F(1, 6)],
            [0, 0, 1],
        ],
    ),
}


def matrices(m: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(A^T, B^T, G)`` of F(m, 3) as float64 arrays (``m x a``, ``a x a``, ``a x 3``)."""
    if m not in _MATRICES:
        raise ValueError(f"Winograd F({m},3) is not implemented (tile sizes: {', '.join(map(str, TILES))})")
    return tuple(np.array([[float(v) for v in row] for row in mat]) for mat in _MATRICES[m])  # type: ignore[return-value]


def tile_count(out: int, m: int) -> int:
    return -(-out // m)


def transform_weight(w: np.ndarray, m: int) -> np.ndarray:
    """``U = G g G^T`` of packed ``OIHW4o`` 3x3 weights ``(OC/4, IC, 3, 3, 4)``: ``(OC/4, IC, a, a, 4)``
    (computed in float64, returned in ``w``'s dtype)."""
    if w.ndim != 5 or w.shape[2:4] != (KERNEL, KERNEL) or w.shape[4] != LANES:
        raise ValueError(f"Winograd weight transform: expected (OC/4, IC, 3, 3, 4) weights, got {w.shape}")
    _, _, g = matrices(m)
    u = np.einsum("ak,ocklx,bl->ocabx", g, w.astype(np.float64), g)
    return np.ascontiguousarray(u.astype(w.dtype))
