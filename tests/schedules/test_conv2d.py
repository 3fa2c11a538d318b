"""relax_vk's conv2d schedule: the right numbers for every conv shape it takes (kernel sizes,
strides, dilations, padding, depthwise and grouped, row tails, fused epilogues), in textures and
buffers, on OpenCL (pocl) and Vulkan (lavapipe); and how much work each fetch feeds."""

import numpy as np
import pytest
from tvm import tirx

import relax_vk
from relax_vk.runtime import load
from relax_vk.schedules.conv2d import Conv2dConfig, Conv2dWorkload, candidate_configs, default_config, may_split_block, may_split_reduction, row_tiles, splits_reduction
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


@pytest.mark.one_api("backend")
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


# a grid of workloads: batch, output channel chunks (odd, even, prime), row lengths (prime, short,
# one pixel), reduction lengths around SPLIT_MIN_TERMS, kernel shapes, depthwise or not
WORKLOADS = [
    Conv2dWorkload(n, oc4, h, w, 1 if dw else ic, kh, kw, dw, stride)
    for n in (1, 2)
    for oc4 in (1, 2, 3, 15, 16)
    for h, w in ((1, 1), (1, 40), (2, 5), (7, 13), (56, 56), (9, 7))
    for ic in (4, 28, 64, 300, 960)
    for kh, kw in ((1, 1), (3, 3), (1, 3), (7, 7))
    for dw in (False, True)
    for stride in (1, 2)
]


def _fmas_per_fetched_texel(w: Conv2dWorkload, c: Conv2dConfig) -> float:
    """Per (input channel chunk, kernel row) of a thread's block: px x oc output texels take
    px * oc * 16 * kw FMAs from a row segment of input texels (the GEMM: its px pixels) and
    kw * oc * 4 weight texels."""
    inputs = min(c.px, w.out_h * w.out_w) if c.gemm else (c.px - 1) * w.stride + (w.kw - 1) * w.dilation + 1
    px, oc = (min(c.px, w.out_h * w.out_w), min(c.oc, w.oc_chunks)) if c.gemm else (c.px, c.oc)
    return px * oc * 16 * w.kw / (inputs + w.kw * oc * 4)


def test_row_tiles_divide_the_row():
    for out_w in range(1, 300):
        tiles = row_tiles(out_w)
        assert 1 in tiles and tiles == sorted(set(tiles), reverse=True)
        for px in tiles:  # no partial tile; at most 4 pixels, or a whole short row
            assert out_w % px == 0 and (px <= 4 or (px == out_w and out_w <= 8))


def test_default_config_is_a_valid_candidate_covering_the_output():
    for w in WORKLOADS:
        c = default_config(w)
        assert c in candidate_configs(w) and Conv2dConfig.from_key(c.key()) == c
        assert c.split == splits_reduction(w)
        if c.split:  # one workgroup per output texel, its threads splitting the sum
            assert (c.px, c.oc) == (1, 1)
            continue
        if c.gemm:  # blocks over the flattened map, tails masked (tests/schedules/test_conv1x1.py)
            assert (w.kh, w.kw, w.depthwise) == (1, 1, False)
            continue
        assert w.out_w % c.px == 0 and w.oc_chunks % c.oc == 0 and (c.oc == 1 or not w.depthwise)
        threads = w.n * (w.oc_chunks // c.oc) * w.out_h * (w.out_w // c.px)
        assert threads * c.px * c.oc == w.output_texels  # every output texel written exactly once


def test_default_config_feeds_at_least_as_many_fmas_per_fetch_as_the_naive_one():
    naive = Conv2dConfig(1, 1, 64)
    for w in WORKLOADS:
        c = default_config(w)
        if not c.split and not w.depthwise:
            assert _fmas_per_fetched_texel(w, c) >= _fmas_per_fetched_texel(w, naive), (w, c)


def test_every_candidate_config_is_valid():
    for w in WORKLOADS[::7]:
        for c in candidate_configs(w):
            assert Conv2dConfig.from_key(c.key()) == c
            assert c.split or (c.gemm and (w.kh, w.kw) == (1, 1)) or (w.out_w % c.px == 0 and w.oc_chunks % c.oc == 0 and (c.oc == 1 or not w.depthwise))
            assert not c.split or may_split_reduction(w) or (may_split_block(w) and (c.px, c.oc) != (1, 1))  # (wider than the default's rule)
            assert not splits_reduction(w) or may_split_reduction(w)


def test_few_outputs_with_long_sums_split_the_sum_across_a_workgroup():
    # PP-OCR's recognizer: a 1x3 conv of 960 channels on a 1x40 map to 60 channels had 600
    # threads summing 2880 terms each (210 us on the H100's Vulkan); SE convs on pooled vectors
    assert default_config(Conv2dWorkload(1, 15, 1, 40, 960, 1, 3, False)).split
    assert not default_config(Conv2dWorkload(1, 16, 56, 56, 64, 3, 3, False)).split  # (enough outputs)
    assert not default_config(Conv2dWorkload(1, 30, 1, 1, 120, 1, 1, False)).split  # (a short sum)
    assert not default_config(Conv2dWorkload(1, 30, 1, 1, 1, 7, 7, True)).split  # (depthwise)
    model = torch.nn.Conv2d(256, 8, 3, 1, 1).eval()
    compiled = relax_vk.build(relax_vk.frontends.from_torch(model, (torch.randn(1, 256, 2, 5),)), "opencl")
    (conv,) = [k for k in compiled.artifact().program["kernels"] if k.get("workload")]
    w = Conv2dWorkload(1, 2, 2, 5, 256, 3, 3, False)
    assert conv["config"] == default_config(w).key() and default_config(w).split
    threads = conv["local"][0]
    assert conv["local"] == [threads, 1, 1] and conv["global"] == [w.output_texels * threads, 1, 1]  # a workgroup per texel


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


def _forced_conv(model, x, backend, textures, key):
    """``(scoped, lowered)`` of a one-conv model with its conv scheduled under configuration ``key``."""
    import tvm

    from relax_vk.compiler import retarget_for_lowering
    from relax_vk.core import target as _target
    from relax_vk.frontends import from_torch
    from relax_vk.pipeline import _lowering_stage, _scope_pipeline
    from relax_vk.schedules import schedule_passes
    from relax_vk.schedules.conv2d import CONFIG_ATTR

    tgt = _target.resolve(backend)
    lower_tgt = _target.lowering_target(tgt)
    scoped = _scope_pipeline(tgt, None, relax_vk.ScopeOptions(textures=textures))(from_torch(model, (x,)))
    lowered = _lowering_stage(lower_tgt, schedule=False)(retarget_for_lowering(scoped, tgt))
    (gv,) = [g for g, f in lowered.functions_items() if isinstance(f, tirx.PrimFunc) and "conv2d" in g.name_hint]
    lowered.update_func(gv, lowered[gv].with_attr(CONFIG_ATTR, key))
    with lower_tgt:
        lowered = tvm.transform.Sequential(schedule_passes())(lowered)
    return tgt, scoped, lowered, lowered[gv]


# cin, cout, kernel, stride, pad, H, W, the block-split configuration: whole rows of 1-3 texels of
# output channels, threads more than, fewer than and dividing the block's texels (the threads past
# the block store nothing: a row of 6 pixels with 4 or 8 threads), stride 2, 1x1, a padded window
SPLIT_BLOCKS = [
    (64, 16, 3, 1, 1, 7, 7, "px7_oc2_t16_split"),
    (32, 8, 3, 1, 1, 6, 6, "px6_oc1_t4_split"),
    (32, 8, 3, 1, 1, 6, 6, "px6_oc2_t8_split"),
    (48, 12, 3, 1, 1, 5, 5, "px5_oc3_t4_split"),
    (128, 16, 3, 1, 1, 14, 14, "px7_oc4_t4_split"),
    (128, 16, 3, 2, 1, 14, 14, "px7_oc4_t32_split"),
    (64, 8, 1, 1, 0, 7, 7, "px7_oc2_t16_split"),
]


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", BACKENDS)
@pytest.mark.parametrize("case", SPLIT_BLOCKS, ids=["x".join(map(str, c)) for c in SPLIT_BLOCKS])
def test_split_block_schedule_numbers(case, backend, device):
    """The block-split schedule (a workgroup per block of pixels x output texels, its threads
    splitting the input channels) gives the conv's numbers with its fused epilogue, in textures
    and buffers. Run twice: a thread past the block that stored garbage would race with the
    neighbouring workgroup's store (it did, before the block's texels were laid out so that TVM's
    own guard covers those threads)."""
    from relax_vk.compiler import compile_lowered
    from relax_vk.schedules.conv2d import CONFIG_ATTR
    from relax_vk.schedules.verify import kernel_problems

    ci, co, k, s, p, h, w, key = case
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(ci, co, k, s, p), torch.nn.ReLU()).eval()
    x = torch.randn(1, ci, h, w)
    with torch.no_grad():
        ref = model(x).numpy()
    for textures in (True, False):
        tgt, scoped, lowered, conv = _forced_conv(model, x, backend, textures, key)
        assert str(conv.attrs["relax_vk.schedule"]) == "conv2d" and str(conv.attrs[CONFIG_ATTR]) == key
        assert kernel_problems(conv) == []
        session = load(compile_lowered(tgt, scoped, lowered).artifact(), device=device)
        for _ in range(2):
            np.testing.assert_allclose(session.run([x.numpy()])[0], ref, rtol=1e-4, atol=1e-5)


def test_split_block_candidates_fit_their_schedule():
    """Every block-split candidate is one the schedule takes (no partial block, threads that
    divide the input channel texels, the whole row or threads dividing the block) and stays in
    the register budget; ResNet's deep layers get them, a conv with many outputs does not."""
    from relax_vk.schedules.conv2d import SPLIT_BLOCK_MAX_SHARED, SPLIT_BLOCK_MAX_TEXELS, split_block_configs, split_block_fits

    for w in WORKLOADS:
        for c in split_block_configs(w):
            assert c.split and (c.px, c.oc) != (1, 1) and split_block_fits(w, c)
            assert c.px * c.oc <= SPLIT_BLOCK_MAX_TEXELS and (c.px == w.out_w or (c.px * c.oc) % c.threads == 0)
            assert c.threads * c.px * c.oc * 16 <= SPLIT_BLOCK_MAX_SHARED
            assert (w.ic // 4) % c.threads == 0 and w.oc_chunks % c.oc == 0 and not w.depthwise
    deep = Conv2dWorkload(1, 128, 7, 7, 512, 3, 3, False)
    assert {c.key() for c in split_block_configs(deep)} >= {"px7_oc1_t64_split", "px7_oc2_t32_split"}
    assert {c.key() for c in split_block_configs(deep)} <= {c.key() for c in candidate_configs(deep)}
    wide = Conv2dWorkload(1, 64, 112, 112, 64, 3, 3, False)
    assert not any(c.split for c in candidate_configs(wide))


class _ResidualHardswish(torch.nn.Module):
    """conv -> batch norm -> + x -> hard-swish: an epilogue that reads the conv's input again and
    its own input twice (the DAG the write-back folds in)."""

    def __init__(self, c):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(c, c, 3, 1, 1, bias=False), torch.nn.BatchNorm2d(c)
        torch.nn.init.uniform_(self.bn.running_var, 0.5, 1.5)

    def forward(self, x):
        return torch.nn.functional.hardswish(x + self.bn(self.conv(x)))


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_split_block_folds_a_residual_epilogue(backend, device):
    from relax_vk.compiler import compile_lowered

    torch.manual_seed(1)
    model = _ResidualHardswish(32).eval()
    x = torch.randn(1, 32, 5, 5)
    with torch.no_grad():
        ref = model(x).numpy()
    for textures in (True, False):
        tgt, scoped, lowered, conv = _forced_conv(model, x, backend, textures, "px5_oc2_t4_split")
        assert str(conv.attrs["relax_vk.schedule"]) == "conv2d"
        out = load(compile_lowered(tgt, scoped, lowered).artifact(), device=device).run([x.numpy()])[0]
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_grouped_convs_whose_groups_split_a_texel_hold_no_large_arrays(backend, device):
    """Groups of 5 and 6 channels (a group ends inside a texel: relax_vk's conv rule declines them)
    run right, and no kernel keeps a large per-thread array: TVM's dlight adreno conv rule, which
    scheduled them before, cached a window of 416 floats a thread here (832 in the zoo's ResNeXt;
    1.7-22x slower on an H200 than the safe schedule now used)."""
    import re

    import torch

    from relax_vk.frontends import from_torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 24, 1), torch.nn.ReLU(), torch.nn.Conv2d(24, 24, 3, padding=1, groups=4),
                                torch.nn.ReLU(), torch.nn.Conv2d(24, 20, 1), torch.nn.Conv2d(20, 20, 3, stride=2, padding=1, groups=4)).eval()  # fmt: skip
    x = torch.randn(1, 8, 20, 20)
    compiled = relax_vk.build(from_torch(model, (x,)), target=backend)
    source = compiled.source if backend == "opencl" else "\n".join(s.source for s in compiled.shaders.values())
    sizes = [int(a or b) for a, b in re.findall(r"float \w+\[(\d+)\]|array<f32, (\d+)>", source)]
    assert sizes and max(sizes) <= 64, sorted(sizes)[-3:]
    out = load(compiled.artifact(), device=device).run([x.numpy()])[0]
    np.testing.assert_allclose(out, model(x).detach().numpy(), rtol=1e-4, atol=1e-4)
