"""ONNX ``LRN`` (local response normalization across channels) as ops that stay packed textures.

``y[c] = x[c] / (bias + alpha / size * sum(x[c']^2 for c' in window(c)))^beta`` with the window
``c - floor((size - 1) / 2) .. c + ceil((size - 1) / 2)`` cut at the channel ends. TVM's converter
computes the window's sum as a 3-D average pool over a 5-D view ``[N, 1, C, H, W]``; nothing packs
that view, so the LRN's input and output stay NCHW buffers: AlexNet, ZFNet-512 and GoogLeNet as the
ONNX model zoo ships them kept 53-72% of their activation bytes in textures. It also pads
``size // 2`` on both sides, which for an even ``size`` gives ``C + 1`` channels and fails to import.

Here the window's sum is a 1x1 conv of ``x^2`` with a constant banded 0/1 weight ``[C, C, 1, 1]``
(row ``c`` ones over ``window(c)``), followed by elementwise ops: a conv and a chain the layout pass
packs like any other, any ``size``. The band's zeros add nothing (``0 * x^2 = 0`` for every finite
square), so the sum is the window's up to the order of its terms. The conv costs ``C`` products a
value where the window has ``size``: for channel counts past :data:`MAX_CHANNELS` (a weight of
4 MiB), and for float16 inputs (``alpha / size`` can be subnormal there), TVM's converter is kept.
"""

from __future__ import annotations

import numpy as np

#: the most channels the banded conv takes (its weight: C * C values)
MAX_CHANNELS = 1024


def band(channels: int, size: int) -> np.ndarray:
    """The ``[C, C, 1, 1]`` weight whose row ``c`` has ones over ``window(c)``."""
    before, after = (size - 1) // 2, size // 2  # (floor and ceil of (size - 1) / 2)
    weight = np.zeros((channels, channels, 1, 1), np.float32)
    for c in range(channels):
        weight[c, max(0, c - before) : min(channels, c + after + 1)] = 1.0
    return weight


def convert_lrn(bb, inputs, attrs):
    """``LRN`` of a 4-D float32 input of known channels (module docstring); None (TVM's converter)
    for anything else."""
    from tvm import relax, tirx

    x = inputs[0]
    shape = getattr(getattr(x, "ty", None), "shape", None)
    dtype = str(getattr(getattr(x, "ty", None), "dtype", ""))
    if shape is None or len(shape.values) != 4 or dtype != "float32":  # (float16: alpha / size can be subnormal)
        return None
    channels = shape.values[1]
    if not isinstance(channels, tirx.IntImm) or int(channels) > MAX_CHANNELS:
        return None
    size = int(attrs["size"])
    alpha, beta, bias = (float(attrs.get(name, default)) for name, default in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
    R = relax.op
    squares = bb.normalize(R.multiply(x, x))
    sums = bb.normalize(R.nn.conv2d(squares, relax.const(band(int(channels), size).astype(dtype))))
    scale = R.add(relax.const(bias, dtype), R.multiply(relax.const(alpha / size, dtype), sums))
    return R.divide(x, R.power(bb.normalize(scale), relax.const(beta, dtype)))
