import pytest

from relax_vk.core.scope import (
    GLOBAL,
    TEXTURE,
    TEXTURE_NHWC,
    TEXTURE_WEIGHT,
    ImageExtents,
    TextureLimitError,
    TextureLimits,
    is_texturable,
    placed_extents,
    folded_width,
    scope_from_name,
    tensor_bytes,
)

SHAPE = (2, 16, 56, 28, 4)


@pytest.mark.parametrize(
    "scope, extents",
    [
        (TEXTURE, ImageExtents(width=28, height=56, layers=32)),
        (TEXTURE_NHWC, ImageExtents(width=56 * 28, height=16, layers=2)),
        (TEXTURE_WEIGHT, ImageExtents(width=16 * 56 * 28, height=2, layers=1)),
    ],
)
def test_image_extents_follow_tvm_flattening(scope, extents):
    assert scope.image_extents(SHAPE) == extents


def test_general_rank():
    assert TEXTURE.image_extents((3, 5, 4)) == ImageExtents(5, 3, 1)
    assert TEXTURE_WEIGHT.image_extents((2, 3, 5, 7, 11, 4)) == ImageExtents(3 * 5 * 7 * 11, 2, 1)
    assert TEXTURE_NHWC.image_extents((2, 3, 5, 7, 11, 4)) == ImageExtents(5 * 7 * 11, 3, 2)
    assert TEXTURE.image_extents((2, 3, 5, 7, 11, 4)) == ImageExtents(11, 7, 2 * 3 * 5)


def test_limits_are_inclusive():
    limits = TextureLimits(spatial=28, depth=32)
    assert TEXTURE.fits(SHAPE, "float32", TextureLimits(spatial=56, depth=32))
    assert not TEXTURE.fits(SHAPE, "float32", limits)  # height 56 > 28
    assert TEXTURE.fits((1, 1, 28, 28, 4), "float32", limits)


def test_not_texturable():
    assert not is_texturable((2, 16, 56, 56), "float32")  # no texel axis
    assert not is_texturable((2, 16, 56, 56, 4), "int8")
    assert not is_texturable(None, "float32")  # dynamic
    assert not is_texturable((4, 4), "float32")
    # an unpacked tensor whose last axis happens to be 4 (NCHW with W = 4) is not packed
    assert not is_texturable((1, 96, 4, 4), "float32")
    assert is_texturable((1, 1, 1, 1, 4), "float16")
    assert GLOBAL.fits(None, "int8", TextureLimits())


def test_check_names_the_tensor_and_limit():
    with pytest.raises(TextureLimitError, match=r"lv7.*\(20000, 1, 1\).*width 20000 > spatial limit 16384"):
        TEXTURE_WEIGHT.check((1, 20000, 1, 1, 4), "float32", TextureLimits(), "lv7")
    with pytest.raises(TextureLimitError, match="lv8.*cannot be a texture"):
        TEXTURE.check((2, 3), "float32", TextureLimits(), "lv8")


def test_buffer_scope_has_no_extents():
    with pytest.raises(ValueError):
        GLOBAL.image_extents(SHAPE)


def test_scope_from_name_roundtrip_and_unknown():
    for s in (GLOBAL, TEXTURE, TEXTURE_NHWC, TEXTURE_WEIGHT):
        assert scope_from_name(s.name) is s
    with pytest.raises(ValueError, match="global.texture-nchw"):
        scope_from_name("global.texture-nchw")


def test_bytes():
    assert tensor_bytes(SHAPE, "float32") == 2 * 16 * 56 * 28 * 4 * 4
    assert tensor_bytes((8,), "float16") == 16


def test_limits_validated():
    with pytest.raises(ValueError):
        TextureLimits(spatial=0)


@pytest.mark.parametrize(
    "scope, shape, limit, placed",
    [
        (TEXTURE, (1, 16, 56, 56, 4), 16384, (224, 224)),  # 896 rows of 56, four a line: the stem input's 224 x 224
        (TEXTURE, (1, 1, 224, 224, 4), 16384, (224, 224)),  # square already
        (TEXTURE, (1, 32, 28, 28, 4), 16384, (112, 224)),  # 112 x 224 and 224 x 112 tie: the one nearer 28 wide
        (TEXTURE, (1, 3, 7, 7, 4), 16384, (7, 21)),  # 21 rows of 7: no power of two above one divides either
        (TEXTURE, (1, 16, 56, 56, 4), 112, None),  # 56 x 896, 112 x 448, 28 x 1792 ... pass the limit
        (TEXTURE, (1, 64, 8, 8, 4), 64, (64, 64)),  # 512 rows (past the limit) fit once eight lie side by side
        (TEXTURE_NHWC, (1, 8, 1, 256, 4), 16384, (64, 32)),  # 8 rows of 256 tokens, each over four lines
        (TEXTURE_NHWC, (1, 24, 1, 3136, 4), 16384, (196, 384)),  # 3,136 tokens over sixteen lines
        (TEXTURE_NHWC, (1, 96, 1, 197, 4), 16384, (197, 96)),  # 197 tokens: as it is
    ],
)
def test_folded_texels_lie_in_the_squarest_rectangle(scope, shape, limit, placed):
    got = placed_extents(shape, "float32", scope, limit)
    ext = scope.image_extents(shape)
    if placed is None:
        assert got is None and folded_width(ext, limit) is None
        return
    assert (got.width, got.height, got.layers) == (*placed, 1)
    assert got.width == folded_width(ext, limit) and got.width * got.height == ext.width * ext.height * ext.layers
    ratio = max(got.width, ext.width) // min(got.width, ext.width)
    assert ratio & (ratio - 1) == 0


@pytest.mark.parametrize("ext", [ImageExtents(5, 4, 6), ImageExtents(64, 2, 1), ImageExtents(24, 1, 3)])
def test_a_folded_rectangle_keeps_the_texels_order(ext):
    """The kernels' coordinates (codegen.texture_origins: ``((r % k) w + x, r / k)`` for ``W = k w``,
    ``(x % W, r m + x / W)`` for ``W = w / m``) are ``(i % W, i // W)`` of the i-th texel, row by row."""
    width = folded_width(ext, 16384)
    for z in range(ext.layers):
        for y in range(ext.height):
            for x in range(ext.width):
                r, i = z * ext.height + y, (z * ext.height + y) * ext.width + x
                if width >= ext.width:
                    k = width // ext.width
                    at = ((r % k) * ext.width + x, r // k)
                else:
                    at = (x % width, r * (ext.width // width) + x // width)
                assert at == (i % width, i // width)


def test_no_fold_fits_and_buffers_are_not_placed():
    assert placed_extents((1, 1, 9, 9, 4), "float32", TEXTURE, 8) is None  # 9 x 9 at a limit of 8
    assert placed_extents((1, 4, 5, 5, 4), "float32", GLOBAL, 16384) is None
    assert placed_extents((2, 3, 5, 7, 4), "float32", TEXTURE_WEIGHT, 16384) is None  # constants never share
