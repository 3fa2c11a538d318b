import pytest

from relax_vk.core.representation import ANY_SCOPE, BUFFER_ONLY, TEXTURE_ONLY, TensorRepSet, TensorSpec, make_op_repsets
from relax_vk.core.scope import GLOBAL, TEXTURE, TEXTURE_NHWC, TEXTURE_WEIGHT, TextureLimitError, TextureLimits
from relax_vk.core.scope_rule import Role

LIMITS = TextureLimits()
ACT = TensorSpec((1, 4, 8, 8, 4), "float32")
BIAS = TensorSpec((1, 4, 1, 1, 4), "float32")


def test_set_algebra():
    a = TensorRepSet.of(GLOBAL, TEXTURE)
    b = TensorRepSet.of(TEXTURE, TEXTURE_NHWC)
    assert a.intersect(b) == TensorRepSet.of(TEXTURE)
    assert a.union(b).scopes == {GLOBAL, TEXTURE, TEXTURE_NHWC}
    assert TensorRepSet.of().is_empty()
    assert not BUFFER_ONLY.has_texture() and TEXTURE_ONLY.has_texture()


def test_one_set_means_all_inputs_and_io_synced():
    reps = make_op_repsets("add", [ACT, BIAS], [ACT], ANY_SCOPE, None, LIMITS)
    assert reps.sync_args and reps.sync_primary_io and reps.sync_outs
    d = reps.demand()
    assert d.follow_output == [0, 1]
    assert d.arg_scopes_given_output("global") == ["global", "global"]
    assert d.arg_scopes_given_output("global.texture") == ["global.texture", "global.texture"]


def test_list_means_independent_inputs():
    reps = make_op_repsets(
        "conv", [ACT, TensorSpec((1, 4, 3, 3, 4), "float32", Role.WEIGHT)], [ACT], [ANY_SCOPE, ANY_SCOPE], [ANY_SCOPE], LIMITS
    )
    assert not reps.sync_args and not reps.sync_primary_io
    d = reps.demand()
    assert d.follow_output == []
    # each argument takes its own preference, whatever the output got
    assert d.arg_scopes_given_output("global") == ["global.texture", "global.texture-weight"]


def test_omitted_outputs_sync_primary_with_first_output_only():
    reps = make_op_repsets("op", [ACT, ACT], [ACT], [ANY_SCOPE, BUFFER_ONLY], None, LIMITS)
    assert reps.sync_primary_io and not reps.sync_args
    assert reps.demand().arg_scopes_given_output("global.texture") == ["global.texture", "global"]


def test_a_kernel_without_inputs_may_write_what_its_registration_allows():
    # a generator (``full``, ``zeros``) has no input to follow: its consumers decide, it is not
    # forced into a buffer (which cost MobileViT a copy-folded kernel of its own per attention)
    reps = make_op_repsets("full", [], [ACT], ANY_SCOPE, None, LIMITS)
    assert reps.out_sets[0].has_texture() and reps.out_sets[0].scopes >= {GLOBAL, TEXTURE}
    assert make_op_repsets("full", [], [ACT], BUFFER_ONLY, None, LIMITS).out_sets[0] == BUFFER_ONLY


def test_synced_outputs_intersect():
    outs = [TensorSpec((1, 4, 8, 8, 4), "float32"), TensorSpec((1, 4, 8, 8), "float32")]
    reps = make_op_repsets("split", [ACT], outs, ANY_SCOPE, ANY_SCOPE, LIMITS)
    # the second output cannot be a texture: it is neutral and does not pull the first to buffer
    assert reps.out_sets[0].has_texture()
    assert reps.out_sets[1] == BUFFER_ONLY


def test_limits_filter_and_sync_intersection():
    small = TextureLimits(spatial=8, depth=4)
    big = TensorSpec((1, 4, 16, 8, 4), "float32")  # height 16 too big for texture; nhwc w=128 too big
    reps = make_op_repsets("add", [ACT, big], [ACT], ANY_SCOPE, None, small)
    # ACT fits texture and nhwc? texture: w8 h8 l4 ok; the big one fits only texture-weight? w=512 no
    assert reps.arg_sets[0] == reps.arg_sets[1] == BUFFER_ONLY


def test_neutral_arguments_do_not_break_sync():
    scalar = TensorSpec((), "float32")
    reps = make_op_repsets("mul", [ACT, scalar], [ACT], ANY_SCOPE, None, LIMITS)
    assert reps.arg_sets[0].has_texture()
    assert reps.arg_sets[1] == BUFFER_ONLY


def test_texture_only_op_that_cannot_fit_names_op_and_argument():
    with pytest.raises(TextureLimitError, match=r"op my\.kernel: argument 0 \(shape \(1, 1, 20000, 20000, 4\)"):
        make_op_repsets("my.kernel", [TensorSpec((1, 1, 20000, 20000, 4), "float32")], [ACT], [TEXTURE_ONLY], [ANY_SCOPE], LIMITS)


def test_preferred_scope_uses_role():
    w = TensorSpec((8, 64, 3, 3, 4), "float32", Role.WEIGHT)
    reps = make_op_repsets("conv", [ACT, w], [ACT], [ANY_SCOPE, ANY_SCOPE], [ANY_SCOPE], LIMITS)
    assert reps.preferred_arg_scope(0) is TEXTURE
    assert reps.preferred_arg_scope(1) is TEXTURE_WEIGHT
