"""Antialiased resampling weights: the filter PyTorch's ``antialias=True`` interpolation and ONNX's
``Resize(antialias=1)`` (onnxruntime) stretch over the input where they downsample, as a constant
``[n_out, n_in]`` matrix a resize multiplies by (:mod:`.torch`, :mod:`.onnx_attributes`)."""

from __future__ import annotations

from typing import Optional

import numpy as np


def antialiased_weights(n_in: int, n_out: int, taps: int, scale: float, a: Optional[float] = None, clamp: bool = False) -> np.ndarray:
    """The weights from ``n_in`` samples to ``n_out``, ``[n_out, n_in]`` float32, at ``scale`` =
    input samples per output sample (half-pixel centres: PyTorch's ``_compute_indices_weights_aa``):
    a linear (``taps`` 2) or cubic (``taps`` 4, coefficient ``a``, PyTorch's -0.5 by default) filter
    stretched by the scale where it downsamples, each row normalized to sum to one. At the edges
    PyTorch drops the window's taps outside the input; onnxruntime (``clamp``) keeps them and reads
    the edge sample for them."""
    a = -0.5 if a is None else a

    def linear(x):
        return max(0.0, 1.0 - abs(x))

    def cubic(x):
        x = abs(x)
        if x < 1.0:
            return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        if x < 2.0:
            return (((x - 5.0) * x + 8.0) * x - 4.0) * a
        return 0.0

    kernel = linear if taps == 2 else cubic
    support = taps * 0.5 * scale if scale >= 1.0 else taps * 0.5
    invscale = 1.0 / scale if scale >= 1.0 else 1.0
    weights = np.zeros((n_out, n_in), np.float64)
    for i in range(n_out):
        center = scale * (i + 0.5)
        if clamp:
            lo, hi = int(np.floor(center - support + 0.5)), int(np.floor(center + support + 0.5))
        else:
            lo, hi = max(int(center - support + 0.5), 0), min(int(center + support + 0.5), n_in)
        row = np.array([kernel((j - center + 0.5) * invscale) for j in range(lo, hi)])
        total = row.sum()
        row = row / total if total != 0.0 else row
        for j, value in zip(range(lo, hi), row):
            weights[i, min(max(j, 0), n_in - 1)] += value
    return weights.astype(np.float32)
