"""The token view algebra: tables follow numpy's semantics of each rearranging op, and the gathers
it plans read exactly the view's elements."""

import numpy as np
import pytest

from relax_vk.passes.layout.token_views import (
    TokenView,
    apply_op,
    element_table,
    identity,
    is_padded,
    nchw_view,
    padded,
    row_gather,
    texel_sources,
)


def packed_base(rows, cols, seed=0):
    """A logical (rows, cols) matrix and its packed (1, cols/4, 1, rows, 4) form."""
    logical = np.random.default_rng(seed).standard_normal((rows, cols)).astype("float32")
    return logical, logical.reshape(rows, cols // 4, 4).transpose(1, 0, 2)[None, :, None]


def view_values(view, logical):
    return logical.reshape(-1)[view.indices()]


def test_rearrangements_follow_numpy():
    logical, _ = packed_base(16, 576)
    x = logical.reshape(1, 16, 576)
    view = identity((1, 16, 576))
    qkv = apply_op(view, "reshape", shape=(1, 16, 3, 3, 64))
    qkv = apply_op(qkv, "permute_dims", axes=[2, 0, 3, 1, 4])
    k = apply_op(qkv, "strided_slice", axes=[0], begin=[1], end=[2], strides=[1])
    k = apply_op(k, "reshape", shape=(1, 3, 16, 64))
    kt = apply_op(k, "permute_dims", axes=[0, 1, 3, 2])
    expected = x.reshape(1, 16, 3, 3, 64).transpose(2, 0, 3, 1, 4)[1:2].reshape(1, 3, 16, 64).transpose(0, 1, 3, 2)
    np.testing.assert_array_equal(view_values(kt, logical), expected)
    rolled = apply_op(identity((2, 4, 4, 8)), "take", indices=np.array([3, 0, 1, 2]), axis=2)
    np.testing.assert_array_equal(rolled.indices(), np.take(identity((2, 4, 4, 8)).indices(), [3, 0, 1, 2], axis=2))
    wide = apply_op(identity((1, 3, 8)), "broadcast_to", shape=(2, 3, 8))
    assert wide.shape == (2, 3, 8) and not wide.is_identity


def test_unknown_or_invalid_rearrangements_are_declined():
    view = identity((4, 8))
    assert apply_op(view, "gather_nd") is None
    assert apply_op(view, "reshape", shape=(3, 8)) is None
    assert apply_op(view, "strided_slice", axes=[0], begin=[3], end=[0], strides=[-1]) is None
    assert apply_op(view, "take", indices=np.array([5]), axis=0) is None


def test_identity_is_recognised_after_a_round_trip():
    view = apply_op(identity((2, 8, 12)), "permute_dims", axes=[1, 0, 2])
    back = apply_op(view, "permute_dims", axes=[1, 0, 2])
    assert not view.is_identity and back.is_identity


def test_texel_sources_of_a_head_split_and_a_transpose():
    logical, packed = packed_base(16, 192)
    heads = apply_op(apply_op(identity((16, 192)), "reshape", shape=(16, 3, 64)), "permute_dims", axes=[1, 0, 2])
    rows, texels = texel_sources(heads)
    # texel (m', c4') of the head-major view is base texel (rows, texels): whole texels
    gathered = packed[0, texels, 0, rows]  # (M', C'/4, 4)
    np.testing.assert_array_equal(gathered.reshape(3, 16, 64), logical.reshape(16, 3, 64).transpose(1, 0, 2))
    transposed = apply_op(heads, "permute_dims", axes=[0, 2, 1])
    assert texel_sources(transposed) is None  # lanes would come from four different rows
    assert texel_sources(transposed, transpose_last=True) is not None


def test_row_gather_only_for_whole_rows():
    view = apply_op(identity((4, 4, 8)), "take", indices=np.array([1, 2, 3, 0]), axis=1)
    np.testing.assert_array_equal(row_gather(view, texel_sources(view)), np.arange(16).reshape(4, 4)[:, [1, 2, 3, 0]].reshape(-1))
    heads = apply_op(identity((4, 16)), "reshape", shape=(4, 2, 8))
    assert row_gather(heads, texel_sources(heads)) is None


@pytest.mark.parametrize("transpose_last", [False, True])
def test_element_table_reads_the_view_with_zero_padding(transpose_last):
    logical, packed = packed_base(24, 120)
    view = apply_op(apply_op(identity((24, 120)), "reshape", shape=(24, 8, 15)), "permute_dims", axes=[1, 0, 2])
    table = element_table(view, transpose_last)
    flat = logical.reshape(-1)
    out = np.where(table >= 0, flat[np.maximum(table, 0)], 0.0)  # (C'/4, M', 4)
    expected = view_values(view, logical)
    if transpose_last:
        expected = np.swapaxes(expected, -1, -2)
    last = expected.shape[-1]
    rows = out.transpose(1, 0, 2).reshape(-1, out.shape[0] * 4)
    np.testing.assert_array_equal(rows[:, :last], expected.reshape(-1, last))
    assert not rows[:, last:].any()  # padding lanes are zeros


def test_padded_views_and_nchw_views():
    view = padded((12, 6625))
    assert (view.rows, view.cols) == (12, 6628) and is_padded(view)
    assert padded((12, 64)).is_identity and not is_padded(identity((12, 64)))
    nchw = nchw_view(8, 2, 3)
    assert nchw.shape == (1, 8, 2, 3)
    # the NCHW view of the (H*W, C) base, permuted to NHWC, is the base itself
    assert apply_op(nchw, "permute_dims", axes=[0, 2, 3, 1]).is_identity


def test_invariants_are_checked():
    with pytest.raises(ValueError, match="multiple of 4"):
        TokenView(4, 6, (4, 6))
    with pytest.raises(ValueError, match="does not match"):
        TokenView(4, 8, (2, 8))
    with pytest.raises(ValueError, match="outside its base"):
        TokenView(1, 4, (1, 4), np.array([[0, 1, 2, 4]]))
