"""TE computes of the packed token kernels the layout stage emits as ``call_tir``.

Token tensors are ``(1, C/4, 1, M, 4)``: ``C`` channels packed by 4 into texels, ``M`` rows (see
:mod:`relax_vk.passes.layout.token_views`). These kernels have no Relax op:

* :func:`token_gather`: a texel gather, ``out[0, a, 0, b, :] = x[0, t // M, 0, t % M, :]`` with
  ``t = table[a, b]``: multi-head attention's reshapes and permutes (the 5-D qkv split included) as
  one whole-texel copy each;
* :func:`token_element_gather`: an element gather by a per-lane table, for views whose texels are
  not whole texels of the base (transposes, head dims that are not multiples of 4, padded with
  zeros);
* :func:`token_channel_reduce`: sum/max/min over the channels (LayerNorm's and softmax's
  statistics), each texel fetched once;
* :func:`token_layer_norm`, :func:`token_softmax`: LayerNorm and softmax over the channels as one
  kernel each (the row statistics and the normalized result; one dispatch instead of four);
* :func:`token_matmul`: a batched matmul of two token tensors, ``A @ B`` or ``A @ B^T`` (B read in
  its own packed form, so ``k.transpose(-2, -1)`` costs nothing), either operand possibly read
  through a texel table; inner and output sizes that are not multiples of 4 are padded (zero
  lanes in, zero or unused lanes out).

Each PrimFunc carries ``relax_vk.source_op`` so the op registry can let its tensors be textures.
"""

from __future__ import annotations

from typing import Optional, Tuple

from tvm import te, tirx

from ..core.registry import SOURCE_OP_ATTR
from ..core.scope import TEXEL_LANES as LANES


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


def token_matmul(
    a: te.Tensor, b: te.Tensor, *tables: te.Tensor, rows: int, inner: int, cols: int, transpose_b: bool, gathered: Tuple[bool, bool] = (False, False)
) -> te.Tensor:
    """``out[g] = A[g] @ B[g]`` (or ``@ B[g]^T``) for ``G`` batches of ``rows x inner`` by
    ``inner x cols`` matrices, all token-packed (sizes rounded up to multiples of 4): ``A`` is ``(1, inner/4, 1, G*rows, 4)``, ``B``
    ``(1, cols/4, 1, G*inner, 4)`` (or, transposed, ``(1, inner/4, 1, G*cols, 4)``), the result
    ``(1, cols/4, 1, G*rows, 4)``. ``gathered``: which operand is given as a base and a texel
    table (in ``tables``, A's first) and read through it (a :func:`token_gather` stage in the
    same kernel: attention's heads read from the qkv projection without a gather kernel)."""
    tables = list(tables)
    if gathered[0]:
        a = token_gather(a, tables.pop(0))
    if gathered[1]:
        b = token_gather(b, tables.pop(0))
    batch_rows = int(a.shape[3])
    k4 = te.reduce_axis((0, -(-inner // LANES)), name="k4")

    def rhs(g, j4, lane, kl):
        k, j = k4 * LANES + kl, j4 * LANES + lane
        if transpose_b:
            if cols % LANES:  # padded output lanes: no read past the last batch's rows
                return te.if_then_else(j < cols, b[0, k4, 0, g * cols + te.min(j, cols - 1), kl], te.const(0, b.dtype))
            return b[0, k4, 0, g * cols + j, kl]
        if inner % LANES:  # padded inner lanes (zero in A): no read past the last batch's rows
            return te.if_then_else(k < inner, b[0, j4, 0, g * inner + te.min(k, inner - 1), lane], te.const(0, b.dtype))
        return b[0, j4, 0, g * inner + k, lane]

    def value(_n, j4, _h, row, lane):
        # the four lanes of a texel are summed in one expression (one reduction axis over texels):
        # a thread fetches each texel once instead of once per lane
        g = row // rows
        terms = [a[0, k4, 0, row, kl] * rhs(g, j4, lane, kl) for kl in range(LANES)]
        return te.sum((terms[0] + terms[1]) + (terms[2] + terms[3]), axis=k4)

    return te.compute((1, -(-cols // LANES), 1, batch_rows, LANES), value, name="token_matmul")


def matmul_pattern(a_shape, b_shape, dtype: str, **kwargs) -> int:
    """The ``op_pattern`` TVM's ``AnnotateTIROpPattern`` gives :func:`token_matmul` of operands of
    these packed shapes read directly (a kernel that reads one through a table would be opaque to
    it, and FuseOps would fuse nothing with it)."""
    import tvm
    from tvm import relax

    a, b = te.placeholder(tuple(a_shape), dtype), te.placeholder(tuple(b_shape), dtype)
    func = te.create_prim_func([a, b, token_matmul(a, b, **kwargs)])
    return int(relax.transform.AnnotateTIROpPattern()(tvm.IRModule({"main": func}))["main"].attrs["op_pattern"])


def token_channel_reduce(x: te.Tensor, kind: str, channels: Optional[int] = None) -> te.Tensor:
    """``sum``/``max``/``min`` over the channels of ``(1, C/4, 1, M, 4)``: ``(1, 1, 1, M, 1)``, the
    four lanes of each texel combined in one expression (each texel fetched once; a reduction over
    a texture's lanes as an axis fetches it once per lane). ``channels``: the first that many
    take part (a padded base: its padding lanes read as the reduction's identity)."""
    texels = int(x.shape[1])
    k4 = te.reduce_axis((0, texels), name="k4")
    combine = {"sum": (lambda p, q: p + q, te.sum), "max": (tirx.max, te.max), "min": (tirx.min, te.min)}[kind]
    fill = _identity(kind, x.dtype)

    def value(_n, _c, _h, row, _l):
        v = [_real_lane(x[0, k4, 0, row, lane], k4, lane, texels, channels, fill) for lane in range(LANES)]
        pair, reducer = combine
        return reducer(pair(pair(v[0], v[1]), pair(v[2], v[3])), axis=k4)

    return te.compute((1, 1, 1, int(x.shape[3]), 1), value, name="token_channel_" + kind)


def _identity(kind: str, dtype):
    """What a padding lane reads as in a ``sum`` / ``max`` / ``min`` over ``dtype``."""
    if kind == "sum":
        return tirx.const(0, dtype)
    if "float" in str(dtype):
        return tirx.const(float("-inf") if kind == "max" else float("inf"), dtype)
    return tirx.min_value(dtype) if kind == "max" else tirx.max_value(dtype)


def _zero_padding(y, c, lane, channels: Optional[int], dtype):
    """A normalized result ``y`` at texel ``c``, lane ``lane``: 0 on the padding lanes past ``channels``."""
    return y if channels is None else tirx.Select(c * LANES + lane < channels, y, tirx.const(0, dtype))


def _real_lane(v, k4, lane: int, texels: int, channels: Optional[int], fill):
    """``v``, lane ``lane`` of texel ``k4``, or ``fill`` where that lane is padding past ``channels``."""
    if channels is None or (texels - 1) * LANES + lane < channels:
        return v
    return tirx.Select(k4 < texels - 1, v, fill)


def _lanes(x: te.Tensor, row, k4, f=lambda v: v, channels: Optional[int] = None):
    """``f`` of the four lanes of texel ``k4`` of ``row``, summed pairwise in one expression (the
    padding lanes past ``channels`` as zeros)."""
    texels, zero = int(x.shape[1]), _identity("sum", x.dtype)
    v = [_real_lane(f(x[0, k4, 0, row, lane]), k4, lane, texels, channels, zero) for lane in range(LANES)]
    return (v[0] + v[1]) + (v[2] + v[3])


def token_layer_norm(
    x: te.Tensor, *affine: te.Tensor, eps: float, scale: bool, center: bool, channels: Optional[int] = None
) -> te.Tensor:
    """LayerNorm over the channels of ``(1, C/4, 1, M, 4)``, in one kernel: the row sums (block
    ``token_norm_sum``), the sums of squared deviations from the mean (``token_norm_sq``: two
    passes, as the unfused form computes them) and the normalized result, times the per-channel
    ``gamma`` and plus ``beta`` (``(1, C/4, 1, 1, 4)``, given in that order as ``affine`` when
    ``scale`` / ``center``). ``channels``: over the first that many of a padded base (its padding
    lanes take no part and come out 0)."""
    texels, rows = int(x.shape[1]), int(x.shape[3])
    inv = 1.0 / (channels or texels * LANES)
    gamma = affine[0] if scale else None
    beta = affine[-1] if center else None
    k4 = te.reduce_axis((0, texels), name="k4")
    total = te.compute(
        (1, 1, 1, rows, 1), lambda _n, _c, _h, r, _l: te.sum(_lanes(x, r, k4, channels=channels), axis=k4), name="token_norm_sum"
    )

    def mean(r):
        return total[0, 0, 0, r, 0] * tirx.const(inv, x.dtype)

    k4b = te.reduce_axis((0, texels), name="k4")
    squares = te.compute(
        (1, 1, 1, rows, 1),
        lambda _n, _c, _h, r, _l: te.sum(_lanes(x, r, k4b, lambda v: (v - mean(r)) * (v - mean(r)), channels), axis=k4b),
        name="token_norm_sq",
    )

    def value(n, c, h, r, lane):
        y = (x[n, c, h, r, lane] - mean(r)) * tirx.rsqrt(squares[0, 0, 0, r, 0] * tirx.const(inv, x.dtype) + tirx.const(eps, x.dtype))
        if gamma is not None:
            y = y * gamma[0, c, 0, 0, lane]
        if beta is not None:
            y = y + beta[0, c, 0, 0, lane]
        return _zero_padding(y, c, lane, channels, x.dtype)

    return te.compute(x.shape, value, name="token_layer_norm")


def token_softmax(x: te.Tensor, channels: Optional[int] = None) -> te.Tensor:
    """Softmax over the channels of ``(1, C/4, 1, M, 4)`` in one kernel: the row maxima (block
    ``token_norm_max``), the sums of ``exp(x - max)`` (``token_norm_sum``) and the quotients.
    ``channels``: over the first that many of a padded base (its padding lanes take no part and
    come out 0)."""
    texels, rows = int(x.shape[1]), int(x.shape[3])
    k4 = te.reduce_axis((0, texels), name="k4")
    lowest = _identity("max", x.dtype)

    def largest(r, k):
        v = [_real_lane(x[0, k, 0, r, lane], k, lane, texels, channels, lowest) for lane in range(LANES)]
        return tirx.max(tirx.max(v[0], v[1]), tirx.max(v[2], v[3]))

    peak = te.compute((1, 1, 1, rows, 1), lambda _n, _c, _h, r, _l: te.max(largest(r, k4), axis=k4), name="token_norm_max")
    k4b = te.reduce_axis((0, texels), name="k4")
    total = te.compute(
        (1, 1, 1, rows, 1),
        lambda _n, _c, _h, r, _l: te.sum(_lanes(x, r, k4b, lambda v: tirx.exp(v - peak[0, 0, 0, r, 0]), channels), axis=k4b),
        name="token_norm_sum",
    )

    def value(n, c, h, r, lane):
        return _zero_padding(tirx.exp(x[n, c, h, r, lane] - peak[0, 0, 0, r, 0]) / total[0, 0, 0, r, 0], c, lane, channels, x.dtype)

    return te.compute(x.shape, value, name="token_softmax")


#: TVM's ``OpPatternKind.kInjective``: what a gather by a constant table is, as TVM's ``take`` is
#: (``AnnotateTIROpPattern`` makes a data-dependent read opaque, which nothing fuses with)
INJECTIVE = 2


def attrs(op: str, pattern: Optional[int] = None) -> dict:
    """The PrimFunc attributes of a token kernel (``pattern``: its ``op_pattern`` for ``FuseOps``,
    when TVM's analysis would get it wrong)."""
    return {SOURCE_OP_ATTR: op} if pattern is None else {SOURCE_OP_ATTR: op, "op_pattern": pattern}
