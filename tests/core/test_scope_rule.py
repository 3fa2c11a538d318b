from relax_vk.core.scope import ALL_SCOPES, GLOBAL, TEXTURE, TEXTURE_NHWC, TEXTURE_WEIGHT, TextureLimits
from relax_vk.core.scope_rule import Role, choose_scope, rank_scopes

LIMITS = TextureLimits()


def test_activation_keeps_spatial_axes_2d():
    # upstream would pick texture-weight here (it fits); the rule keeps H and W as the image axes
    assert choose_scope((2, 4, 28, 28, 4), "float32", ALL_SCOPES, LIMITS) is TEXTURE


def test_one_row_tensors_map_to_one_2d_image():
    # tokens (1, C/4, 1, M, 4): one image M x C/4 rather than C/4 layers one texel row high
    assert choose_scope((1, 96, 1, 196, 4), "float32", ALL_SCOPES, LIMITS) is TEXTURE_NHWC
    # with a LayerNorm gain (1, C/4, 1, 1, 4) sharing its scope: still one image
    assert choose_scope((1, 96, 1, 196, 4), "float32", ALL_SCOPES, LIMITS, peers=[(1, 96, 1, 1, 4)]) is TEXTURE_NHWC
    assert choose_scope((1, 96, 1, 1, 4), "float32", ALL_SCOPES, LIMITS, peers=[(1, 96, 1, 196, 4)]) is TEXTURE_NHWC
    # a vector alone, or a one-row tensor tied to a map (a pool's input), keeps the layered mapping
    assert choose_scope((1, 96, 1, 1, 4), "float32", ALL_SCOPES, LIMITS) is TEXTURE
    assert choose_scope((1, 96, 1, 1, 4), "float32", ALL_SCOPES, LIMITS, peers=[(1, 96, 7, 7, 4)]) is TEXTURE


def test_weight_prefers_weight_mapping():
    assert choose_scope((8, 64, 3, 3, 4), "float32", ALL_SCOPES, LIMITS, Role.WEIGHT) is TEXTURE_WEIGHT


def test_falls_back_to_next_mapping_that_fits():
    # 2*2048 layers exceed the depth limit for global.texture; nhwc keeps 2 layers
    assert choose_scope((2, 2048, 8, 8, 4), "float32", ALL_SCOPES, LIMITS) is TEXTURE_NHWC
    # a weight too wide for the weight mapping
    assert choose_scope((2, 512, 6, 6, 4), "float32", ALL_SCOPES, LIMITS, Role.WEIGHT) is TEXTURE  # width 18432


def test_too_large_for_any_mapping_is_buffer():
    assert choose_scope((1, 1, 20000, 20000, 4), "float32", ALL_SCOPES, LIMITS) is GLOBAL


def test_declared_preference_wins_when_it_fits():
    pref = (TEXTURE_NHWC,)
    assert choose_scope((2, 4, 28, 28, 4), "float32", ALL_SCOPES, LIMITS, preference=pref) is TEXTURE_NHWC
    small = TextureLimits(spatial=100, depth=2048)
    assert choose_scope((2, 4, 28, 28, 4), "float32", ALL_SCOPES, small, preference=pref) is TEXTURE


def test_restricted_allowed_set():
    assert choose_scope((2, 4, 28, 28, 4), "float32", {GLOBAL}, LIMITS) is GLOBAL
    assert choose_scope((2, 4, 28, 28, 4), "float32", {GLOBAL, TEXTURE_WEIGHT}, LIMITS) is TEXTURE_WEIGHT


def test_rank_puts_buffer_last():
    assert rank_scopes({GLOBAL, TEXTURE_WEIGHT, TEXTURE}) == (TEXTURE, TEXTURE_WEIGHT, GLOBAL)
