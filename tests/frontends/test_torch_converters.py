"""relax_vk's own PyTorch converters where TVM's give wrong numbers or fail (relax_vk.frontends.torch):
each against PyTorch eager, on pocl and lavapipe."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import relax_vk  # noqa: E402
from relax_vk.core.errors import UnsupportedError  # noqa: E402
from relax_vk.frontends.torch import from_torch  # noqa: E402
from relax_vk.runtime import load  # noqa: E402

F = torch.nn.functional


class _Sampled(torch.nn.Module):
    """``grid_sample`` in two modes and paddings over one grid that reaches past the borders."""

    def forward(self, x, grid):
        return (F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False),
                F.grid_sample(x, grid, mode="nearest", padding_mode="reflection", align_corners=True))  # fmt: skip


@pytest.mark.one_api("target")
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_grid_sample_reads_pytorchs_grid_layout(target, device, request):
    """PyTorch's grid is ``[N, H, W, 2]``, TVM's ``[N, 2, H, W]``: passed as it was, the output had
    the wrong shape ``[1, 3, 7, 2]`` for ``[1, 3, 5, 7]``."""
    request.getfixturevalue(device)
    torch.manual_seed(0)
    x, grid = torch.randn(1, 3, 8, 10), torch.rand(1, 5, 7, 2) * 2.4 - 1.2
    got = load(relax_vk.build(from_torch(_Sampled(), (x, grid)), target).artifact(), device=device).run([x.numpy(), grid.numpy()])
    for g, want in zip(got, _Sampled()(x, grid)):
        assert g.shape == tuple(want.shape)
        np.testing.assert_allclose(g, want.numpy(), rtol=1e-5, atol=1e-5)


class _Antialiased(torch.nn.Module):
    """``antialias=True`` resizes: bicubic down to a size and up, bilinear down by a factor and up."""

    def forward(self, x):
        return (F.interpolate(x, size=(7, 9), mode="bicubic", antialias=True), F.interpolate(x, scale_factor=0.5, mode="bilinear", antialias=True),
                F.interpolate(x, size=(30, 13), mode="bicubic", antialias=True), F.interpolate(x, size=(20, 40), mode="bilinear", antialias=True))  # fmt: skip


@pytest.mark.one_api("target")
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_antialiased_resizes_are_pytorchs(target, device, request):
    """TVM's converter ran a bilinear downsample without the filter (0.71 off) and had none for
    bicubic; PyTorch's own weights, as two constant matrices, match it down and up."""
    request.getfixturevalue(device)
    x = torch.randn(1, 3, 16, 22)
    got = load(relax_vk.build(from_torch(_Antialiased(), (x,)), target).artifact(), device=device).run([x.numpy()])
    for g, want in zip(got, _Antialiased()(x)):
        assert g.shape == tuple(want.shape)
        np.testing.assert_allclose(g, want.numpy(), rtol=1e-5, atol=1e-5)


def test_an_antialiased_resize_with_align_corners_is_refused_by_name():
    class Resize(torch.nn.Module):
        def forward(self, x):
            return F.interpolate(x, size=(4, 5), mode="bilinear", antialias=True, align_corners=True)

    with pytest.raises(UnsupportedError, match=r"_upsample_bilinear2d_aa \(node .*\): antialiased resize of \[8, 10\] with align_corners"):
        from_torch(Resize(), (torch.randn(1, 3, 8, 10),))


def test_amax_and_amin_reduce():
    class Extremes(torch.nn.Module):
        def forward(self, x):
            return x.amax(dim=1, keepdim=True) - x.amin(dim=(2, 3)).unsqueeze(-1).unsqueeze(-1), x.amax()

    x = torch.randn(1, 4, 6, 5)
    got = load(relax_vk.build(from_torch(Extremes(), (x,)), "opencl").artifact(), device="pocl").run([x.numpy()])
    for g, want in zip(got, Extremes()(x)):
        np.testing.assert_allclose(g, want.numpy(), rtol=1e-6, atol=1e-6)


def test_nearest_by_a_scale_runs_where_its_rows_agree_and_is_refused_where_they_do_not():
    """PyTorch's nearest by a scale picks ``floor(dst / scale)``, the resize ``floor(dst * in / out)``:
    for 11 columns x 1.3 (14) one column came out picked one off (wrong numbers, no error); it is
    refused by name. 7 x 9 by 1.5, where every pick agrees, runs right."""

    class Nearest(torch.nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale

        def forward(self, x):
            return F.interpolate(x, scale_factor=self.scale, mode="nearest")

    with pytest.raises(UnsupportedError, match=r"upsample_nearest2d \(node .*\): scale 1\.3 of 11 x 1\.3 = 14\.3"):
        from_torch(Nearest(1.3), (torch.randn(1, 2, 7, 11),))
    x = torch.randn(1, 2, 7, 9)
    got = load(relax_vk.build(from_torch(Nearest(1.5), (x,)), "opencl").artifact(), device="pocl").run([x.numpy()])[0]
    np.testing.assert_array_equal(got, Nearest(1.5)(x).numpy())


class _Statistics(torch.nn.Module):
    """``var_mean`` over the map (TVM had no converter), ``std`` with Bessel's correction and
    ``var`` with and without, each reducing sizes that are run-time dims."""

    def forward(self, x):
        var, mean = torch.var_mean(x, dim=(2, 3), keepdim=True)
        rows = x.var(dim=-2, keepdim=True, correction=0) + x.var(dim=-2, keepdim=True)  # (one row: NaN, as PyTorch)
        return (x - mean) / torch.sqrt(var + 1e-5) + torch.std(x, dim=-1, keepdim=True) + rows


@pytest.mark.one_api("target")
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_variances_with_a_correction_reduce_run_time_sizes(target, device, request):
    """The correction's ``n / (n - correction)`` computed from the run's sizes, in a kernel; one
    row (``n == correction``) gives NaN, as PyTorch does."""
    request.getfixturevalue(device)
    torch.manual_seed(0)
    h, w = torch.export.Dim("h", min=1, max=24), torch.export.Dim("w", min=2, max=24)
    mod = from_torch(_Statistics(), (torch.randn(1, 3, 6, 5),), dynamic_shapes={"x": {2: h, 3: w}})
    session = load(relax_vk.build(mod, target).artifact(), device=device)
    for size in ((6, 5), (17, 9), (1, 4)):
        x = torch.randn(1, 3, *size)
        (got,) = session.run([x.numpy()])
        want = _Statistics()(x).numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(np.nan_to_num(got), np.nan_to_num(want), rtol=1e-4, atol=1e-5)


class _Folds(torch.nn.Module):
    """``F.unfold`` with a rectangular, dilated, padded and strided window, and ``F.fold`` of
    strided and of overlapping windows (overlaps add up)."""

    def forward(self, x):
        a = F.unfold(x, kernel_size=(3, 2), dilation=(1, 2), padding=(1, 0), stride=(2, 1))
        b = F.fold(F.unfold(x, kernel_size=3, padding=1, stride=2) * 1.5, output_size=(9, 8), kernel_size=3, padding=1, stride=2)
        c = F.fold(F.unfold(x, kernel_size=2), output_size=(9, 8), kernel_size=2)
        return a, b, c


@pytest.mark.one_api("target")
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_unfold_and_fold_are_one_kernel_each(target, device, request):
    """PyTorch decomposes them into ``arange`` index gathers TVM's ``index_tensor`` could not
    broadcast (an import error); here each is one gather (unfold) or windowed sum (fold) kernel."""
    request.getfixturevalue(device)
    torch.manual_seed(0)
    x = torch.randn(1, 4, 9, 8)
    got = load(relax_vk.build(from_torch(_Folds(), (x,)), target).artifact(), device=device).run([x.numpy()])
    for g, want in zip(got, _Folds()(x)):
        assert g.shape == tuple(want.shape)
        np.testing.assert_allclose(g, want.numpy(), rtol=1e-6, atol=1e-6)


class _Unfolded(torch.nn.Module):
    def forward(self, x):
        return F.unfold(x, kernel_size=3, padding=1).transpose(1, 2) * 2


def test_unfold_takes_run_time_sizes_and_refuses_multiples_of_a_dim(pocl):
    h, w = torch.export.Dim("h", min=4, max=40), torch.export.Dim("w", min=4, max=40)
    mod = from_torch(_Unfolded(), (torch.randn(1, 2, 8, 6),), dynamic_shapes={"x": {2: h, 3: w}})
    session = load(relax_vk.build(mod, "opencl").artifact(), device=pocl)
    for size in ((8, 6), (5, 33)):
        x = torch.randn(1, 2, *size)
        np.testing.assert_allclose(session.run([x.numpy()])[0], _Unfolded()(x).numpy(), rtol=1e-6, atol=1e-6)
    h = torch.export.Dim("h", min=1, max=10)
    with pytest.raises(UnsupportedError, match=r"im2col .*not multiples of one"):
        from_torch(_Unfolded(), (torch.randn(1, 2, 8, 6),), dynamic_shapes={"x": {2: 4 * h}})


class _Sized(torch.nn.Module):
    """Arithmetic between tensors and the run-time size ``T`` (a mean written out by hand)."""

    def forward(self, x):
        return x.sum(1) / x.shape[1] + x.shape[1] * x.mean(1) - (x.shape[1] - x.amax(1)) + (x.shape[1] + 1) / (x.amin(1).abs() + 1)


@pytest.mark.one_api("target")
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_tensors_combine_with_run_time_sizes(target, device, request):
    """TVM's binary ops refused the int64 size against a float32 tensor (an import error)."""
    request.getfixturevalue(device)
    mod = from_torch(_Sized(), (torch.randn(2, 7, 4),), dynamic_shapes={"x": {1: torch.export.Dim("T", min=2, max=40)}})
    session = load(relax_vk.build(mod, target).artifact(), device=device)
    for t in (2, 31):
        x = torch.randn(2, t, 4)
        np.testing.assert_allclose(session.run([x.numpy()])[0], _Sized()(x).numpy(), rtol=1e-5, atol=1e-5)


class _FirstRow(torch.nn.Module):
    """Each row's cosine similarity to the first (``x[:, :1]`` against ``x``)."""

    def forward(self, x):
        return F.cosine_similarity(x[:, :1], x, dim=-1)


@pytest.mark.one_api("target")
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_slices_within_the_smallest_run_time_size_keep_exact_lengths(target, device, request):
    """TVM's converter gave ``x[:, :1]`` the length ``min(1, T)``, which its multiply could not
    broadcast against ``T``: the product lost its shape and the model ran wrong (1.4 off)."""
    request.getfixturevalue(device)
    mod = from_torch(_FirstRow(), (torch.randn(2, 6, 8),), dynamic_shapes={"x": {1: torch.export.Dim("T", min=2, max=32)}})
    session = load(relax_vk.build(mod, target).artifact(), device=device)
    for t in (2, 6, 29):
        x = torch.randn(2, t, 8)
        np.testing.assert_allclose(session.run([x.numpy()])[0], _FirstRow()(x).numpy(), rtol=1e-5, atol=1e-6)


class _FromTheEnd(torch.nn.Module):
    """Entries counted from the end: ``x[:, -1]`` and ``x[:, -2]`` (``aten.select``), a constant
    index list with negative entries (``aten.index``), and a linear layer over the last step."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x[:, -1]), x[:, -2] * 2, x[:, [-1, 0, -2]]


@pytest.mark.one_api("target")
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.parametrize("dims", [False, True], ids=["static", "run-time"])
def test_indices_from_the_end_read_what_pytorch_reads(dims, target, device, request):
    """TVM's importer writes ``x[:, -1]`` as a ``take`` of index -1 in its "fast" mode, which reads
    before the tensor: 7.8e34 off on pocl, 0.8 on lavapipe, static or not. Over a static axis the
    index is wrapped at import, over a run-time one the ``take`` wraps it."""
    request.getfixturevalue(device)
    dynamic = {"x": {1: torch.export.Dim("T", min=3, max=40)}} if dims else None
    torch.manual_seed(0)
    model = _FromTheEnd()
    mod = from_torch(model, (torch.randn(2, 9, 4),), dynamic_shapes=dynamic)
    session = load(relax_vk.build(mod, target).artifact(), device=device)
    for t in (3, 9, 40) if dims else (9,):
        x = torch.randn(2, t, 4)
        for got, want in zip(session.run([x.numpy()]), model(x)):
            np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-5, atol=1e-6)


class _RunTimeIndices(torch.nn.Module):
    """Indices the model computes or takes as an input, negative ones included, into an
    activation; and an embedding table read at input ids."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(6, 4)

    def forward(self, x, i, ids):
        return x[:, i - 1], x[:, i], self.embed(ids)


@pytest.mark.one_api("target")
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_run_time_indices_counted_from_the_end_read_what_pytorch_reads(target, device, request):
    """``x[:, i - 1]`` at ``i = 0`` read column -1 of a "fast" take: 2.15 off, elsewhere memory
    before ``x`` (1.7e30). A take at run-time indices into an activation now wraps a negative
    index, and an input index takes -n .. n - 1 there; an embedding's ids stay 0 .. rows - 1,
    refused past them as PyTorch refuses them."""
    request.getfixturevalue(device)
    torch.manual_seed(0)
    model = _RunTimeIndices().eval()
    x, i, ids = torch.randn(2, 5, 4), torch.tensor([0, 3]), torch.tensor([[1, 5]])
    session = load(relax_vk.build(from_torch(model, (x, i, ids)), target).artifact(), device=device)
    for index in (torch.tensor([0, 3]), torch.tensor([-4, 5])):
        direct = torch.clamp(index, max=4)  # (x[:, i] itself: 5 is past the axis)
        got = session.run([x.numpy(), index.numpy() if index.max() < 5 else direct.numpy(), ids.numpy()])
        with torch.no_grad():
            want = model(x, index if index.max() < 5 else direct, ids)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="input ids: value -1 at"):
        session.run([x.numpy(), i.numpy(), np.array([[1, -1]])])


def test_the_callers_module_is_left_as_it_is_and_a_later_change_does_not_reach_the_import(pocl):
    """from_torch's constants were the module's own tensors: a load_state_dict after the import
    changed what a later build compiled (1.11 off), and the module was left in eval mode."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)).train()
    x = torch.randn(2, 4)
    with torch.no_grad():
        want = model.eval()(x).numpy()
    model.train()
    mod = from_torch(model, (x,))
    assert model.training
    with torch.no_grad():
        model[0].weight.add_(1.0)
    got = load(relax_vk.build(mod, "opencl").artifact(), device="pocl").run([x.numpy()])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class _TimesFirst(torch.nn.Module):
    def forward(self, x):
        return (x[:, :1] * x).sum(-1)


def test_without_the_exact_slice_the_slices_are_made_exact_after_import(monkeypatch, pocl):
    """TVM's own slice gives ``x[:, :1]`` the length ``min(1, T)``; multiplied with ``x``, the
    product's shape was lost (an import refused by name). The slice is now made exact after import
    (``relax_vk.frontends.open_slices``: ``1 <= T`` over the declared range), so the product has
    its shape. Broadcast explicitly (cosine similarity's ``expand``) it runs right as well, where
    TOPI's broadcast of ``min(1, T)`` rows read past the one row (1.4 off)."""
    import relax_vk.frontends.torch as front

    monkeypatch.setattr(front, "CONVERTERS", {k: v for k, v in front.CONVERTERS.items() if k != "slice.Tensor"})
    T = torch.export.Dim("T", min=2, max=32)
    for model in (_TimesFirst(), _FirstRow()):
        mod = from_torch(model, (torch.randn(2, 6, 8),), dynamic_shapes={"x": {1: T}})
        session = load(relax_vk.build(mod, "opencl").artifact(), device=pocl)
        for t in (2, 17):
            x = torch.randn(2, t, 8)
            np.testing.assert_allclose(session.run([x.numpy()])[0], model(x).numpy(), rtol=1e-5, atol=1e-5)


class _OneHot(torch.nn.Module):
    """Classes from values, clamped from above only (an integer clip with an open bound), one-hot."""

    def forward(self, x):
        return F.one_hot((x.abs() * 3).long().clamp(max=4), 5).float()


def test_one_hot_of_clamped_classes_runs_its_assertions_named(pocl):
    """TVM's integer clip cast the open bound's infinity (a crash at build); ``torch.export``'s
    run-time assertions on values (``one_hot``'s) had no runtime step. The clip clamps to the
    dtype's limit, and the assertions are dropped with a warning naming them."""
    with pytest.warns(UserWarning, match=r"run-time assertions on values are not checked on the device: one_hot: Class values must be non-negative"):
        mod = from_torch(_OneHot(), (torch.randn(2, 6),))
    session = load(relax_vk.build(mod, "opencl").artifact(), device=pocl)
    x = torch.randn(2, 6)
    np.testing.assert_array_equal(session.run([x.numpy()])[0], _OneHot()(x).numpy())


class _AsPyTorchComputes(torch.nn.Module):
    """Ops TVM's importer converted to other numbers: SELU's scale, an integer tensor promoted to
    float by a float scalar or a true division, a pool's divisor override, and ``x[i, j]`` with an
    index counted from the end."""

    def __init__(self):
        super().__init__()
        self.selu, self.pool = torch.nn.SELU(), torch.nn.AvgPool2d(2, divisor_override=3)
        self.norm = torch.nn.GroupNorm(2, 4, affine=False)  # (no weight: TVM's converter failed inside TVM)

    def forward(self, x, i, j):
        return (self.selu(x), i * 0.5, i + 0.25, i / 3, i / (j.abs() + 1), self.pool(x), x[0][i.abs() % 2, j], self.norm(x),
                (j - 2) // 3, torch.div(j - 2, 3, rounding_mode="trunc"), x // 0.7)  # fmt: skip


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.one_api("target")
def test_ops_tvms_importer_converted_to_other_numbers(target, device, request):
    """Each was off with no error: SELU 0.95 of PyTorch's (``elu``'s scale dropped), ``i * 0.5``
    computed as ``i * 0`` in int64 and ``i / 3`` truncated, the pool divided by 4, ``x[i, j]`` with
    j = -2 read past the axis; a max pool's indices, given as zeros, are refused by node."""
    request.getfixturevalue(device)
    model = _AsPyTorchComputes().eval()
    x = torch.randn(2, 4, 4, 4)
    i, j = torch.tensor([0, -1, 1, 1]), torch.tensor([3, -2, 0, -1])
    session = load(relax_vk.build(from_torch(model, (x, i, j)), target).artifact(), device=device)
    for got, want in zip(session.run([x.numpy(), i.numpy(), j.numpy()]), model(x, i, j)):
        assert got.dtype == want.numpy().dtype
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)

    class Indices(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.max_pool2d(x, 2, return_indices=True)

    with pytest.raises(UnsupportedError, match="its indices output \\(return_indices=True\\) is not supported"):
        from_torch(Indices(), (x,))


class _NormOverSizes(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.plain = torch.nn.LayerNorm(8, elementwise_affine=False)

    def forward(self, x):
        return torch.nn.functional.layer_norm(x, x.shape[1:]), self.plain(x)


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.one_api("target")
def test_layer_norm_over_run_time_sizes(target, device, request):
    """``F.layer_norm(x, x.shape[1:])`` over a run-time length (TVM's converter took int() of the
    size: a TypeError) and a LayerNorm without weight, right at three lengths from one artifact."""
    request.getfixturevalue(device)
    model = _NormOverSizes()
    mod = from_torch(model, (torch.randn(2, 6, 8),), dynamic_shapes={"x": {1: torch.export.Dim("T", min=2, max=20)}})
    session = load(relax_vk.build(mod, target).artifact(), device=device)
    for t in (2, 7, 20):
        x = torch.randn(2, t, 8)
        for got, want in zip(session.run([x.numpy()]), model(x)):
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


class _Pads(torch.nn.Module):
    """``F.pad`` in the modes PyTorch decomposes into slices at offsets computed from the size
    (circular: TVM's converter failed on them at run-time sizes), of ranks 3 and 4, with a
    negative constant pad (a crop)."""

    def forward(self, x):
        circular = F.pad(x, (1, 2, 2, 1), mode="circular")
        rows = F.pad(x.flatten(1, 2), (2, 1), mode="reflect")
        cropped = F.pad(x, (-1, 2, 0, -2), value=0.5)
        return circular.sum(dim=(1, 2)), rows.mean(dim=1), cropped.amax(dim=1)


@pytest.mark.one_api("target")
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_pads_of_every_mode_at_run_time_sizes(target, device, request):
    request.getfixturevalue(device)
    model = _Pads().eval()
    mod = from_torch(model, (torch.randn(1, 2, 6, 7),), dynamic_shapes={"x": {3: torch.export.Dim("W", min=4, max=32)}})
    session = load(relax_vk.build(mod, target).artifact(), device=device)
    for w in (4, 7, 30):
        x = torch.randn(1, 2, 6, w)
        for out, expected in zip(session.run([x.numpy()]), model(x)):
            np.testing.assert_allclose(out, expected.numpy(), rtol=1e-5, atol=1e-5)


class _LearnedPositions(torch.nn.Module):
    """A learned position table sliced to the run-time length (``pos[:, :T]``): TVM's converter
    clamped the length to ``min(T, 128)``, a conditional size the build crashed on
    ("Cannot find the FInferType attribute registered to op: prim.if_then_else")."""

    def __init__(self):
        super().__init__()
        self.pos = torch.nn.Parameter(torch.randn(1, 128, 8))

    def forward(self, x):
        return x + self.pos[:, : x.shape[1]]


def test_a_fixed_table_sliced_to_a_run_time_length(pocl):
    model = _LearnedPositions().eval()
    mod = from_torch(model, (torch.randn(2, 10, 8),), dynamic_shapes={"x": {1: torch.export.Dim("T", min=1, max=128)}})
    session = load(relax_vk.build(mod, "opencl").artifact(), device="pocl")
    for t in (1, 17, 128):
        x = torch.randn(2, t, 8)
        with torch.no_grad():
            np.testing.assert_allclose(session.run([x.numpy()])[0], model(x).numpy(), rtol=1e-6, atol=1e-6)


class _HalfPool(torch.nn.Module):
    def __init__(self, pool):
        super().__init__()
        self.pool = pool

    def forward(self, x):
        return self.pool(x, (x.shape[2] // 2, x.shape[3] // 2))


def test_an_adaptive_pool_to_a_run_time_output_size_is_refused_by_op():
    """TVM's converter failed with an FFI type error naming nothing (torch.export itself refuses
    the max pool's)."""
    dims = {2: torch.export.Dim("H", min=8, max=96), 3: torch.export.Dim("W", min=8, max=96)}
    with pytest.raises(UnsupportedError, match=r"adaptive_avg_pool2d \(node \w+\): an output size computed from run-time sizes is not supported"):
        from_torch(_HalfPool(F.adaptive_avg_pool2d).eval(), (torch.randn(1, 3, 32, 32),), dynamic_shapes={"x": dims})


class _Accumulated(torch.nn.Module):
    def __init__(self, past_int32: bool):
        super().__init__()
        self.past_int32 = past_int32

    def forward(self, x):
        i = (x * 10).int()
        sums = (i.cumsum(1), i.prod(1), (x > 0).cumsum(-1), x.cumprod(2), (i[:, :3] % 3).prod(dim=2, keepdim=True))
        return (*sums, (x.abs() * 2**30).int().cumsum(1)) if self.past_int32 else sums


@pytest.mark.one_api("target")
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_integer_accumulations_are_int64_as_pytorchs(target, device, request):
    """An int32 or bool ``cumsum`` / ``cumprod`` / ``prod`` is int64 in PyTorch: TVM's converter
    kept int32 (a cumsum past 2**31 wrapped) and had no ``prod.dim_int``. On OpenCL a sum past int32
    is exact; a Vulkan kernel computes int64 values in 32 bits (README), so there they stay within
    int32."""
    request.getfixturevalue(device)
    x = torch.randn(1, 5, 4, 4, generator=torch.Generator().manual_seed(0))
    model = _Accumulated(past_int32=target == "opencl")
    got = load(relax_vk.build(from_torch(model, (x,)), target).artifact(), device=device).run([x.numpy()])
    for g, want in zip(got, model(x)):
        want = want.numpy()
        assert g.dtype == want.dtype and g.shape == want.shape
        np.testing.assert_allclose(g, want, rtol=1e-5)


class _MaskedWrites(torch.nn.Module):
    def forward(self, x):
        y = x.clone()
        y[x > 0.5] = 1.0
        z = x.clone()
        z[x[:, 0] > 0] = -3.0  # a mask over the leading axes: whole rows
        return y, z * 2, torch.zeros_like(x).index_put_((x > 1,), torch.tensor(2.0), accumulate=True)


@pytest.mark.one_api("target")
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_masked_writes_are_wheres(target, device, request):
    """``y[mask] = v`` is ``index_put`` with a bool index, which TVM's converter refused ("IndexPut
    requires each index tensor to have integer dtype")."""
    request.getfixturevalue(device)
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    got = load(relax_vk.build(from_torch(_MaskedWrites(), (x,)), target).artifact(), device=device).run([x.numpy()])
    for g, want in zip(got, _MaskedWrites()(x)):
        np.testing.assert_array_equal(g, want.numpy())


def test_an_import_failure_names_the_node_it_stopped_at():
    class IndexAdd(torch.nn.Module):
        def forward(self, x):
            return torch.zeros(4, 3).index_add(0, torch.tensor([0, 2, 2]), x)

    with pytest.raises(UnsupportedError, match=r"failed at index_put\.default \(node index_put\)"):
        from_torch(IndexAdd(), (torch.randn(3, 3),))
