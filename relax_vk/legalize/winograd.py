"""Winograd F(m, 3) convolution of NCHW4c data: the transform matrices, the build-time weight
transform (numpy) and the TE computes of the fused Winograd kernel and of the run-time weight
transform (for weights that are not constants).

A 3x3 stride-1 conv computes each ``m x m`` output tile from an ``a x a`` input tile (``a = m + 2``):
``Y = A^T [ sum_c (G g_c G^T) * (B^T d_c B) ] A`` with ``*`` elementwise over the ``a x a``
positions (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks"). ``U = G g G^T`` is
the transformed weight, computed once (:func:`transform_weight`, at build time for constants);
``V = B^T d B`` the transformed input tile. Per tile and input channel the sum costs ``a^2``
multiply-adds per output channel instead of ``9 m^2``: 2.25x fewer for F(2,3), 4x for F(4,3).

The kernel (:func:`winograd_conv2d_compute`) is one TE chain, which relax_vk's Winograd schedule
(:mod:`relax_vk.schedules.winograd`) folds into one kernel per conv as one thread per tile and
output texels: the padded input tile (``winograd_data_pad``, padding folded into the reads), its
transform (``winograd_input``), the per-position GEMM over the input channels
(``winograd_gemm``, accumulated in registers), the output transform (``winograd_inverse``, per tile)
and its pixels in the output's layout (``winograd_output``), with the conv's fused epilogue
(bias, batch norm, activations, residual add) after it.

Transform arithmetic is written out with only the non-zero coefficients (no multiplications by
0 or +-1 left for the compiler to fold), selected by the tile position, which the schedule makes a
constant by unrolling the position loops of those stages (and never vectorizing them: a select
on a position must fold away before code generation).

Weights are ``OIHW4o`` (``(OC/4, IC, 3, 3, 4)``, a texel holds 4 output channels); the transformed
weight keeps that form with the ``a x a`` positions in place of the kernel window,
``(OC/4, IC, a, a, 4)``, so it is stored exactly as conv weights are (``global.texture-weight``
images, or buffers).
"""

from __future__ import annotations

from typing import Callable, Sequence

from tvm import te, tirx, topi

from ..core.registry import OUT_ELEMWISE_FUSABLE, SOURCE_OP_ATTR, WINOGRAD_CONV
from ..runtime.winograd import KERNEL, LANES, TILES, matrices, tile_count, transform_weight  # noqa: F401  (re-exported)

#: the op names the Winograd kernels carry (``relax_vk.source_op``), which the op registry matches
WINOGRAD_WEIGHT = "relax_vk.winograd_weight"
#: block names the schedule finds the kernel by
PAD, INPUT, GEMM, INVERSE, OUTPUT = "winograd_data_pad", "winograd_input", "winograd_gemm", "winograd_inverse", "winograd_output"


def _combine(coeffs: Sequence, term: Callable[[int], tirx.PrimExpr], dtype: str) -> tirx.PrimExpr:
    """``sum_k coeffs[k] * term(k)`` over the non-zero coefficients (+-1 without a multiply)."""
    out = None
    for k, c in enumerate(coeffs):
        c = float(c)
        if c == 0.0:
            continue
        t = term(k)
        if c == -1.0:
            out = -t if out is None else out - t
            continue
        t = t if c == 1.0 else t * tirx.const(c, dtype)
        out = t if out is None else out + t
    return out if out is not None else tirx.const(0.0, dtype)


def _by_row(index: tirx.PrimExpr, rows: Sequence[Sequence], term: Callable[[int], tirx.PrimExpr], dtype: str) -> tirx.PrimExpr:
    """``sum_k rows[index][k] * term(k)``: a select over the rows, which folds to one row once the
    schedule makes ``index`` a constant (it unrolls the tile positions)."""
    value = _combine(rows[-1], term, dtype)
    for i in range(len(rows) - 2, -1, -1):
        value = tirx.Select(index == i, _combine(rows[i], term, dtype), value)
    return value


def winograd_conv2d_compute(data: te.Tensor, weight: te.Tensor, padding: Sequence[int], m: int, out_dtype: str) -> te.Tensor:
    """Winograd F(m, 3) conv of NCHW4c ``data`` ``(N, C/4, H, W, 4)`` with transformed weights
    ``(OC/4, IC, a, a, 4)`` (:func:`transform_weight`), stride 1, dilation 1, one group; ``padding``
    ``(top, left, bottom, right)``. Returns ``(N, OC/4, OH, OW, 4)`` (module docstring)."""
    at, bt, _ = matrices(m)
    a = m + KERNEL - 1
    n, c4, h, w, lanes = (int(x) for x in data.shape)
    oc4, ic, ua, ub, olanes = (int(x) for x in weight.shape)
    if lanes != LANES or olanes != LANES or (ua, ub) != (a, a) or ic > c4 * LANES:
        raise ValueError(f"Winograd F({m},3): data {data.shape} and transformed weight {weight.shape} do not match")
    pt, pl, pb, pr = (int(p) for p in padding)
    oh, ow = h + pt + pb - KERNEL + 1, w + pl + pr - KERNEL + 1
    th, tw = tile_count(oh, m), tile_count(ow, m)
    # pad so that every tile's input window exists (rows past the conv's own padding only feed
    # output pixels of the last tile that are never stored)
    need_h, need_w = th * m + KERNEL - 1, tw * m + KERNEL - 1
    padded = topi.nn.pad(data, (0, 0, pt, pl, 0), (0, 0, need_h - h - pt, need_w - w - pl, 0), name=PAD)
    acc = out_dtype

    def input_tile(b, c, ty, tx, e1, e2, lane):
        # V = B^T d B, rows then columns
        def row(r):
            return _by_row(e2, bt, lambda k: padded[b, c, ty * m + r, tx * m + k, lane].astype(acc), acc)

        return _by_row(e1, bt, row, acc)

    v = te.compute((n, -(-ic // LANES), th, tw, a, a, LANES), input_tile, name=INPUT)
    rc = te.reduce_axis((0, ic), name="ic")
    gemm = te.compute(
        (n, oc4, th, tw, a, a, LANES),
        lambda b, o, ty, tx, e1, e2, ob: te.sum(
            v[b, rc // LANES, ty, tx, e1, e2, rc % LANES] * weight[o, rc, e1, e2, ob].astype(acc), axis=[rc]
        ),
        name=GEMM,
    )

    def inverse(b, o, ty, tx, iy, ix, ob):
        # Y = A^T M A, the tile's m x m pixels
        def row(e1):
            return _by_row(ix, at, lambda e2: gemm[b, o, ty, tx, e1, e2, ob], acc)

        return _by_row(iy, at, row, acc)

    y_tile = te.compute((n, oc4, th, tw, m, m, LANES), inverse, name=INVERSE)
    return te.compute(
        (n, oc4, oh, ow, LANES), lambda b, o, y, x, ob: y_tile[b, o, y // m, x // m, y % m, x % m, ob], name=OUTPUT, tag=OUTPUT
    )


def winograd_weight_compute(weight: te.Tensor, m: int) -> te.Tensor:
    """:func:`transform_weight` as a kernel, for weights that are not constants (tuning programs
    take them as inputs): ``(OC/4, IC, 3, 3, 4)`` -> ``(OC/4, IC, a, a, 4)``."""
    _, _, g = matrices(m)
    a = m + KERNEL - 1
    oc4, ic, kh, kw, lanes = (int(x) for x in weight.shape)
    dtype = weight.dtype

    def value(o, c, e1, e2, ob):
        def row(k1):
            return _by_row(e2, g, lambda k2: weight[o, c, k1, k2, ob], dtype)

        return _by_row(e1, g, row, dtype)

    return te.compute((oc4, ic, a, a, lanes), value, name="winograd_weight")


def conv_attrs() -> dict:
    """PrimFunc attributes of the Winograd conv kernel: its op (for the registry) and its
    ``op_pattern`` (a conv's: the elementwise epilogue fuses into it)."""
    return {SOURCE_OP_ATTR: WINOGRAD_CONV, "op_pattern": OUT_ELEMWISE_FUSABLE}


def weight_attrs() -> dict:
    return {SOURCE_OP_ATTR: WINOGRAD_WEIGHT}
