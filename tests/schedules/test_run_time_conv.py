"""Convs of a run-time spatial size (NCHW buffers): relax_vk's register-tiled schedule takes every
form (3x3 with padding, stride 2, depthwise, 1x1 with a residual add), right against PyTorch at the
range's ends and between on pocl and lavapipe from one artifact; static convs keep their rules."""

import re

import numpy as np
import pytest
import tvm
from tvm import relax, tirx

import relax_vk
from relax_vk.core.dims import with_dim_ranges
from relax_vk.runtime import Session
from relax_vk.schedules.analysis import _blocks, _is_reduction
from relax_vk.schedules.run_time_conv import LONG_SUM, OC_TILES, _channel_tile, schedule_run_time_conv

torch = pytest.importorskip("torch")

H, W = tirx.Var("H", "int64"), tirx.Var("W", "int64")
RNG = np.random.default_rng(0)
# (weights, bias, stride, padding, groups) of each conv in turn: 8 -> 16 (3x3), 16 -> 16 (3x3,
# stride 2), 16 depthwise (3x3), 16 -> 12 (1x1) with the depthwise output's first 12 channels added
CONVS = [
    (RNG.standard_normal((16, 8, 3, 3)).astype("float32") * 0.2, RNG.standard_normal(16).astype("float32"), 1, 1, 1),
    (RNG.standard_normal((16, 16, 3, 3)).astype("float32") * 0.1, RNG.standard_normal(16).astype("float32"), 2, 1, 1),
    (RNG.standard_normal((16, 1, 3, 3)).astype("float32") * 0.3, RNG.standard_normal(16).astype("float32"), 1, 1, 16),
    (RNG.standard_normal((12, 16, 1, 1)).astype("float32") * 0.2, RNG.standard_normal(12).astype("float32"), 1, 0, 1),
]


def _module():
    x = relax.Var("x", relax.TensorType((1, 8, H, W), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = x
            for i, (w, b, stride, pad, groups) in enumerate(CONVS):
                z = bb.emit(relax.op.nn.conv2d(y, relax.const(w), strides=stride, padding=pad, groups=groups))
                z = bb.emit(relax.op.add(z, relax.const(b.reshape(1, -1, 1, 1))))
                if i == len(CONVS) - 1:
                    z = bb.emit(relax.op.add(z, bb.emit(relax.op.strided_slice(y, axes=[1], begin=[0], end=[12]))))
                y = bb.emit(relax.op.nn.relu(z))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return with_dim_ranges(bb.get(), {"H": (4, 24), "W": (4, 70)})


def _reference(x: np.ndarray) -> np.ndarray:
    y = torch.tensor(x)
    for i, (w, b, stride, pad, groups) in enumerate(CONVS):
        z = torch.nn.functional.conv2d(y, torch.tensor(w), torch.tensor(b), stride=stride, padding=pad, groups=groups)
        y = torch.relu(z + y[:, :12] if i == len(CONVS) - 1 else z)
    return y.numpy()


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_convs_of_run_time_size_are_register_tiled_and_right_at_every_size(target, device, request):
    request.getfixturevalue(device)
    artifact = relax_vk.build(_module(), target).artifact()
    schedules = [k.get("schedule") for k in artifact.program["kernels"] if "conv2d" in k["name"]]
    assert schedules == ["run_time_conv"] * len(CONVS)
    session = Session(artifact, device=device)
    for h, w in [(4, 4), (9, 37), (24, 70), (5, 6)]:
        x = np.random.default_rng(h * w).standard_normal((1, 8, h, w)).astype("float32")
        np.testing.assert_allclose(session.run([x])[0], _reference(x), rtol=1e-4, atol=1e-4)


def _conv_kernel(shape, weight=CONVS[0][0]) -> tirx.PrimFunc:
    x = relax.Var("x", relax.TensorType(shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.nn.conv2d(x, relax.const(weight), padding=1))
        bb.emit_func_output(y)
    mod = relax.transform.LegalizeOps()(bb.get())
    return next(f for _, f in mod.functions_items() if isinstance(f, tirx.PrimFunc) and "conv" in str(f))


def test_a_conv_of_static_size_is_left_to_its_own_rules():
    assert schedule_run_time_conv(_conv_kernel((1, 8, 12, 20))) is None
    assert schedule_run_time_conv(_conv_kernel((1, 8, 12, W))) is not None


def _tile(func) -> int:
    block = next(b for b in _blocks(func) if _is_reduction(b))
    return _channel_tile(block, block.iter_vars[1].dom.extent)


def test_a_long_sum_takes_one_channel_a_thread():
    """Twice the threads, each as long a chain, where a thread's chain is long (``LONG_SUM`` terms)."""
    long_weight = np.zeros((16, -(-LONG_SUM // 9), 3, 3), "float32")
    assert _tile(_conv_kernel((1, long_weight.shape[1], 12, W), long_weight)) == 1
    assert _tile(_conv_kernel((1, 8, 12, W))) == OC_TILES[0]


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_a_long_sum_is_split_over_a_workgroups_threads_and_right(target, device, request):
    """PP-OCRv4 rec's neck: a 1x3 conv of 480 channels (1,440 terms) to 60 over a run-time width,
    SiLU after it. The sum is split over 32 partial-sum threads (``SPLIT_SUM`` terms or more): the
    workgroup has them on ``threadIdx.x`` and outputs on ``threadIdx.y``; right at widths that do not
    fill a workgroup, and at the range's ends."""
    request.getfixturevalue(device)
    from relax_vk.schedules.run_time_conv import SPLIT_LANES, SPLIT_SUM

    w = (np.random.default_rng(3).standard_normal((60, 480, 1, 3)) * 0.05).astype("float32")
    assert 480 * 3 >= SPLIT_SUM
    x = relax.Var("x", relax.TensorType((1, 480, 1, W), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, relax.const(w), padding=(0, 1)))
            y = bb.emit_output(relax.op.nn.silu(y))
        bb.emit_func_output(y)
    artifact = relax_vk.build(with_dim_ranges(bb.get(), {"W": (1, 160)}), target).artifact()
    (conv,) = [k for k in artifact.program["kernels"] if "conv2d" in k["name"]]
    assert conv["schedule"] == "run_time_conv" and conv["local"][0] == SPLIT_LANES and conv["local"][1] > 1, conv
    session = Session(artifact, device=device)
    for width in (1, 20, 37, 160):
        data = np.random.default_rng(width).standard_normal((1, 480, 1, width)).astype("float32")
        want = torch.nn.functional.silu(torch.nn.functional.conv2d(torch.tensor(data), torch.tensor(w), padding=(0, 1))).numpy()
        np.testing.assert_allclose(session.run([data])[0], want, rtol=1e-4, atol=1e-4)


def test_a_long_sum_tvm_cannot_factor_keeps_the_register_tile():
    """A dilated 3x3 conv of 128 channels (1,152 terms) over a static height: TVM refuses to factor
    its sum (rfactor), and the kernel keeps the register-tiled schedule, not the safe one."""
    weight = np.zeros((16, 128, 3, 3), "float32")
    x = relax.Var("x", relax.TensorType((1, 128, 5, W), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.nn.conv2d(x, relax.const(weight), padding=2, dilation=2))
        bb.emit_func_output(y)
    mod = relax.transform.LegalizeOps()(bb.get())
    func = next(f for _, f in mod.functions_items() if isinstance(f, tirx.PrimFunc) and "conv" in str(f))
    scheduled = schedule_run_time_conv(func)
    assert scheduled is not None and "threadIdx.y" in scheduled.script() and "shared" not in scheduled.script()


def _opencl_function(artifact, kernel: dict) -> str:
    """The OpenCL C of ``kernel``'s function in ``artifact`` (its ``entry``, else its name)."""
    return artifact.source.split(f"void {kernel.get('entry', kernel['name'])}(")[1].split("\n}\n")[0]


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_a_long_sum_over_run_time_rows_and_columns_keeps_the_register_tile_and_is_right(target, device, request):
    """A ResNet's later 3x3 convs: 128 channels (1,152 terms), padded, stride 1 and 2, over run-time
    rows and columns, a bias, a residual add and ReLU fused after the first. Such maps keep the
    register tile (``TX`` x ``TZ`` threads; splitting their sums lost at larger sizes; the
    stride-2 conv's map, at most 20 columns wide at the dims' bound, a narrow workgroup of
    ``NARROW_TILES``), and the thread's column is checked once around the sum, not at every term:
    right at the range's ends, where every row and column is a border, and between (17 columns:
    a partial second workgroup of the narrow one)."""
    request.getfixturevalue(device)
    from relax_vk.schedules.run_time_conv import NARROW_TILES, TX, TZ

    rng = np.random.default_rng(5)
    w1 = (rng.standard_normal((16, 128, 3, 3)) * 0.05).astype("float32")
    w2 = (rng.standard_normal((24, 128, 3, 3)) * 0.05).astype("float32")
    bias = rng.standard_normal((1, 16, 1, 1)).astype("float32")
    x = relax.Var("x", relax.TensorType((1, 128, H, W), "float32"))
    r = relax.Var("r", relax.TensorType((1, 16, H, W), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, r]):
        with bb.dataflow():
            a = bb.emit(relax.op.nn.conv2d(x, relax.const(w1), padding=1))
            a = bb.emit(relax.op.nn.relu(bb.emit(relax.op.add(bb.emit(relax.op.add(a, relax.const(bias))), r))))
            b = bb.emit(relax.op.nn.conv2d(x, relax.const(w2), strides=2, padding=1))
            out = bb.emit_output(relax.Tuple([a, b]))
        bb.emit_func_output(out)
    artifact = relax_vk.build(with_dim_ranges(bb.get(), {"H": (1, 20), "W": (1, 40)}), target).artifact()
    convs = [k for k in artifact.program["kernels"] if "conv2d" in k["name"]]
    narrow = [list(t[1:]) for t in NARROW_TILES if t[0] >= 20][0]
    workgroups = {"relu" in k["name"]: k["local"][:2] for k in convs if k["schedule"] == "run_time_conv"}
    assert len(convs) == 2 and workgroups == {True: [TX, TZ], False: narrow}, convs
    if target == "opencl":  # (the thread's column checked around the sum; besides, at most at the zeroing and the write-back, not a term each)
        for k in convs:
            body = _opencl_function(artifact, k)
            guard = re.search(r"\n  if \((\w+ <=? \w+)\) \{\n    for \(int rc_0", body)
            assert guard is not None and body.count(f"if ({guard.group(1)})") <= 3, body[:2000]
            # (a padded read stays behind its own guard: as a select of a clamped load, TVM's
            # simplifier dropped the clamp under the select's condition and the load read before
            # the buffer, a crash on pocl at some runs)
            assert "condval" in body, body[:2000]
    session = Session(artifact, device=device)
    for h, w in [(1, 1), (7, 33), (20, 40)]:
        data = np.random.default_rng(h * w).standard_normal((1, 128, h, w)).astype("float32")
        res = np.random.default_rng(h + w).standard_normal((1, 16, h, w)).astype("float32")
        tx = torch.tensor(data)
        want_a = torch.relu(torch.nn.functional.conv2d(tx, torch.tensor(w1), padding=1) + torch.tensor(bias) + torch.tensor(res)).numpy()
        want_b = torch.nn.functional.conv2d(tx, torch.tensor(w2), stride=2, padding=1).numpy()
        got_a, got_b = session.run([data, res])
        np.testing.assert_allclose(got_a, want_a, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got_b, want_b, rtol=1e-4, atol=1e-4)


def test_a_column_guard_inside_the_sum_stays_a_guard_a_term_and_is_right(pocl, monkeypatch):
    """Two columns a thread (``PX = 2``): the guard on a thread's columns names the tile's inner
    column loop, so it cannot wrap the sum once; the sum keeps it a term, and the numbers stay
    right at widths that end inside a tile."""
    import relax_vk.schedules.run_time_conv as rule

    monkeypatch.setattr(rule, "PX", 2)
    artifact = relax_vk.build(_module(), "opencl").artifact()
    convs = [k for k in artifact.program["kernels"] if "conv2d" in k["name"]]
    assert [k.get("schedule") for k in convs] == ["run_time_conv"] * len(CONVS)
    first = _opencl_function(artifact, convs[0])
    assert not re.search(r"\n  if \(\w+ <=? \w+\) \{\n    for \(int rc_0", first), first[:2000]  # (no guard around the sum)
    assert first.count("if (") > 2 * 9, first[:2000]  # (a guard a term)
    session = Session(artifact, device=pocl)
    for h, w in [(4, 5), (9, 37), (24, 69)]:
        x = np.random.default_rng(h + w).standard_normal((1, 8, h, w)).astype("float32")
        np.testing.assert_allclose(session.run([x])[0], _reference(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.parametrize("stride", [1, 2])
def test_a_long_sum_over_run_time_rows_and_columns_runs_in_slices_and_is_right(target, device, stride, request):
    """A 3x3 conv of 256 channels (2,304 terms) to 24 over run-time rows and columns, with a bias,
    a residual add and ReLU: its sum runs in slices of the input channels (``SLICED_SUM`` terms or
    more), two kernels, the partials in a workspace planned at the dims' bound; right at the range's
    ends, at sizes that fill no workgroup, and after a larger size (the workspace is not cleared)."""
    request.getfixturevalue(device)
    from relax_vk.schedules.run_time_conv import SLICE_TERMS, SLICED_SUM

    rng = np.random.default_rng(5)
    w = (rng.standard_normal((24, 256, 3, 3)) * 0.03).astype("float32")
    b = rng.standard_normal(24).astype("float32")
    assert 256 * 9 >= SLICED_SUM and 2304 // 4 > SLICE_TERMS >= 2304 // 8
    x = relax.Var("x", relax.TensorType((1, 256, H, W), "float32"))
    r = relax.Var("r", relax.TensorType((1, 24, (H - 1) // stride + 1, (W - 1) // stride + 1), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, r]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, relax.const(w), strides=stride, padding=1))
            y = bb.emit(relax.op.add(relax.op.add(y, relax.const(b.reshape(1, -1, 1, 1))), r))
            y = bb.emit_output(relax.op.nn.relu(y))
        bb.emit_func_output(y)
    artifact = relax_vk.build(with_dim_ranges(bb.get(), {"H": (1, 20), "W": (1, 40)}), target).artifact()
    convs = [k for k in artifact.program["kernels"] if "conv2d" in k["name"]]
    assert [k["schedule"] for k in convs] == ["run_time_conv"] * 2, convs
    slices = 8  # (2,304 terms: the fewest slices of at most SLICE_TERMS, 288 terms each)
    (workspace,) = [t for t in artifact.program["tensors"] if t.get("kind") == "workspace"]
    assert workspace["bytes"] == slices * 24 * ((20 - 1) // stride + 1) * ((40 - 1) // stride + 1) * 4, workspace
    session = Session(artifact, device=device)
    for h, wd in ((20, 40), (1, 1), (7, 13), (2, 37), (20, 40)):
        data = rng.standard_normal((1, 256, h, wd)).astype("float32")
        res = rng.standard_normal((1, 24, (h - 1) // stride + 1, (wd - 1) // stride + 1)).astype("float32")
        want = torch.relu(torch.nn.functional.conv2d(torch.tensor(data), torch.tensor(w), torch.tensor(b), stride=stride, padding=1) + torch.tensor(res)).numpy()
        np.testing.assert_allclose(session.run([data, res])[0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.one_api("target")
@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_a_pool_of_a_long_window_runs_in_slices_and_is_right(kind, target, device, request):
    """A 48x48 window (2,304 terms) over run-time rows and columns, ReLU after it: the window's rows
    are sliced like a conv's channels; the slices' maxima combine by max, the means' sums by a sum
    the epilogue divides."""
    request.getfixturevalue(device)
    x = relax.Var("x", relax.TensorType((1, 4, H, W), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            pool = relax.op.nn.max_pool2d if kind == "max" else relax.op.nn.avg_pool2d
            y = bb.emit_output(relax.op.nn.relu(pool(x, pool_size=(48, 48), strides=1)))
        bb.emit_func_output(y)
    artifact = relax_vk.build(with_dim_ranges(bb.get(), {"H": (48, 64), "W": (48, 64)}), target).artifact()
    assert [k["schedule"] for k in artifact.program["kernels"]] == ["run_time_conv"] * 2
    session = Session(artifact, device=device)
    for h, w in ((48, 48), (64, 64), (50, 61)):
        data = np.random.default_rng(h).standard_normal((1, 4, h, w)).astype("float32")
        pooled = getattr(torch.nn.functional, f"{kind}_pool2d")(torch.tensor(data), 48, 1)
        np.testing.assert_allclose(session.run([data])[0], torch.relu(pooled).numpy(), rtol=1e-5, atol=1e-6)
