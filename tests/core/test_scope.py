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
