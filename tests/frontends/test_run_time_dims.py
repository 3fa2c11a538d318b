"""Run-time dims from the PyTorch front door: ``torch.export``'s ``Dim`` kept symbolic, its range
on ``main``, one artifact right at three widths on pocl, a width past the range refused."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import relax_vk  # noqa: E402
from relax_vk.core.dims import LOWER_ATTR, UPPER_ATTR  # noqa: E402
from relax_vk.core.errors import UnsupportedError  # noqa: E402
from relax_vk.frontends.torch import from_torch  # noqa: E402
from relax_vk.runtime import load  # noqa: E402


class _ConvThenLinear(torch.nn.Module):
    """A conv feature map averaged over height, read as a sequence along the width (OCR-shaped)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.linear = torch.nn.Linear(8, 5)

    def forward(self, x):
        return self.linear(torch.relu(self.conv(x)).mean(dim=2).transpose(1, 2))


def test_a_torch_export_dim_is_a_run_time_dim():
    torch.manual_seed(0)
    model = _ConvThenLinear().eval()
    width = torch.export.Dim("W", min=8, max=256)
    mod = from_torch(model, (torch.randn(1, 3, 16, 32),), dynamic_shapes={"x": {3: width}})
    (name,) = [str(k) for k in mod["main"].attrs[UPPER_ATTR]]
    assert int(mod["main"].attrs[UPPER_ATTR][name]) == 256 and int(mod["main"].attrs[LOWER_ATTR][name]) == 8
    session = load(relax_vk.build(mod, "opencl").artifact(), device="pocl")
    for w in (8, 100, 256):
        x = torch.randn(1, 3, 16, w)
        (out,) = session.run([x.numpy()])
        with torch.no_grad():
            expected = model(x).numpy()
        assert out.shape == (1, w, 5)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=rf"input x: axis 3 \({name}\) is 300, outside {name}'s declared range 8\.\.256"):
        session.run([np.zeros((1, 3, 16, 300), np.float32)])


def test_adaptive_pools_of_a_run_time_size_reduce_over_the_bounds_windows():
    """An adaptive pool of a run-time size reduces over the largest window its dims' range allows
    (one kernel, right at every size; before, the average failed deep in scheduling and the max
    pool's converter crashed reading the size as an integer); a global one is TVM's."""
    width, example = torch.export.Dim("W", min=8, max=64), torch.randn(1, 2, 10, 21)
    pools = (torch.nn.AdaptiveAvgPool2d((3, 5)), torch.nn.AdaptiveAvgPool2d(1), torch.nn.AdaptiveMaxPool2d((2, 3)), torch.nn.AdaptiveMaxPool2d((4, 7)))
    for pool in pools:
        pool = pool.eval()
        mod = from_torch(pool, (example,), dynamic_shapes={"input": {3: width}})
        session = load(relax_vk.build(mod, "opencl").artifact(), device="pocl")
        for w in (8, 21, 37, 64):
            x = torch.randn(1, 2, 10, w)
            np.testing.assert_allclose(session.run([x.numpy()])[0], pool(x).numpy(), rtol=1e-5, atol=1e-6)


class _Head(torch.nn.Module):
    """What segmentation and detection heads do over a map of run-time size: a bilinear 2x
    upsample (TVM's converter read the size as an integer), the channel-wise largest value
    (``amax``: no TVM converter), and the arg-max over channels (its value and index in registers;
    before, the value was a buffer of the run-time size, which TVM could not allocate)."""

    def __init__(self, align_corners: bool):
        super().__init__()
        self.align_corners = align_corners

    def forward(self, x):
        up = torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear", align_corners=self.align_corners)
        return up * up.amax(dim=1, keepdim=True), x.argmax(dim=1)  # (of the input: no near-ties of computed values)


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.one_api("target")
def test_upsampling_heads_at_run_time_sizes(target, device, request):
    request.getfixturevalue(device)
    torch.manual_seed(1)
    for align_corners in (False, True):
        model = _Head(align_corners).eval()
        dims = {"x": {2: torch.export.Dim("H", min=4, max=32), 3: torch.export.Dim("W", min=4, max=32)}}
        session = load(relax_vk.build(from_torch(model, (torch.randn(1, 5, 8, 6),), dynamic_shapes=dims), target).artifact(), device=device)
        for h, w in ((8, 6), (5, 17), (32, 32)):
            x = torch.randn(1, 5, h, w)
            got, index = session.run([x.numpy()])
            with torch.no_grad():
                want, want_index = model(x)
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(index, want_index.numpy())


def test_a_scale_pytorch_samples_at_but_no_size_ratio_gives_is_refused_by_name():
    """PyTorch samples a bilinear upsample by 1.5 of 7 rows at 1/1.5 and gives 10 rows; a resize to
    10 rows samples at 7/10 (wrong numbers before: 0.84 off). Refused, naming the node; the
    sizes where the two agree run (8 rows x 1.5 = 12)."""

    class Up(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.interpolate(x, scale_factor=1.5, mode="bilinear")

    with pytest.raises(UnsupportedError, match=r"upsample_bilinear2d \(node .*\): scale 1\.5 of 7 x 1\.5 = 10\.5"):
        from_torch(Up(), (torch.randn(1, 2, 7, 8),))
    x = torch.randn(1, 2, 8, 10)
    got = load(relax_vk.build(from_torch(Up(), (x,)), "opencl").artifact(), device="pocl").run([x.numpy()])[0]
    np.testing.assert_allclose(got, Up()(x).numpy(), rtol=1e-5, atol=1e-6)


def test_a_dim_of_one_value_is_a_fixed_size(lavapipe):
    """A range of one value (what ``torch.export`` derives for a ``Dim.AUTO`` batch of 2 it
    specializes, or ``--dim B=2:2``) is that size fixed, beside a run-time width: the artifact was
    refused at load ("dim s77 is no input's axis")."""
    torch.manual_seed(0)
    model = _ConvThenLinear().eval()
    auto = torch.export.Dim.AUTO
    mod = from_torch(model, (torch.randn(2, 3, 16, 32),), dynamic_shapes={"x": {0: auto(min=1, max=2), 3: auto(min=8, max=64)}})
    assert sorted(int(v) for v in mod["main"].attrs[UPPER_ATTR].values()) == [2, 64]  # (the batch's range is 2..2)
    session = load(relax_vk.build(mod, "vulkan").artifact(), device="lavapipe")
    assert list(session.dims.values()) == [(8, 64)]
    for w in (8, 37):
        x = torch.randn(2, 3, 16, w)
        with torch.no_grad():
            np.testing.assert_allclose(session.run([x.numpy()])[0], model(x).numpy(), rtol=1e-4, atol=1e-5)


class _SecondHalf(torch.nn.Module):
    """The rows from half the height on, ``x[:, :, x.shape[2] // 2:]``: a slice whose start is
    computed from a run-time size and whose end is open; and an open slice of a static axis of the
    same tensor, ``[:, 1:]`` (its end INT64_MAX clamped to the axis: taken as it was written, the
    first version of the rewrite gave it 2^63 - 2 channels)."""

    def forward(self, x):
        return x[:, 1:, x.shape[2] // 2 :] * 2


@pytest.mark.parametrize("front_door", ["torch", "onnx"])
def test_a_slice_from_a_computed_start_to_the_end_is_exact(front_door, pocl, tmp_path):
    """Its length is ``H - H // 2`` over the declared range: TVM's ONNX converter gave it ``INT64_MAX
    - H // 2`` (a build error past int64), its PyTorch converter ``min(INT64_MAX, H) - min(H // 2,
    H)``, an ``if_then_else`` no pass could type."""
    x = torch.randn(1, 4, 10, 12)
    if front_door == "torch":
        mod = from_torch(_SecondHalf(), (x,), dynamic_shapes={"x": {2: torch.export.Dim.AUTO(min=2, max=40)}})
    else:
        from relax_vk.frontends import from_onnx

        path = str(tmp_path / "half.onnx")
        torch.onnx.export(_SecondHalf(), (x,), path, input_names=["x"], dynamic_axes={"x": {2: "H"}}, dynamo=False)
        mod = from_onnx(path, {"x": (1, 4, "H", 12)}, dims={"H": (2, 40)})
    session = load(relax_vk.build(mod, "opencl").artifact(), device="pocl")
    for h in (2, 9, 40):
        x = torch.randn(1, 4, h, 12)
        (out,) = session.run([x.numpy()])
        assert out.shape == (1, 3, h - h // 2, 12)
        np.testing.assert_array_equal(out, _SecondHalf()(x).numpy())


class _PadThenTranspose(torch.nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode

    def forward(self, y):
        return torch.nn.functional.pad(y, (2, 1), mode=self.mode).transpose(1, 2)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pads_of_a_run_time_length_then_a_transpose_over_a_run_time_batch(mode, pocl, lavapipe, tmp_path):
    """A run-time batch and length, padded then transposed, from both front doors. The safe
    schedule fused the batch with the padded length, ``B * (T + 3) * 8``, which TVM's index
    analysis could not split (a build error): it now binds them apart. From PyTorch the reflect
    pad's index arithmetic took ``T`` from an axis ``T + 3`` (an unbound variable in its kernel) and
    the replicate pad's ``clamp`` to ``T - 1`` failed to import."""
    from relax_vk.frontends import from_onnx

    model = _PadThenTranspose(mode)
    dims = {"y": {0: torch.export.Dim("B", min=1, max=2), 2: torch.export.Dim("T", min=4, max=64)}}
    from_pytorch = from_torch(model, (torch.randn(2, 8, 20),), dynamic_shapes=dims)
    path = str(tmp_path / f"{mode}.onnx")
    torch.onnx.export(model, (torch.randn(2, 8, 20),), path, input_names=["y"], dynamic_axes={"y": {0: "B", 2: "T"}}, dynamo=False)
    from_file = from_onnx(path, {"y": ("B", 8, "T")}, dims={"B": (1, 2), "T": (4, 64)})
    for mod, target, device in ((from_pytorch, "opencl", "pocl"), (from_file, "vulkan", "lavapipe")):
        session = load(relax_vk.build(mod, target).artifact(), device=device)
        for b, t in ((2, 64), (1, 5), (2, 33)):
            y = torch.randn(b, 8, t)
            np.testing.assert_array_equal(session.run([y.numpy()])[0], model(y).numpy())


class _UpToTheSkip(torch.nn.Module):
    """An FPN's top-down step: a half-size map resized to its skip's run-time size and added."""

    def __init__(self, mode):
        super().__init__()
        self.mode = mode

    def forward(self, x):
        return torch.nn.functional.interpolate(torch.nn.functional.max_pool2d(x, 2), size=x.shape[2:], mode=self.mode) + x


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_a_resize_to_a_run_time_size_from_both_front_doors(mode, pocl, lavapipe, tmp_path):
    """``F.interpolate(y, size=x.shape[2:])`` over run-time H, W, odd sizes included: TVM's ONNX
    converter failed on ``sizes`` of run-time dims, relax_vk's PyTorch one read the sizes as ints.
    Nearest picks are checked at every size of the ranges against the framework's own rounding."""
    from relax_vk.frontends import from_onnx

    model = _UpToTheSkip(mode)
    auto = torch.export.Dim.AUTO
    from_pytorch = from_torch(model, (torch.randn(1, 3, 32, 40),), dynamic_shapes={"x": {2: auto(min=16, max=64), 3: auto(min=16, max=64)}})
    path = str(tmp_path / f"{mode}.onnx")
    torch.onnx.export(model, (torch.randn(1, 3, 32, 40),), path, input_names=["x"], dynamic_axes={"x": {2: "H", 3: "W"}}, dynamo=False)
    from_file = from_onnx(path, {"x": (1, 3, "H", "W")}, dims={"H": (16, 64), "W": (16, 64)})
    import onnxruntime as ort

    reference = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for mod, target, device in ((from_pytorch, "opencl", "pocl"), (from_file, "vulkan", "lavapipe")):
        session = load(relax_vk.build(mod, target).artifact(), device=device)
        for h, w in ((64, 64), (16, 17), (33, 37)):
            x = torch.randn(1, 3, h, w)
            want = model(x).numpy() if target == "opencl" else reference.run(None, {"x": x.numpy()})[0]
            np.testing.assert_allclose(session.run([x.numpy()])[0], want, rtol=1e-5, atol=1e-5)


class _DownBySeven(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.interpolate(x, size=(x.shape[2] // 7, x.shape[3] // 7), mode="nearest")


def test_a_nearest_resize_whose_picks_would_differ_is_refused_by_node(tmp_path):
    """14 rows to 2 (asymmetric, floor): TVM's float32 sampling reads row 7 where onnxruntime reads
    row 6; the import names the node, the sizes and the rows, never builds a model a pixel off."""
    from relax_vk.frontends import from_onnx

    path = str(tmp_path / "down.onnx")
    torch.onnx.export(_DownBySeven(), (torch.randn(1, 3, 21, 21),), path, input_names=["x"], dynamic_axes={"x": {2: "H", 3: "W"}}, dynamo=False)
    with pytest.raises(UnsupportedError, match=r"node /Resize: a nearest resize of axis 2 from 14 to 2 \(H=14\) reads input 7 for output 1 where onnx reads 6"):
        from_onnx(path, {"x": (1, 3, "H", "W")}, dims={"H": (14, 28), "W": (14, 28)})


class _RollAndDropFirst(torch.nn.Module):
    """``torch.roll`` along a run-time axis added to its input, and the rows after the first
    flattened: torch.onnx writes both as ``Slice`` with constant bounds over the run-time axis."""

    def forward(self, x):
        return torch.roll(x, 1, 2) + x, x[:, :, 1:].flatten(2)


def test_onnx_slices_of_a_run_time_axis_have_exact_lengths(lavapipe, tmp_path):
    """TVM's Slice converter clamps ``x[:, :, 1:]`` to ``min(2^30, H) - min(1, H)`` rows, which it
    cannot prove to be ``H - 1`` while it imports: the roll's ``Add`` lost its shape (a refusal
    suggesting a step) and the ``Flatten`` failed in TVM's converter. With the dims' ranges the
    slice is ``H - 1`` rows exactly (relax_vk.frontends.onnx_slice)."""
    import onnxruntime as ort

    from relax_vk.frontends import from_onnx

    path = str(tmp_path / "roll.onnx")
    torch.onnx.export(_RollAndDropFirst(), (torch.randn(1, 4, 12, 10),), path, input_names=["x"], dynamic_axes={"x": {2: "H", 3: "W"}}, dynamo=False)
    session = load(relax_vk.build(from_onnx(path, {"x": (1, 4, "H", "W")}, dims={"H": (2, 40), "W": (3, 48)}), "vulkan").artifact(), device="lavapipe")
    reference = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for h, w in ((40, 48), (2, 3), (17, 9)):
        x = np.random.RandomState(h).randn(1, 4, h, w).astype("float32")
        for got, want in zip(session.run([x]), reference.run(None, {"x": x})):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


class _LastBySize(torch.nn.Module):
    def forward(self, e):
        return e.select(1, e.shape[1] - 1) * 2


def test_an_index_computed_from_a_run_time_size_from_both_front_doors(pocl, lavapipe, tmp_path):
    """``e.select(1, e.shape[1] - 1)``: the index a size's expression. TVM's PyTorch converter
    wanted a constant ("value has to be scalar or Tensor") and its ONNX Gather converter a tensor;
    the index is now a 0-d tensor a kernel computes from the dims."""
    import onnxruntime as ort

    from relax_vk.frontends import from_onnx

    model = _LastBySize()
    dims = {"e": {0: torch.export.Dim("B", min=1, max=2), 1: torch.export.Dim("T", min=8, max=64)}}
    path = str(tmp_path / "last.onnx")
    torch.onnx.export(model, (torch.randn(2, 20, 16),), path, input_names=["e"], dynamic_axes={"e": {0: "B", 1: "T"}}, dynamo=False)
    reference = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    builds = ((from_torch(model, (torch.randn(2, 20, 16),), dynamic_shapes=dims), "opencl", "pocl"),
              (from_onnx(path, {"e": ("B", "T", 16)}, dims={"B": (1, 2), "T": (8, 64)}), "vulkan", "lavapipe"))  # fmt: skip
    for mod, target, device in builds:
        session = load(relax_vk.build(mod, target).artifact(), device=device)
        for b, t in ((2, 64), (1, 9)):
            e = np.random.RandomState(t).randn(b, t, 16).astype("float32")
            np.testing.assert_array_equal(session.run([e])[0], reference.run(None, {"e": e})[0])


class _ResidualGroupNorm(torch.nn.Module):
    """A stride-2 conv and a strided 1x1 projection added, then a GroupNorm: its statistics are
    staged per group in workgroup memory, a region that TVM's generic reduction rule left sized by
    the run-time dims (OpenCL's codegen stopped at "Can only handle constant size stack
    allocation"); the scheduler now rejects such a kernel before codegen and takes the next rule."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 8, 3, 2, 1)
        self.project = torch.nn.Conv2d(4, 8, 1, 2)
        self.norm = torch.nn.GroupNorm(2, 8)

    def forward(self, x):
        return self.norm(self.conv(x) + self.project(x))


def test_a_group_norm_at_run_time_sizes_stages_a_region_of_constant_size():
    torch.manual_seed(0)
    model = _ResidualGroupNorm().eval()
    dims = {2: torch.export.Dim("H", min=8, max=64), 3: torch.export.Dim("W", min=8, max=64)}
    mod = from_torch(model, (torch.randn(1, 4, 20, 24),), dynamic_shapes={"x": dims})
    session = load(relax_vk.build(mod, "opencl").artifact(), device="pocl")
    for h, w in ((20, 24), (9, 17), (64, 64)):
        x = torch.randn(1, 4, h, w)
        with torch.no_grad():
            expected = model(x).numpy()
        np.testing.assert_allclose(session.run([x.numpy()])[0], expected, rtol=1e-4, atol=1e-5)


class _Chunked(torch.nn.Module):
    """``chunk`` along a run-time dim (a gated unit over the sequence: ``a * sigmoid(b)``): the
    parts' sizes are run-time sizes, which TVM's converter added as Python numbers."""

    def forward(self, x):
        a, b, c = x.chunk(3, dim=2)
        return a * torch.sigmoid(b) + c


def test_chunks_of_a_run_time_dim():
    model = _Chunked().eval()
    length = torch.export.Dim("T", min=1, max=40)
    mod = from_torch(model, (torch.randn(2, 4, 12),), dynamic_shapes={"x": {2: 3 * length}})
    session = load(relax_vk.build(mod, "opencl").artifact(), device="pocl")
    for t in (6, 15, 120):  # (torch.export derives 6..120 for 3 * T)
        x = torch.randn(2, 4, t)
        (out,) = session.run([x.numpy()])
        assert out.shape == (2, 4, t // 3)
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-5, atol=1e-6)


def test_a_fixed_reshape_of_a_run_time_size_is_refused_by_node():
    """An export that baked its example's length into a ``Reshape`` (``[T, 2, 1, 10]`` to ``[5, 2,
    10]``) is right at one length only; built, it read or left unwritten elements at the others
    with no error (onnxruntime refuses those runs). It is refused at import, naming the node."""
    from onnx import TensorProto, helper, numpy_helper

    from relax_vk.frontends.onnx import from_onnx

    shape = numpy_helper.from_array(np.array([5, 2, 10], np.int64), "shape")
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Reshape", ["r", "shape"], ["y"], name="baked")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 2, 1, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 2, 10])], [shape])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    with pytest.raises(UnsupportedError, match=r"reshapes \[T\S*, 2, 1, 10\], whose size is a run-time size, to the fixed shape \[5, 2, 10\]"):
        from_onnx(model, {"x": ("T", 2, 1, 10)}, dims={"T": (1, 40)})
    from_onnx(model, {"x": (5, 2, 1, 10)})  # (at the one size it holds: imports)


def test_size_kernels_leave_main_to_the_model(lavapipe):
    """``roll`` over a run-time dim imports a kernel of sizes (``with_size``), which TE named
    ``main``: the CPU reference's llvm build refused "duplicate global symbol: main", so an fp16
    build (its calibration), bisect and run --check of such a model stopped."""
    from torch.export import Dim

    from relax_vk.analysis.reference import run_on_cpu
    from relax_vk.core.options import ScopeOptions

    class Rolled(torch.nn.Module):
        def forward(self, x):
            return x.roll(1, 3) * 2

    x = torch.randn(1, 3, 4, 16)
    mod = from_torch(Rolled(), (x,), dynamic_shapes={"x": {3: Dim("W", min=4, max=32)}})
    y = torch.randn(1, 3, 4, 9)
    np.testing.assert_array_equal(run_on_cpu(mod, [y.numpy()])[0], Rolled()(y).numpy())
    session = load(relax_vk.build(mod, "vulkan", options=ScopeOptions(precision="fp16")).artifact(), device="lavapipe")
    np.testing.assert_allclose(session.run([y.numpy()])[0], Rolled()(y).numpy(), rtol=1e-3, atol=1e-3)
