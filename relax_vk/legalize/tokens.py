"""TE computes of the packed token kernels the layout stage emits as ``call_tir``.

Token tensors are ``(1, C/4, 1, M, 4)``: ``C`` channels packed by 4 into texels, ``M`` rows (see
:mod:`relax_vk.passes.layout.token_views`). Two kernels have no Relax op:

* :func:`token_gather`: a texel gather, ``out[0, a, 0, b, :] = x[0, t // M, 0, t % M, :]`` with
  ``t = table[a, b]``: multi-head attention's reshapes and permutes (the 5-D qkv split included) as
  one whole-texel copy each;
* :func:`token_element_gather`: an element gather by a per-lane table, for views whose texels are
  not whole texels of the base (transposes, head dims that are not multiples of 4, padded with
  zeros);
* :func:`token_matmul`: a batched matmul of two token tensors, ``A @ B`` or ``A @ B^T`` (B read in
  its own packed form, so ``k.transpose(-2, -1)`` costs nothing); inner and output sizes that are
  not multiples of 4 are padded (zero lanes in, zero or unused lanes out).

Each PrimFunc carries ``relax_vk.source_op`` so the op registry can let its tensors be textures.
"""

from __future__ import annotations

from tvm import te

from ..core.registry import SOURCE_OP_ATTR, TOKEN_GATHER, TOKEN_MATMUL

LANES = 4
GATHER_OP, MATMUL_OP = TOKEN_GATHER, TOKEN_MATMUL


def token_gather(x: te.Tensor, table: te.Tensor) -> te.Tensor:
    """Gather whole texels of ``x`` (``(1, C/4, 1, M, 4)``) by the flat texel ``table``
    (``(C'/4, M')`` int32, entries ``c4 * M + m``)."""
    rows = int(x.shape[3])
    texels, out_rows = (int(d) for d in table.shape)

    def value(_n, a, _h, b, lane):
        t = table[a, b]
        return x[0, t // rows, 0, t % rows, lane]

    return te.compute((1, texels, 1, out_rows, LANES), value, name="token_gather")


def token_element_gather(x: te.Tensor, table: te.Tensor, cols: int) -> te.Tensor:
    """Gather single elements of ``x`` (``(1, cols/4, 1, M, 4)``) by the element ``table``
    (``(C'/4, M', 4)`` int32, entries ``m * cols + c``, -1 for a zero): any view, including a
    transposed one or one whose last axis is padded to a multiple of 4."""
    texels, out_rows, _ = (int(d) for d in table.shape)

    def value(_n, a, _h, b, lane):
        t = table[a, b, lane]
        safe = te.max(t, 0)
        read = x[0, (safe % cols) // LANES, 0, safe // cols, safe % LANES]
        return te.if_then_else(t >= 0, read, te.const(0, x.dtype))

    return te.compute((1, texels, 1, out_rows, LANES), value, name="token_element_gather")


def token_matmul(a: te.Tensor, b: te.Tensor, rows: int, inner: int, cols: int, transpose_b: bool) -> te.Tensor:
    """``out[g] = A[g] @ B[g]`` (or ``@ B[g]^T``) for ``G`` batches of ``rows x inner`` by
    ``inner x cols`` matrices, all token-packed (sizes rounded up to multiples of 4): ``A`` is ``(1, inner/4, 1, G*rows, 4)``, ``B``
    ``(1, cols/4, 1, G*inner, 4)`` (or, transposed, ``(1, inner/4, 1, G*cols, 4)``), the result
    ``(1, cols/4, 1, G*rows, 4)``."""
    batch_rows = int(a.shape[3])
    k4 = te.reduce_axis((0, -(-inner // LANES)), name="k4")
    kl = te.reduce_axis((0, LANES), name="kl")

    def value(_n, j4, _h, row, lane):
        g = row // rows
        lhs = a[0, k4, 0, row, kl]
        k, j = k4 * LANES + kl, j4 * LANES + lane
        if transpose_b:
            rhs = b[0, k4, 0, g * cols + j, kl]
            if cols % LANES:  # padded output lanes: no read past the last batch's rows
                rhs = te.if_then_else(j < cols, b[0, k4, 0, g * cols + te.min(j, cols - 1), kl], te.const(0, b.dtype))
        else:
            rhs = b[0, j4, 0, g * inner + k, lane]
            if inner % LANES:  # padded inner lanes (zero in A): no read past the last batch's rows
                rhs = te.if_then_else(k < inner, b[0, j4, 0, g * inner + te.min(k, inner - 1), lane], te.const(0, b.dtype))
        return te.sum(lhs * rhs, axis=[k4, kl])

    return te.compute((1, -(-cols // LANES), 1, batch_rows, LANES), value, name="token_matmul")


def attrs(op: str) -> dict:
    """The PrimFunc attributes of a token kernel."""
    return {SOURCE_OP_ATTR: op}
