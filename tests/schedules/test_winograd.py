"""Winograd F(2,3) and F(4,3) convs (relax_vk.legalize.winograd, relax_vk.schedules.winograd,
relax_vk.passes.scope.choose_conv_algorithm): the transforms, the right numbers for odd sizes,
both paddings and channel counts that are not multiples of 4, with the conv's fused bias + relu
and a residual add, in textures and buffers, on OpenCL (pocl) and Vulkan (lavapipe); which convs
the rule takes; and how a tuning record picks the algorithm.

Error bounds: F(2,3) is held to the direct conv's bound (rtol 1e-4, atol 1e-5 here). F(4,3)'s
transforms have coefficients up to 8 (A^T) and down to 1/24 (G), and its fp32 rounding error grows
with them: measured here it is 5-10x F(2,3)'s (512 -> 512 channels at 7x7: 1.2e-5 of the output's
magnitude); it is held to 1e-4 of the output's largest magnitude (elementwise), the bound the
tuner checks every candidate at. ResNet-18 end to end (F(2,3)) is held to 1e-4 of the largest
logit (measured 4e-7; F(4,3) 5e-7)."""

import json

import numpy as np
import pytest
from tvm import relax, tirx

import relax_vk
from relax_vk.core.options import ScopeOptions
from relax_vk.legalize.winograd import TILES, matrices, transform_weight
from relax_vk.passes.layout.packing import pack_weight_array
from relax_vk.runtime import load
from relax_vk.runtime.measure import parse_config
from relax_vk.schedules.conv2d import Conv2dWorkload
from relax_vk.schedules.winograd import WinogradConfig, candidate_configs, default_config
from helpers_build import BACKENDS

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("m", TILES)
def test_transforms_compute_a_3x3_correlation(m):
    """``A^T [(G g G^T) * (B^T d B)] A`` is the valid 3x3 correlation of an ``a x a`` tile, per
    channel pair, for the packed weight layout the kernels read."""
    at, bt, _ = matrices(m)
    a = m + 2
    rng = np.random.default_rng(m)
    w = rng.standard_normal((8, 5, 3, 3))  # OIHW
    d = rng.standard_normal((5, a, a))
    u = transform_weight(pack_weight_array(w, 8), m)  # (2, 8, a, a, 4): input channels padded to 8
    assert u.shape == (2, 8, a, a, 4)
    v = np.einsum("ij,cjk,lk->cil", bt, d, bt)
    for o in range(8):
        mo = sum(u[o // 4, c, :, :, o % 4] * v[c] for c in range(5))
        y = at @ mo @ at.T
        ref = np.array([[np.sum(d[:, i : i + 3, j : j + 3] * w[o]) for j in range(m)] for i in range(m)])
        np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-10)
    assert not np.any(u[:, 5:])  # padded input channels stay zero


def _kernels(compiled, schedule):
    return [f for _, f in compiled.lowered.functions_items() if isinstance(f, tirx.PrimFunc) and f.attrs is not None
            and str(f.attrs.get("relax_vk.schedule", "")) == schedule]  # fmt: skip


class _Residual(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = torch.nn.Conv2d(c, c, 3, 1, 1)

    def forward(self, x):
        return torch.relu(self.conv(x) + x)


# cin, cout, pad, H, W; each case builds (f23 texture, f43 buffer) or the other way round
CASES = [
    (4, 12, 1, 7, 9, ("f23", "f43")),  # odd map (tiles past the edge), 3 output texels from one input texel
    (5, 6, 0, 9, 11, ("f43", "f23")),  # no padding, 5 -> 6 channels (padded to texels)
    (8, 8, 1, 1, 2, ("f23", "f43")),  # one row of two pixels: a single partial tile
]


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("backend, device", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=["x".join(map(str, c[:5])) for c in CASES])
def test_winograd_numbers(case, backend, device, request):
    from relax_vk.frontends import from_torch

    request.getfixturevalue(device)
    ci, co, p, h, w, modes = case
    torch.manual_seed(ci * 100 + co)
    model = torch.nn.Sequential(torch.nn.Conv2d(ci, co, 3, 1, p), torch.nn.ReLU()).eval()
    x = torch.randn(1, ci, h, w)
    with torch.no_grad():
        ref = model(x).numpy()
    mod = from_torch(model, (x,))
    for mode, textures in zip(modes, (True, False)):
        compiled = relax_vk.build(mod, backend, options=ScopeOptions(winograd=mode, textures=textures))
        (kernel,) = _kernels(compiled, "winograd")  # bias and relu fused in, one kernel
        assert int(kernel.attrs["relax_vk.winograd_tile"]) == (2 if mode == "f23" else 4)
        assert not _kernels(compiled, "conv2d")
        out = load(compiled.artifact(), device=device).run([x.numpy()])[0]
        if mode == "f23":
            np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
        else:
            assert np.max(np.abs(out - ref)) <= 1e-4 * max(1.0, float(np.max(np.abs(ref))))


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_residual_add_is_fused(backend, device, request):
    from relax_vk.frontends import from_torch

    request.getfixturevalue(device)
    torch.manual_seed(1)
    model = _Residual(8).eval()
    x = torch.randn(1, 8, 6, 5)
    with torch.no_grad():
        ref = model(x).numpy()
    compiled = relax_vk.build(from_torch(model, (x,)), backend, options=ScopeOptions(winograd="f23"))
    assert len(_kernels(compiled, "winograd")) == 1 and not _kernels(compiled, "conv2d")
    # the residual add and the relu are in the conv's kernel: every other kernel is a layout transform
    others = [gv.name_hint for gv, f in compiled.lowered.functions_items()
              if isinstance(f, tirx.PrimFunc) and "winograd" not in gv.name_hint and "layout_transform" not in gv.name_hint]  # fmt: skip
    assert not others
    out = load(compiled.artifact(), device=device).run([x.numpy()])[0]
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def _scoped(model, x, **options):
    from relax_vk.frontends import from_torch
    from relax_vk.pipeline import scope_pipeline

    return scope_pipeline("opencl", options=ScopeOptions(**options))(from_torch(model, (x,)))


def _winograd_calls(mod) -> int:
    return sum(1 for gv, f in mod.functions_items() if isinstance(f, tirx.PrimFunc) and "winograd_conv2d" in gv.name_hint)


def _conv_ops(mod) -> int:
    import tvm

    op = tvm.ir.Op.get("relax.nn.conv2d")
    found = []
    relax.analysis.post_order_visit(mod["main"], lambda e: found.append(e) if isinstance(e, relax.Call) and e.op.same_as(op) else None)
    return len(found)


def test_only_3x3_stride_1_single_group_convs_become_winograd():
    model = torch.nn.Sequential(
        torch.nn.Conv2d(8, 8, 3, 1, 1),  # taken
        torch.nn.Conv2d(8, 8, 3, 2, 1),  # strided
        torch.nn.Conv2d(8, 8, 3, 1, 2, dilation=2),  # dilated
        torch.nn.Conv2d(8, 8, 3, 1, 1, groups=8),  # depthwise
        torch.nn.Conv2d(8, 8, 3, 1, 1, groups=2),  # grouped
        torch.nn.Conv2d(8, 8, 1),  # 1x1
        torch.nn.Conv2d(8, 8, 3, 1, 0),  # taken (no padding)
    ).eval()
    x = torch.randn(1, 8, 12, 12)
    forced = _scoped(model, x, winograd="f23")
    assert _winograd_calls(forced) == 2 and _conv_ops(forced) == 5
    for mode in ("off", "auto"):  # auto: no tuning database for the target: direct
        kept = _scoped(model, x, winograd=mode)
        assert _winograd_calls(kept) == 0 and _conv_ops(kept) == 7


def test_a_tuning_record_picks_the_algorithm(tmp_path, monkeypatch):
    from relax_vk.schedules import tuning
    from relax_vk.schedules.workloads import collect_convs, conv_workload
    from relax_vk.frontends import from_torch
    from relax_vk.pipeline import scope_pipeline

    model = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, 1, 1), torch.nn.ReLU(), torch.nn.Conv2d(8, 16, 3, 1, 1)).eval()
    x = torch.randn(1, 8, 10, 10)
    mod = from_torch(model, (x,))
    first, second = (conv_workload(s).key() for s in collect_convs(mod))
    records = [  # the first conv measured fastest as Winograd F(4,3), the second as direct
        {"api": "opencl", "memory": "texture", "workload": first, "config": {"winograd": 4, "oc": 1, "threads": 32}, "ms": 0.01},
        {"api": "opencl", "memory": "texture", "workload": second, "config": {"px": 2, "oc": 2, "threads": 64}, "ms": 0.01},
    ]
    database = {"format": tuning.FORMAT, "version": tuning.VERSION, "device": "test-gpu", "records": records}
    (tmp_path / "test-gpu.json").write_text(json.dumps(database))
    monkeypatch.setenv(tuning.ENV, str(tmp_path))
    tuning.clear_cache()
    try:
        target = relax_vk.target.opencl(device_name="test gpu")
        scoped = scope_pipeline(target)(mod)
        assert _winograd_calls(scoped) == 1 and _conv_ops(scoped) == 1
        (u,) = [c for c in _constants(scoped) if c.shape[2:4] == (6, 6)]  # F(4,3)'s 6x6 transformed weight
        compiled = relax_vk.build(mod, target)
        (kernel,) = _kernels(compiled, "winograd")
        assert str(kernel.attrs["relax_vk.conv2d_config"]) == "wino4_oc1_t32"
        assert str(kernel.attrs["relax_vk.conv2d_config_source"]) == "tuned"
        (direct,) = _kernels(compiled, "conv2d")
        assert str(direct.attrs["relax_vk.conv2d_config"]) == "px2_oc2_t64"
        # half texels: the record's F(4,3) runs as F(2,3)
        half = scope_pipeline(target, options=ScopeOptions(precision="fp16"))(mod)
        assert _winograd_calls(half) == 1 and not [c for c in _constants(half) if c.shape[2:4] == (6, 6)]
        assert [c for c in _constants(half) if c.shape[2:4] == (4, 4)]
    finally:
        tuning.clear_cache()


def _constants(mod):
    from tvm.ir.expr import GenericConst

    found = []
    relax.analysis.post_order_visit(mod["main"], lambda e: found.append(e.value.numpy()) if isinstance(e, GenericConst) else None)
    return found


def test_configurations():
    w = Conv2dWorkload(1, 16, 56, 56, 64, 3, 3, False)
    space = candidate_configs(w)
    assert default_config(w, 2) in space and default_config(w, 4) in space
    assert {c.m for c in space} == set(TILES)
    assert all(w.oc_chunks % c.oc == 0 for c in space)
    assert WinogradConfig(2, 1, 64, 2) in space  # two tiles per thread: 28 tiles per row
    odd = Conv2dWorkload(1, 3, 7, 7, 8, 3, 3, False)  # 3 output texels; 4 tiles of F(2,3) per row, 2 of F(4,3)
    assert all(c.oc == 1 for c in candidate_configs(odd)) and default_config(odd, 2).oc == 1
    assert {c.tiles for c in candidate_configs(odd) if c.m == 2} == {1, 2}
    assert all(c.tiles == 1 for c in candidate_configs(Conv2dWorkload(1, 4, 14, 14, 8, 3, 3, False)))  # 7 tiles per row
    for c in space:
        assert WinogradConfig.from_key(c.key()) == c
        assert parse_config(c.key()) == c.to_record()  # what the tuner's device half records
    with pytest.raises(ValueError):
        ScopeOptions(winograd="f63")


@pytest.mark.full_only("test_winograd_numbers, test_residual_add_is_fused")
def test_resnet18_end_to_end(pocl):
    """ResNet-18 (the zoo's small input) with every 3x3 stride-1 conv forced to F(2,3) in
    textures on pocl: the same answer as PyTorch within 1e-4 of the largest logit (measured:
    4e-7; F(4,3): 5e-7, within the 1e-3 whole-model bound of the module docstring)."""
    from relax_vk.frontends import from_torch
    from relax_vk.zoo import build_zoo_model

    model, x = build_zoo_model("resnet18")
    reference = model(x).detach().numpy()
    compiled = relax_vk.build(from_torch(model, (x,)), "opencl", options=ScopeOptions(winograd="f23"))
    assert len(_kernels(compiled, "winograd")) >= 10  # every 3x3 stride-1 conv but none of the others
    out = load(compiled.artifact(), device=pocl).run([x.numpy()])[0]
    assert np.max(np.abs(out - reference)) <= 1e-4 * float(np.max(np.abs(reference)))
    assert out.argmax() == reference.argmax()
