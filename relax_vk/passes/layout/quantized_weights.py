"""Quantized conv weights packed at compile time, still quantized, and read as integers.

A weight that a quantized model gives as ``dequantize(int8 constant, scale, zero point)``
(QDQ, and the QOperator / dynamic forms once :mod:`relax_vk.frontends.onnx_quant` rewrote them;
pt2e graphs through :mod:`relax_vk.frontends.torch_quant`) is not a float constant, so packing it
to OIHW4o used to run on every inference: a kernel that dequantized and padded the channels, then a
layout-transform kernel, both writing float32 copies. :func:`packed_dequantize` packs the integer
constant itself with numpy (the way float weights are packed,
:func:`~relax_vk.passes.layout.packing.pack_weight_array`), with the scale and zero point laid out
to match. Then, where ``q - zero point`` fits int8 (:func:`centred_weight`: symmetric weights, uint8
ones centred on 128), the conv reads those integers and its output is multiplied by the
per-channel scale (:func:`output_scales`; ``conv(x, (q - zp) * s) == conv(x, q - zp) * s``, fused
into the conv's epilogue): no dequantize kernel and no float copy of the weight. Otherwise one
elementwise kernel dequantizes the packed integers at run time (:func:`emit_dequantize`), the
int8 bytes in the artifact as before.

Padding keeps the packed layouts' invariant that padded channels hold zeros: a padded input
channel of a real output channel holds that channel's zero point, and a padded output channel has
scale 0. The dequantize kernel's arithmetic is TVM's own dequantize's (``(q - zp)`` exact, then
times the float32 scale), so its values are bit-identical to the run-time packing it replaces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
from tvm import relax
from tvm.ir.expr import GenericConst

from .packing import LANES, _ceil4, pack_weight_array


@dataclass(frozen=True)
class DequantizedConstant:
    """``dequantize(data, scale, zero_point, axis)`` of constants: ``scale`` and ``zero_point``
    hold one value or one per index of ``axis``."""

    data: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int

    def per_axis(self, name: str, size: int) -> np.ndarray:
        values = np.asarray(getattr(self, name)).reshape(-1)
        return np.broadcast_to(values, (size,)) if values.size == 1 else values


def dequantized_constant(call) -> Optional[DequantizedConstant]:
    """The constants of a ``relax.dequantize`` call to float32 whose arguments are all constants
    with an integer data tensor, else None."""
    if not (isinstance(call, relax.Call) and getattr(call.op, "name", "") == "relax.dequantize"):
        return None
    if str(call.attrs.out_dtype) != "float32" or not all(isinstance(a, GenericConst) for a in call.args):
        return None
    data, scale, zp = (a.value.numpy() for a in call.args)
    if data.dtype.kind not in "iu" or scale.dtype != np.float32:
        return None
    axis = int(call.attrs.axis) % max(data.ndim, 1)
    for q in (scale, zp):
        if q.size not in (1, data.shape[axis] if data.ndim else 1):
            return None
    return DequantizedConstant(data, scale, zp, axis)


def packed_dequantize(dq: DequantizedConstant, to_oihw: Optional[Sequence[int]], padded_in: Optional[int]):
    """``(int8 OIHW4o constant, zero points, scales)``: an OIHW weight given as ``dq`` (in the
    layout ``to_oihw`` permutes to OIHW), packed like
    :func:`~relax_vk.passes.layout.packing.pack_weight_array` with input channels padded to
    ``padded_in``; the zero points and scales are float32 of shape ``(O/4, 1, 1, 1, 4)``. None
    when the quantization axis is not the output channel (or the tensor)."""
    q = dq.data.transpose(to_oihw) if to_oihw else dq.data
    axis = list(to_oihw).index(dq.axis) if to_oihw else dq.axis
    per_tensor = np.asarray(dq.scale).size == 1 and np.asarray(dq.zero_point).size == 1
    if q.ndim != 4 or not (per_tensor or axis == 0):
        return None
    o, i, kh, kw = q.shape
    scale, zp = dq.per_axis("scale", o).astype("float32"), dq.per_axis("zero_point", o)
    op, ip = _ceil4(o), padded_in or i
    full = np.empty((op, ip, kh, kw), q.dtype)
    full[:o] = zp.astype(q.dtype).reshape(o, 1, 1, 1)  # (padded input channels: the zero point, 0 after dequantizing)
    full[:o, :i] = q
    full[o:] = 0
    scales, zps = np.zeros(op, "float32"), np.zeros(op, "float32")
    scales[:o], zps[:o] = scale, zp.astype("float32")  # (padded output channels: scale 0)
    per_texel = (op // LANES, 1, 1, 1, LANES)
    return pack_weight_array(full), zps.reshape(per_texel), scales.reshape(per_texel)  # (padded already: only the layout)


def emit_dequantize(emit, packed: np.ndarray, zps: np.ndarray, scales: np.ndarray) -> relax.Var:
    """The float32 weight of :func:`packed_dequantize`'s parts: ``(float(q) - zp) * scale``."""
    w = emit(relax.op.astype(relax.const(packed), "float32"))
    w = emit(relax.op.subtract(w, relax.const(zps)))
    return emit(relax.op.multiply(w, relax.const(scales)))


def centred_weight(packed: np.ndarray, zps: np.ndarray) -> Optional[np.ndarray]:
    """``q - zero point`` of :func:`packed_dequantize`'s parts as int8, or None where a value
    does not fit (padded channels stay 0: their integers are the zero point, or 0 with zero point 0)."""
    centred = packed.astype(np.int32) - zps.astype(np.int32)
    if centred.size and (centred.min() < -128 or centred.max() > 127):
        return None
    return centred.astype(np.int8)


def output_scales(scales: np.ndarray) -> np.ndarray:
    """:func:`packed_dequantize`'s per-texel scales ``(O/4, 1, 1, 1, 4)`` laid out for the conv's
    NCHW4c output, ``(1, O/4, 1, 1, 4)``: what a conv over the integer weights is multiplied by."""
    return np.ascontiguousarray(scales.reshape(1, scales.shape[0], 1, 1, scales.shape[-1]))
