"""relax_vk's conv2d schedule: the right numbers for every conv shape it takes (kernel sizes,
strides, dilations, padding, depthwise and grouped, row tails, fused epilogues), in textures and
buffers, on OpenCL (pocl) and Vulkan (lavapipe); and how much work each fetch feeds."""

import numpy as np
import pytest
from tvm import tirx

import relax_vk
from relax_vk.runtime import load
from relax_vk.schedules.conv2d import Conv2dConfig, Conv2dWorkload, default_config, row_tiles
from helpers_build import BACKENDS

torch = pytest.importorskip("torch")

# cin, cout, kernel, stride, pad, dilation, groups, H, W
CASES = [
    (8, 16, 3, 1, 1, 1, 1, 12, 13),  # row tail: 13 is prime, one pixel per thread
    (16, 8, 1, 1, 0, 1, 1, 9, 7),  # 1x1, short row: one 7-pixel tile
    (8, 8, 3, 2, 1, 1, 1, 15, 17),  # strided
    (12, 20, 5, 1, 2, 2, 1, 11, 10),  # dilated, channels not multiples of 8
    (3, 16, 7, 2, 3, 1, 1, 23, 21),  # RGB stem (3 channels padded to 4)
    (16, 16, 3, 1, 1, 1, 16, 10, 9),  # depthwise
    (16, 32, 3, 1, 1, 1, 4, 9, 10),  # grouped, 4 input channels per group
    (16, 8, 1, 1, 0, 1, 1, 1, 1),  # one output pixel (squeeze-excite): fewer pixels than threads
    (8, 4, 3, 2, 1, 1, 1, 2, 1),  # one output pixel from a strided, padded window
    # few outputs, long sums: the split-reduction schedule (a workgroup per output texel)
    (256, 8, 3, 1, 1, 1, 1, 2, 5),  # padded 3x3, 2304 terms, 20 output texels
    (300, 16, 1, 1, 0, 1, 1, 1, 1),  # a squeeze-excite's 1x1 on a pooled vector, 300 terms
    (64, 8, 3, 2, 1, 1, 1, 4, 6),  # strided, 576 terms (64 threads: 9 rounds)
]


@pytest.mark.parametrize("backend, device", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=["x".join(map(str, c)) for c in CASES])
def test_conv_schedule_numbers(case, backend, device):
    from relax_vk.frontends import from_torch

    ci, co, k, s, p, d, g, h, w = case
    model = torch.nn.Sequential(torch.nn.Conv2d(ci, co, k, s, p, d, g), torch.nn.Hardswish()).eval()
    x = torch.randn(1, ci, h, w)
    with torch.no_grad():
        ref = model(x).numpy()
    for options in (relax_vk.ScopeOptions(), relax_vk.ScopeOptions(textures=False)):  # textures, packed buffers
        compiled = relax_vk.build(from_torch(model, (x,)), backend, options=options)
        convs = [f for gv, f in compiled.lowered.functions_items() if isinstance(f, tirx.PrimFunc) and "conv2d" in gv.name_hint]
        assert [str(f.attrs["relax_vk.schedule"]) for f in convs] == ["conv2d"]  # padding and hard-swish fused in
        out = load(compiled.artifact(), device=device).run([x.numpy()])[0]
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def test_row_tiles_never_leave_a_partial_tile():
    assert row_tiles(13) == [1] and row_tiles(7) == [7, 1] and row_tiles(56) == [4, 2, 1] and row_tiles(6) == [6, 3, 2, 1]
    cfg = default_config(Conv2dWorkload(1, 16, 56, 56, 64, 3, 3, False))
    assert (cfg.px, cfg.oc) == (4, 2)
    # per (ic4, kh) of a 3x3 stride-1 conv: a row segment of px + 2 input texels and 3 * oc * 4
    # weight texels feed px * oc * 16 * 3 FMAs (TVM's adreno rule: about 1 per texel fetched)
    assert cfg.px * cfg.oc * 16 * 3 / (cfg.px + 2 + 3 * cfg.oc * 4) > 8


def test_few_outputs_with_long_sums_split_the_sum_across_a_workgroup():
    # PP-OCR's recognizer: a 1x3 conv of 960 channels on a 1x40 map to 60 channels had 600
    # threads summing 2880 terms each (210 us on the H100's Vulkan); SE convs on pooled vectors
    svtr = Conv2dWorkload(1, 15, 1, 40, 960, 1, 3, False)
    assert default_config(svtr) == Conv2dConfig(1, 1, 64, split=True) and default_config(svtr).key() == "px1_oc1_t64_split"
    assert Conv2dConfig.from_key("px1_oc1_t64_split") == Conv2dConfig(1, 1, 64, split=True)
    assert Conv2dConfig.from_key("px4_oc2_t64") == Conv2dConfig(4, 2, 64)
    assert not default_config(Conv2dWorkload(1, 16, 56, 56, 64, 3, 3, False)).split  # (enough outputs)
    assert not default_config(Conv2dWorkload(1, 30, 1, 1, 120, 1, 1, False)).split  # (a short sum)
    assert not default_config(Conv2dWorkload(1, 30, 1, 1, 1, 7, 7, True)).split  # (depthwise)
    model = torch.nn.Conv2d(256, 8, 3, 1, 1).eval()
    compiled = relax_vk.build(relax_vk.frontends.from_torch(model, (torch.randn(1, 256, 2, 5),)), "opencl")
    (conv,) = [k for k in compiled.artifact().program["kernels"] if k.get("workload")]
    assert conv["config"] == "px1_oc1_t64_split" and conv["local"] == [64, 1, 1] and conv["global"] == [2 * 2 * 5 * 64, 1, 1]


def _loops(func) -> list:
    """``(kind, extent)`` of every loop of ``func``."""
    from tvm.tirx import stmt as S

    found = []

    def visit(node):
        if isinstance(node, S.For):
            found.append((node.kind, node.extent))
            visit(node.body)
        elif isinstance(node, S.SeqStmt):
            for s in node.seq:
                visit(s)
        else:
            for attr in ("body", "then_case", "else_case", "block"):
                child = getattr(node, attr, None)
                if child is not None and not isinstance(child, (list, tuple)) and hasattr(child, "span"):
                    visit(child)

    visit(func.body)
    return found


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_grouped_conv_tiles_stay_in_a_group_and_straddling_tiles_stay_serial(backend, device):
    """24 -> 24 channels in 2 groups: 3 output texels per group. The default tile (and every
    tuning candidate) stays inside a group. A forced tile of 2 texels straddles the groups: its
    input rows span both groups, a region TVM bounds only per thread; the loop over it stays
    serial (TVM cannot unroll it: ShuffleNet's "Cannot unroll non-constant loop") and the numbers
    are right."""
    import tvm

    from relax_vk.compiler import compile_lowered, retarget_for_lowering
    from relax_vk.core import target as _target
    from relax_vk.frontends import from_torch
    from relax_vk.pipeline import _lowering_stage, _scope_pipeline
    from relax_vk.schedules import schedule_passes
    from relax_vk.schedules.conv2d import CONFIG_ATTR, candidate_configs
    from relax_vk.schedules.verify import kernel_problems

    grouped = Conv2dWorkload(1, 6, 8, 8, 12, 1, 1, False, groups=2)
    assert grouped.group_texels == 3 and default_config(grouped).oc == 1
    assert {c.oc for c in candidate_configs(grouped)} == {1}
    assert default_config(Conv2dWorkload(1, 6, 8, 8, 12, 1, 1, False)).oc == 2  # (one group: 6 texels)

    model = torch.nn.Sequential(torch.nn.Conv2d(24, 24, 1, groups=2), torch.nn.ReLU()).eval()
    x = torch.randn(1, 24, 8, 8)
    tgt = _target.resolve(backend)
    lower_tgt = _target.lowering_target(tgt)
    scoped = _scope_pipeline(tgt, None, None)(from_torch(model, (x,)))
    lowered = _lowering_stage(lower_tgt, schedule=False)(retarget_for_lowering(scoped, tgt))
    (gv,) = [g for g, f in lowered.functions_items() if isinstance(f, tirx.PrimFunc) and "conv2d" in g.name_hint]
    lowered.update_func(gv, lowered[gv].with_attr(CONFIG_ATTR, Conv2dConfig(px=4, oc=2, threads=64).key()))
    with lower_tgt:
        lowered = tvm.transform.Sequential(schedule_passes())(lowered)
    conv = lowered[gv]
    assert str(conv.attrs["relax_vk.schedule"]) == "conv2d" and str(conv.attrs[CONFIG_ATTR]) == "px4_oc2_t64"
    loops = _loops(conv)
    assert any(k == tirx.ForKind.SERIAL and not isinstance(e, tirx.IntImm) for k, e in loops)  # the straddling rows
    unrolled = [e for k, e in loops if k == tirx.ForKind.UNROLLED]
    assert unrolled and all(isinstance(e, tirx.IntImm) for e in unrolled)
    assert kernel_problems(conv) == []
    out = load(compile_lowered(tgt, scoped, lowered).artifact(), device=device).run([x.numpy()])[0]
    with torch.no_grad():
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-4, atol=1e-5)
