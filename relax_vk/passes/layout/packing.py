"""Shared helpers of the packed layouts: static shapes and dtypes of Relax expressions, and the
numpy packing of NCHW arrays and OIHW weights by 4 lanes (constants are packed at compile time)."""

from __future__ import annotations

from typing import Optional

import numpy as np
from tvm import relax

from ...core.scope import TEXEL_LANES as LANES
from ...core.scope import static_shape

#: the reductions the packed layouts carry, by op name
REDUCERS = {"relax.mean": relax.op.mean, "relax.sum": relax.op.sum, "relax.max": relax.op.max, "relax.min": relax.op.min}


def _ceil4(c: int) -> int:
    return -(-c // LANES) * LANES


def _shape_of_type(ty) -> Optional[tuple]:
    """The static shape of a tensor type (None: not a tensor, or a symbolic shape)."""
    if not isinstance(ty, relax.TensorType) or ty.shape is None or not hasattr(ty.shape, "values"):
        return None
    return static_shape(ty.shape.values)


def _shape(expr) -> Optional[tuple]:
    return _shape_of_type(expr.ty)


def _out_dtype(attrs) -> Optional[str]:
    """An op's ``out_dtype`` attribute, None when unset."""
    value = str(attrs.out_dtype)
    return value if value not in ("", "void", "None") else None


def _dtype(expr) -> str:
    return str(expr.ty.dtype) if isinstance(expr.ty, relax.TensorType) else ""


def _float(expr) -> bool:
    return _dtype(expr) in ("float32", "float16")


def pack_array(a: np.ndarray, pad_value: float = 0.0) -> np.ndarray:
    """NCHW -> NCHW4c in numpy, padding channels to a multiple of 4 with ``pad_value``."""
    n, c, h, w = a.shape
    cp = _ceil4(c)
    if cp != c:
        a = np.concatenate([a, np.full((n, cp - c, h, w), pad_value, a.dtype)], axis=1)
    return np.ascontiguousarray(a.reshape(n, cp // LANES, LANES, h, w).transpose(0, 1, 3, 4, 2))


def pack_weight_array(w: np.ndarray, in_channels: Optional[int] = None) -> np.ndarray:
    """OIHW -> OIHW4o in numpy, zero-padding O to a multiple of 4 (and I to ``in_channels``)."""
    o, i, kh, kw = w.shape
    if in_channels is not None and in_channels != i:
        w = np.concatenate([w, np.zeros((o, in_channels - i, kh, kw), w.dtype)], axis=1)
        i = in_channels
    op = _ceil4(o)
    if op != o:
        w = np.concatenate([w, np.zeros((op - o, i, kh, kw), w.dtype)], axis=0)
    return np.ascontiguousarray(w.reshape(op // LANES, LANES, i, kh, kw).transpose(0, 2, 3, 4, 1))


def _pack_map(n, c, h, w):
    return (n, c // LANES, h, w, c % LANES)


def _unpack_map(n, c, h, w, b):
    return (n, c * LANES + b, h, w)
