"""1x1 convs as packed GEMMs (relax_vk.schedules.conv1x1): the right numbers for blocks whose
pixels and output texels do not divide the map and the channels, stride 2, padding and fused
epilogues (bias, relu6, clip, batch norm, residual add), in textures and buffers, on OpenCL (pocl)
and Vulkan (lavapipe); the default rule, the tuning space and the 1x1 policy; a real model with
the GEMM forced on every 1x1 conv."""

import numpy as np
import pytest
import tvm
from tvm import tirx

import relax_vk
from relax_vk.runtime import load
from relax_vk.runtime.measure import parse_config
from relax_vk.schedules.conv1x1 import gemm_applies, gemm_threads
from relax_vk.schedules.conv2d import (CONFIG_ATTR, CONV1X1_ENV, GEMM_DEFAULT, Conv2dConfig, Conv2dWorkload, candidate_configs,
                                       conv1x1_kernel, default_config, fmas_per_fetch, forced_conv1x1, row_tiles)  # fmt: skip
from helpers_build import BACKENDS

torch = pytest.importorskip("torch")


class _Residual(torch.nn.Module):
    """``x + bn(conv1x1(x))``: the residual add and a folded batch norm fused into the conv."""

    def __init__(self, c: int):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(c, c, 1, bias=False), torch.nn.BatchNorm2d(c)
        torch.nn.init.uniform_(self.bn.running_mean, -0.5, 0.5)
        torch.nn.init.uniform_(self.bn.running_var, 0.5, 1.5)

    def forward(self, x):
        return x + self.bn(self.conv(x))


def _model(case):
    ci, co, stride, pad, epilogue = case[:5]
    if epilogue == "residual":
        return _Residual(ci).eval()
    act = {"relu6": torch.nn.ReLU6(), "clip": torch.nn.Hardtanh(-0.5, 0.75), "none": torch.nn.Identity()}[epilogue]
    return torch.nn.Sequential(torch.nn.Conv2d(ci, co, 1, stride, pad, bias=epilogue != "none"), act).eval()


# cin, cout, stride, pad, epilogue, H, W, the GEMM block forced (px x oc texels)[, batch]
CASES = [
    (32, 40, 1, 0, "relu6", 7, 7, (4, 2)),  # 49 pixels: a 1-pixel tail; 10 texels
    (12, 24, 2, 0, "clip", 9, 13, (8, 2)),  # stride 2 (5x7 out), 12 input channels (3 texels)
    (16, 24, 1, 1, "none", 5, 6, (2, 3)),  # padded 1x1 (the pad inlined into the loads), no bias, 3 texels
    (24, 24, 1, 0, "residual", 6, 5, (4, 2), 2),  # batch norm + residual add; 2 images, each with a tail
]


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=["x".join(map(str, c[:7])) for c in CASES])
def test_gemm_numbers(case, backend, device):
    from relax_vk.compiler import compile_lowered, retarget_for_lowering
    from relax_vk.core import target as _target
    from relax_vk.frontends import from_torch
    from relax_vk.pipeline import _lowering_stage, _scope_pipeline
    from relax_vk.schedules import schedule_passes

    torch.manual_seed(0)
    model = _model(case)
    h, w, (px, oc) = case[5], case[6], case[7]
    x = torch.randn(case[8] if len(case) > 8 else 1, case[0], h, w)
    with torch.no_grad():
        ref = model(x).numpy()
    key = Conv2dConfig(px, oc, 64, gemm=True).key()
    tgt = _target.resolve(backend)
    lower_tgt = _target.lowering_target(tgt)
    for options in (relax_vk.ScopeOptions(), relax_vk.ScopeOptions(textures=False)):
        scoped = _scope_pipeline(tgt, None, options)(from_torch(model, (x,)))
        lowered = _lowering_stage(lower_tgt, schedule=False)(retarget_for_lowering(scoped, tgt))
        (gv,) = [g for g, f in lowered.functions_items() if isinstance(f, tirx.PrimFunc) and "conv2d" in g.name_hint]
        lowered.update_func(gv, lowered[gv].with_attr(CONFIG_ATTR, key))
        with lower_tgt:
            lowered = tvm.transform.Sequential(schedule_passes())(lowered)
        assert str(lowered[gv].attrs["relax_vk.schedule"]) == "conv2d" and str(lowered[gv].attrs[CONFIG_ATTR]) == key
        out = load(compile_lowered(tgt, scoped, lowered).artifact(), device=device).run([x.numpy()])[0]
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def test_gemm_kernel_loads_each_texel_once_per_input_channel_texel():
    """Per ic4 step a 4x2 block fetches its 4 input texels and 8 weight texels (128 FMAs: 10.7
    per fetch); the direct schedule's 14x14 block is 2 pixels (64 FMAs from 10 texels)."""
    import re

    from relax_vk.frontends import from_torch

    model = torch.nn.Sequential(torch.nn.Conv2d(32, 64, 1), torch.nn.ReLU6()).eval()
    x = torch.randn(1, 32, 14, 14)
    compiled = relax_vk.build(from_torch(model, (x,)), "opencl")  # (the default: the GEMM here)
    (conv,) = [k for k in compiled.artifact().program["kernels"] if k.get("workload")]
    assert conv["config"] == GEMM_DEFAULT.key() and conv["config_source"] == "default"
    source = compiled.opencl_source
    body = source[source.index("void " + conv["name"] + "(", source.index(conv["name"] + "(") + 1) :]
    loop = body[body.index("for (") : body.index("\n  }\n", body.index("for ("))]
    reads = re.findall(r"READ_IMAGEF\((\w+)", loop)
    assert sorted(set(reads)) and len(reads) == 4 + 8
    assert loop.count(" * ") - loop.count("* 4") >= 128  # (every FMA of the block, unrolled)


def test_default_takes_the_gemm_where_its_block_fetches_less():
    w14 = Conv2dWorkload(1, 16, 14, 14, 96, 1, 1, False)  # rows of 14: the direct block is 2 pixels
    w56 = Conv2dWorkload(1, 16, 56, 56, 32, 1, 1, False)  # 4-pixel rows: the same block either way
    s2 = Conv2dWorkload(1, 32, 28, 28, 64, 1, 1, False, stride=2)  # the direct row segment: 7 texels
    assert default_config(w14) == GEMM_DEFAULT and default_config(s2) == GEMM_DEFAULT
    assert not default_config(w56).gemm and fmas_per_fetch(w56, default_config(w56)) == fmas_per_fetch(w56, GEMM_DEFAULT)
    for w in (w14, s2):
        assert fmas_per_fetch(w, GEMM_DEFAULT) > fmas_per_fetch(w, Conv2dConfig(row_tiles(w.out_w)[0], 2, 64))
    # never for 3x3, depthwise or grouped convs; the split reduction still wins for few outputs
    assert not default_config(Conv2dWorkload(1, 16, 14, 14, 96, 3, 3, False)).gemm
    assert not gemm_applies(Conv2dWorkload(1, 16, 14, 14, 1, 1, 1, True))
    assert not gemm_applies(Conv2dWorkload(1, 6, 14, 14, 12, 1, 1, False, groups=2))
    assert default_config(Conv2dWorkload(1, 30, 1, 1, 480, 1, 1, False)).split


def test_tuning_space_holds_the_gemm_blocks_of_1x1_convs_only():
    w = Conv2dWorkload(1, 3, 7, 7, 64, 1, 1, False)
    gemm = [c for c in candidate_configs(w, threads=(64,)) if c.gemm]
    assert {(c.px, c.oc) for c in gemm} == {(4, 1)}  # (no block whose texels do not divide the 3)
    six = [c for c in candidate_configs(Conv2dWorkload(1, 6, 7, 7, 64, 1, 1, False), threads=(64,)) if c.gemm]
    assert {(c.px, c.oc) for c in six} == {(4, 1), (4, 2), (8, 2)}  # (no block wider than the 6 texels)
    assert all(Conv2dConfig(**parse_config(c.key())) == c for c in gemm)
    assert not any(c.gemm for c in candidate_configs(Conv2dWorkload(1, 3, 7, 7, 64, 3, 3, False)))
    assert gemm_threads(w, 4, 2, 64) == 13 and gemm_threads(Conv2dWorkload(2, 3, 7, 7, 64, 1, 1, False), 4, 2, 64) == 26
    # the tuner keeps a GEMM and a direct block of the same size apart
    from relax_vk.tools.tune import _distinct

    both = [Conv2dConfig(4, 1, 64), Conv2dConfig(4, 1, 64, gemm=True)]
    assert _distinct(Conv2dWorkload(1, 3, 8, 8, 64, 1, 1, False), both) == both


def test_conv1x1_policy(monkeypatch):
    monkeypatch.delenv(CONV1X1_ENV, raising=False)
    assert forced_conv1x1() == "auto"
    with conv1x1_kernel("direct"):
        assert forced_conv1x1() == "direct"
    monkeypatch.setenv(CONV1X1_ENV, "gemm")
    assert forced_conv1x1() == "gemm"
    with conv1x1_kernel("auto"):
        assert forced_conv1x1() == "auto"
    with pytest.raises(ValueError):
        with conv1x1_kernel("fast"):
            pass


def test_gemm_policy_leaves_split_reductions_alone(monkeypatch):
    """A squeeze-excite's 1x1 conv on a pooled vector keeps its split reduction under "gemm"."""
    from relax_vk.frontends import from_torch

    monkeypatch.delenv(CONV1X1_ENV, raising=False)
    model = torch.nn.Sequential(torch.nn.Conv2d(300, 16, 1), torch.nn.ReLU()).eval()
    x = torch.randn(1, 300, 1, 1)
    with conv1x1_kernel("gemm"):
        compiled = relax_vk.build(from_torch(model, (x,)), "opencl")
    (conv,) = [k for k in compiled.artifact().program["kernels"] if k.get("workload")]
    assert conv["config"].endswith("_split") and conv["config_source"] == "default"


@pytest.mark.full_only("test_gemm_numbers")
def test_mobilenet_v2_with_every_1x1_conv_a_gemm():
    """On pocl with textures (image coordinates from flattened pixels); the WGSL and buffer kernels
    are covered shape by shape above (a whole-model build takes a minute or more here)."""
    backend, device, textures = "opencl", "pocl", True
    from relax_vk.frontends import from_torch
    from relax_vk.zoo import build_zoo_model

    model, x = build_zoo_model("mobilenet_v2", input_shape=(1, 3, 32, 32))
    with torch.no_grad():
        ref = model(x).numpy()
    with conv1x1_kernel("gemm"):
        compiled = relax_vk.build(from_torch(model, (x,)), backend, options=relax_vk.ScopeOptions(textures=textures))
    convs = [k for k in compiled.artifact().program["kernels"] if "_k1x1_" in k.get("workload", "")]
    gemms = [k for k in convs if k["config"].endswith("_gemm")]
    assert len(gemms) >= 25 and all(k["config"].endswith("_split") for k in convs if k not in gemms)  # (1x1 maps: split sums)
    out = load(compiled.artifact(), device=device).run([x.numpy()])[0]
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * float(np.abs(ref).max()))


def test_the_tuner_measures_gemm_and_direct_blocks_and_builds_use_the_faster(tmp_path, pocl, db_dir):
    """A 1x1 conv's candidates hold direct and GEMM blocks; each is checked against the float64
    reference on pocl, the fastest is recorded, and a build for that device uses it (whichever
    kind it is); under a policy of the other kind the build takes that kind's default."""
    import json

    from relax_vk.frontends import from_torch
    from relax_vk.runtime.measure import measure_bundle
    from relax_vk.core.limits import device_slug
    from relax_vk.schedules.tuning import Database
    from relax_vk.schedules.workloads import ConvSpec
    from relax_vk.tools.tune import candidate_module, import_results, write_bundle

    spec = ConvSpec((1, 16, 6, 7), (12, 16, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1)
    quiet = dict(apis=("opencl",), memories=("buffer",), threads=(32,), log=lambda _line: None)
    index = write_bundle([candidate_module(spec, 1)], str(tmp_path / "b"), **quiet)
    configs = index["cases"][0]["configs"]
    assert any(c.endswith("_gemm") for c in configs) and any(not c.endswith("_gemm") for c in configs)
    results = measure_bundle(str(tmp_path / "b"), {"opencl": pocl}, repeat=2, log=lambda _line: None)
    assert all(c["ok"] for c in results["results"][0]["candidates"])
    import_results(json.loads(json.dumps(results)), str(db_dir))
    db = Database.load(str(db_dir / f"{device_slug(pocl.name.strip())}.json"))
    ((_, record),) = db.records.items()
    best = Conv2dConfig(**record.config)
    model = torch.nn.Conv2d(16, 12, 1).eval()
    x = torch.randn(1, 16, 6, 7)
    target = relax_vk.target.opencl(device_name=pocl.name)
    for policy, expected, source in (("auto", best, "tuned"), ("gemm" if not best.gemm else "direct", None, "forced")):
        with conv1x1_kernel(policy):
            compiled = relax_vk.build(from_torch(model, (x,)), target=target, options=relax_vk.ScopeOptions(textures=False))
        (conv,) = [k for k in compiled.artifact().program["kernels"] if k.get("workload")]
        assert conv["config_source"] == source and (expected is None or conv["config"] == expected.key())
        assert conv["config"].endswith("_gemm") == (best.gemm if policy == "auto" else not best.gemm)


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_a_tail_of_output_texels_is_refused_and_the_default_divides_them(backend, device):
    """Fuzz seed 150288: a 1x1 conv to 12 channels (3 output texels) on a 45x17 map took the
    default GEMM block of 2 texels; with more than one workgroup of pixels TVM left the texel
    tail's stores unguarded, which wrote past the output (wrong numbers in images, a corrupted
    heap on pocl and lavapipe). The default now takes 1 texel there, the tuning space only blocks
    that divide the texels, and a forced tail block gives way to the direct default."""
    from relax_vk.schedules.conv1x1 import schedule_conv1x1_gemm
    from relax_vk.schedules.conv2d import find_conv, gemm_default, workload
    from tvm import s_tir

    w = Conv2dWorkload(1, 3, 45, 17, 4, 1, 1, False)
    assert default_config(w) == gemm_default(w) and default_config(w).oc == 1
    assert all(w.oc_chunks % c.oc == 0 for c in candidate_configs(w) if c.gemm)
    torch.manual_seed(0)
    model = torch.nn.Conv2d(1, 12, 1, bias=False).eval()
    x = torch.randn(1, 1, 45, 17)
    with torch.no_grad():
        ref = model(x).numpy()
    from relax_vk.frontends import from_torch

    for textures in (True, False):
        compiled = relax_vk.build(from_torch(model, (x,)), backend, options=relax_vk.ScopeOptions(textures=textures))
        (conv,) = [k for k in compiled.artifact().program["kernels"] if k.get("workload")]
        assert conv["config"] == "px4_oc1_t64_gemm"
        session = load(compiled.artifact(), device=device)
        for _ in range(2):
            np.testing.assert_allclose(session.run([x.numpy()])[0], ref, rtol=1e-4, atol=1e-5)
    # a forced block of 2 texels over 3: the GEMM refuses it
    from relax_vk.compiler import retarget_for_lowering
    from relax_vk.core import target as _target
    from relax_vk.pipeline import _lowering_stage, _scope_pipeline

    tgt = _target.resolve(backend)
    scoped = _scope_pipeline(tgt, None, None)(from_torch(model, (x,)))
    lowered = _lowering_stage(_target.lowering_target(tgt), schedule=False)(retarget_for_lowering(scoped, tgt))
    (gv,) = [g for g, f in lowered.functions_items() if isinstance(f, tirx.PrimFunc) and "conv2d" in g.name_hint]
    sch = s_tir.Schedule(lowered[gv])
    conv, pad, epilogue = find_conv(sch)
    assert schedule_conv1x1_gemm(sch, conv, pad, epilogue, workload(sch, conv), 4, 2, 64) is None
