"""Blockwise n-bit weights in onnxruntime's ``MatMulNBits`` layout: packing them (numpy) and the
matmul and gather that read them as they compute (TE), shared by the ONNX converter
(:func:`relax_vk.frontends.onnx_quant.convert_matmul_nbits`) and the decoder front door's 4-bit
weights (:mod:`relax_vk.frontends.hf_decoder`).

Layout (ContribOperators.md, MatMulNBits): a weight ``W`` of ``K`` inputs and ``N`` outputs is
``B``, uint8 ``[N, k_blocks, block * bits / 8]``: element ``k`` of output ``n`` in block
``k // block``, at bit ``(k % block) * bits`` of the blob, low bits first. ``scales`` is
``[N * k_blocks]``; ``zero_points`` either uint8 packed the same way per output
(``[N * ceil(k_blocks * bits / 8)]``), of the scales' type (one per block), or absent
(``2 ** (bits - 1)``). ``W[k, n] = (q - zp) * scale``.

The kernels decode ``W`` inside the sum (the weight-only decode fused into the matmul, as MLC-LLM's
decode-matmul fusion and ExecuTorch's ``linear_q4gsw`` do): the device keeps the packed bytes and
no float copy of a weight exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np


@dataclass(frozen=True)
class BlockwiseFormat:
    """``bits`` per weight in blocks of ``block`` along ``K``; ``zero_points``: None (the
    midpoint), ``"float"`` (one of the scales' type per block) or ``"packed"`` (``bits`` each)."""

    K: int
    N: int
    bits: int = 4
    block: int = 32
    zero_points: Optional[str] = None

    def __post_init__(self):
        if self.bits not in (2, 4, 8) or self.block < 16 or self.block & (self.block - 1):
            raise ValueError(f"bits={self.bits}, block_size={self.block}: bits 2, 4 or 8 and a power-of-two block of at least 16 only")

    @property
    def k_blocks(self) -> int:
        return (self.K + self.block - 1) // self.block

    @property
    def zp_row(self) -> int:
        """Bytes of one output's packed zero points."""
        return (self.k_blocks * self.bits + 7) // 8

    def weight(self, B, S, Z, k, n):
        """The TE expression of ``W[k, n]`` (float32) read from the packed buffers."""
        from tvm import tirx

        bits, block, mask = self.bits, self.block, (1 << self.bits) - 1
        blk = k // block
        at = (k % block) * bits
        if str(B.dtype) == "uint32":  # the blob read as little-endian 32-bit words (:func:`as_words`)
            q = ((B[n, blk, at // 32] >> (at % 32).astype("uint32")) & tirx.const(mask, "uint32")).astype("int32")
        else:
            q = (B[n, blk, at // 8].astype("int32") >> (at % 8)) & mask
        if Z is None:
            zp = tirx.const(float(1 << (bits - 1)), "float32")
        elif self.zero_points == "float":
            zp = Z[n * self.k_blocks + blk].astype("float32")
        else:
            zat = blk * bits
            zp = ((Z[n * self.zp_row + zat // 8].astype("int32") >> (zat % 8)) & mask).astype("float32")
        return (q.astype("float32") - zp) * S[n * self.k_blocks + blk].astype("float32")

    def matmul(self, A, B, S, Z=None, out_dtype: str = "float32", name: str = "matmul_nbits"):
        """``A[..., K] @ W -> [..., N]``, summed in float32 (rounded once to ``out_dtype``)."""
        from tvm import te, tirx

        index = A.shape[0].ty.dtype  # (one index dtype for every loop: TVM's schedules need affine bindings)
        k = te.reduce_axis((tirx.const(0, index), tirx.const(self.K, index)), name="k")
        acc = te.compute((*A.shape[:-1], tirx.const(self.N, index)), lambda *i: te.sum(_f32(A[(*i[:-1], k)]) * self.weight(B, S, Z, k, i[-1]), axis=k), name=name)
        if out_dtype == "float32":
            return acc
        return te.compute(acc.shape, lambda *i: acc[i].astype(out_dtype), name=f"{name}_cast")

def gather_parts(parts, ids, buffers, out_dtype: str = "float32", name: str = "take_nbits"):
    """Columns ``W[:, ids[s]]`` as rows ``[len(ids), K]``: an embedding table held as a 4-bit ``[K,
    N]`` weight (``N`` the vocabulary), in one part or in parts along ``N`` (a table larger than one
    buffer binding; ``parts``: ``[(format, first n)]`` in order, ``buffers``: each part's ``B`` then
    its scales). An id outside ``0..N-1`` reads the nearest column (``take``'s ``mode="clip"``);
    each part is read at an index clamped into it and the one the id falls in is kept."""
    from tvm import te, tirx

    total = parts[-1][1] + parts[-1][0].N

    def row(s, k):
        n = tirx.max(tirx.min(ids[s].astype("int32"), total - 1), 0)
        value = None
        for index, (fmt, first) in enumerate(parts):
            local = tirx.max(tirx.min(n - first, fmt.N - 1), 0)
            got = fmt.weight(buffers[2 * index], buffers[2 * index + 1], None, k, local)
            value = got if value is None else tirx.Select(n >= first, got, value)
        return value.astype(out_dtype)

    return te.compute((ids.shape[0], tirx.const(parts[0][0].K, ids.shape[0].ty.dtype)), row, name=name)


def as_words(B: np.ndarray) -> np.ndarray:
    """``B`` (``[N, k_blocks, bytes]`` uint8) viewed as little-endian uint32 words, ``[N, k_blocks,
    bytes / 4]``, when a block's bytes are whole words (what :meth:`BlockwiseFormat.weight` reads
    either way: bit ``b`` of a block is bit ``b % 32`` of its word ``b // 32``); else ``B``."""
    if B.shape[-1] % 4:
        return B
    return np.ascontiguousarray(B).view("<u4").astype(np.uint32)


def _f32(x):
    return x if x.dtype == "float32" else x.astype("float32")


def pack_symmetric(w: np.ndarray, bits: int = 4, block: int = 32, scale_dtype: str = "float32") -> Tuple[BlockwiseFormat, np.ndarray, np.ndarray]:
    """``(format, B, scales)`` of a float weight ``w`` ``[K, N]`` quantized symmetrically per block
    as llama.cpp's ``Q4_0`` does for 4 bits: each block's scale is its largest-magnitude value over
    ``-2 ** (bits - 1)`` (sign kept), ``q = clip(round(w / scale) + 2 ** (bits - 1), 0, 2 ** bits - 1)``,
    the zero point the midpoint. ``K`` is padded with zeros to whole blocks."""
    K, N = w.shape
    fmt = BlockwiseFormat(K, N, bits, block)
    half, top = 1 << (bits - 1), (1 << bits) - 1
    padded = np.zeros((fmt.k_blocks * block, N), np.float32)
    padded[:K] = w
    blocks = padded.T.reshape(N, fmt.k_blocks, block)  # [N, k_blocks, block]
    idx = np.abs(blocks).argmax(axis=2)[..., None]
    peak = np.take_along_axis(blocks, idx, axis=2)[..., 0]  # the largest-magnitude value, signed
    scale = (peak / -half).astype(scale_dtype)
    inv = np.divide(1.0, scale.astype(np.float32), out=np.zeros_like(peak), where=scale.astype(np.float32) != 0)
    q = np.clip(np.rint(blocks * inv[..., None]) + half, 0, top).astype(np.uint8)
    return fmt, pack_codes(fmt, q.reshape(N, -1)), scale.reshape(-1)


def pack_codes(fmt: BlockwiseFormat, q: np.ndarray) -> np.ndarray:
    """``B`` (uint8 ``[N, k_blocks, block * bits / 8]``, low bits first) of unsigned codes ``q``
    (``[N, K]`` or already padded to ``[N, k_blocks * block]``, each in ``0 .. 2 ** bits - 1``);
    ``K`` is padded with zeros to whole blocks (the kernels never read the padding)."""
    q = np.asarray(q)
    if q.min(initial=0) < 0 or q.max(initial=0) >= 1 << fmt.bits:
        raise ValueError(f"codes outside 0..{(1 << fmt.bits) - 1}")
    N, per_byte = q.shape[0], 8 // fmt.bits
    padded = np.zeros((N, fmt.k_blocks * fmt.block), np.uint8)
    padded[:, : q.shape[1]] = q
    q = padded.reshape(N, fmt.k_blocks, fmt.block // per_byte, per_byte)
    packed = np.zeros(q.shape[:3], np.uint8)
    for j in range(per_byte):  # low bits first
        packed |= (q[..., j] << (j * fmt.bits)).astype(np.uint8)
    return packed


def unpack(fmt: BlockwiseFormat, B: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The float32 ``[K, N]`` weight a symmetric packing (no zero points) stands for (tests and references)."""
    per_byte = 8 // fmt.bits
    mask = (1 << fmt.bits) - 1
    q = np.stack([(B >> (j * fmt.bits)) & mask for j in range(per_byte)], axis=-1).reshape(fmt.N, fmt.k_blocks * fmt.block)
    w = (q.astype(np.float32) - (1 << (fmt.bits - 1))) * np.repeat(scales.astype(np.float32).reshape(fmt.N, fmt.k_blocks), fmt.block, axis=1)
    return np.ascontiguousarray(w[:, : fmt.K].T)


def format_for(codes: np.ndarray, group: int):
    """``(BlockwiseFormat, offset)`` for integer ``codes`` ``[rows, cols]`` in groups of ``group``
    along ``cols``: the fewest bits (2, 4, 8) that hold the dtype's range in use (codes shift by
    ``offset`` to be unsigned) and a power-of-two block of 16 to 256 that divides the group (for
    one group per row, any), else None."""
    rows, cols = codes.shape
    lo, hi = int(codes.min(initial=0)), int(codes.max(initial=0))
    signed = codes.dtype.kind == "i"
    bits = next((b for b in (2, 4, 8) if (-(1 << (b - 1)) <= lo and hi < 1 << (b - 1) if signed else hi < 1 << b)), None)
    if bits is None:
        return None
    block = 256
    if group >= cols:  # one scale per row: the block that makes the fewest bytes (codes padded to whole blocks, a scale each)
        block = min((16, 32, 64, 128, 256), key=lambda b: (-(-cols // b)) * (b * bits // 8 + 4))
    else:
        while block >= 16 and group % block:
            block //= 2
        if block < 16:
            return None
    return BlockwiseFormat(cols, rows, bits, block, "float"), (1 << (bits - 1)) if signed else 0


def emit_blockwise_linear(bb, x, data: np.ndarray, scales: np.ndarray, zps: Optional[np.ndarray], group: int):
    """:func:`blockwise_linear_call` emitted with ``bb`` (its variable), or None."""
    call = blockwise_linear_call(bb, x, data, scales, zps, group)
    return None if call is None else bb.emit(call)


def blockwise_linear_call(bb, x, data: np.ndarray, scales: np.ndarray, zps: Optional[np.ndarray], group: int):
    """``x @ W.T`` for ``W[n, k] = (data[n, k] - zps[n, g]) * scales[n, g]`` (``g = k // group``)
    as a call of one blockwise kernel over the packed codes (the kernel added to ``bb``'s module),
    or None when no format holds them (:func:`format_for`). A dequantized weight of any
    per-tensor, per-output or per-group quantization is read this way, with no float copy of it."""
    from dataclasses import replace

    from tvm import relax

    chosen = format_for(data, group)
    if chosen is None:
        return None
    fmt, offset = chosen
    # blocks of one group share its parameters; (codes + offset) - (zp + offset) == q - zp exactly
    per_block = np.minimum(np.arange(fmt.k_blocks) * fmt.block // group, scales.shape[1] - 1)
    block_scales = scales[:, per_block].reshape(-1)
    block_zps = (np.zeros_like(scales, np.float64) if zps is None else zps)[:, per_block].reshape(-1) + offset
    if np.any(block_zps != np.round(block_zps)) or np.abs(block_zps).max(initial=0) > 1 << 24:
        return None
    midpoint = bool(np.all(block_zps == 1 << (fmt.bits - 1)))
    if midpoint:
        fmt = replace(fmt, zero_points=None)
    B = pack_codes(fmt, (data.astype(np.int64) + offset).astype(np.uint8))
    args = [x, relax.const(as_words(B)), relax.const(block_scales.astype(np.float32))]
    if not midpoint:
        args.append(relax.const(block_zps.astype(np.float32)))
    return bb.call_te(lambda A, Bq, S, *Z: fmt.matmul(A, Bq, S, Z[0] if Z else None), *args, primfunc_name_hint="linear_nbits")
