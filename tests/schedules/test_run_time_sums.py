"""Dot products in kernels of run-time size that no other rule takes (a decoder's attention scores):
each output's terms split over a warp's lanes, right at every size on pocl and lavapipe; short sums,
sums down columns and static kernels are left to the other rules."""

import numpy as np
import pytest
import tvm
from tvm import relax, te, tirx

import relax_vk
from relax_vk.core.dims import with_dim_ranges
from relax_vk.runtime import Session
from relax_vk.schedules.run_time_sums import schedule_run_time_sums

T = tirx.Var("T", "int64")


def _module(rows, terms: int, which: str):
    """``scores``: ``[H, rows]``, ``where(t < 3, -1, sum_d x[min(t, rows - 1), h*terms + d] * q[h, d])``
    (a dot product per head and row, a row's terms adjacent, read through clamped indices as the
    decoder's cache reads are: not a plain reduction for TVM's rules; with an epilogue).
    ``columns``: ``[rows // 4, 64]``, ``sum_r x[min(4p + r % 4, rows - 1), c] * q[r]`` (sums down
    columns: the outputs adjacent). ``heads``: ``[rows, H*terms]``, each head's values scaled by
    ``q[h, d] / sqrt(mean of the head's squares + 1e-6)`` (a per-head RMSNorm, Qwen3's q/k norms: an
    epilogue with more outputs than the sum)."""
    heads = 4
    x = relax.Var("x", relax.TensorType((rows, heads * terms if which != "columns" else 64), "float32"))
    q = relax.Var("q", relax.TensorType((heads, terms) if which != "columns" else (terms,), "float32"))

    def compute(X, Q):
        n = X.shape[0]
        d = te.reduce_axis((tirx.const(0, "int64"), tirx.const(terms, "int64")), name="d")
        if which == "columns":
            return te.compute((n // 4, tirx.const(64, "int64")), lambda p, c: te.sum(X[tirx.min(p * 4 + d % 4, n - 1), c] * Q[d], axis=d), name="columns")
        if which == "heads":
            D = tirx.const(terms, "int64")
            sq = te.compute((n, tirx.const(heads, "int64")), lambda t, h: te.sum(X[t, h * D + d] * X[t, h * D + d], axis=d), name="squares")
            scale = lambda t, h: tirx.rsqrt(sq[t, h] / tirx.const(float(terms), "float32") + tirx.const(1e-6, "float32"))  # noqa: E731
            return te.compute(X.shape, lambda t, c: X[t, c] * scale(t, c // D) * Q[c // D, c % D], name="normed")
        s = te.compute((tirx.const(heads, "int64"), n), lambda h, t: te.sum(X[tirx.min(t, n - 1), h * terms + d] * Q[h, d], axis=d), name="scores")
        return te.compute(s.shape, lambda h, t: tirx.Select(t < 3, tirx.const(-1.0, "float32"), s[h, t]), name="masked")

    bb = relax.BlockBuilder()
    with bb.function("main", [x, q]):
        with bb.dataflow():
            out = bb.emit_output(bb.call_te(compute, x, q, primfunc_name_hint=which))
        bb.emit_func_output(out)
    mod = bb.get()
    return with_dim_ranges(mod, {"T": (1, 64)}) if not isinstance(rows, int) else mod


def _reference(which, x, q, terms):
    rows = x.shape[0]
    if which == "columns":
        index = np.minimum(np.arange(rows // 4)[:, None] * 4 + np.arange(terms)[None] % 4, rows - 1)  # [P, terms]
        return np.einsum("prc,r->pc", x[index], q)
    if which == "heads":
        h = x.reshape(rows, 4, terms)
        return (h / np.sqrt((h * h).mean(-1, keepdims=True) + 1e-6) * q[None]).reshape(rows, 4 * terms)
    scores = np.einsum("thd,hd->ht", x.reshape(rows, 4, terms), q)
    return np.where(np.arange(rows)[None] < 3, -1.0, scores)


def _kernel(mod):
    return next(f for _, f in mod.functions_items() if isinstance(f, tirx.PrimFunc))


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
@pytest.mark.parametrize("which", ["scores", "columns"])
def test_run_time_sums_are_split_over_threads_and_right_at_every_size(which, target, device, request):
    """Scores (lanes on the terms) and sums down columns (lanes on the outputs)."""
    request.getfixturevalue(device)
    artifact = relax_vk.build(_module(T, 64, which), target).artifact()
    assert [k.get("schedule") for k in artifact.program["kernels"]] == ["run_time_sums"]
    session = Session(artifact, device=device)
    rng = np.random.default_rng(0)
    q = rng.standard_normal((4, 64) if which == "scores" else 64).astype("float32")
    for rows in (4, 8, 28, 64) if which == "columns" else (1, 7, 64):
        x = rng.standard_normal((rows, 256 if which == "scores" else 64)).astype("float32")
        np.testing.assert_allclose(session.run([x, q])[0], _reference(which, x, q, 64), rtol=1e-5, atol=1e-4)


def test_short_sums_and_static_kernels_are_left_to_other_rules():
    assert schedule_run_time_sums(_kernel(_module(T, 64, "scores"))) is not None
    assert schedule_run_time_sums(_kernel(_module(T, 8, "scores"))) is None  # (8 terms: one thread's)
    assert schedule_run_time_sums(_kernel(_module(40, 64, "scores"))) is None  # (static: the other rules' and the safe schedule's)


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_an_epilogue_wider_than_the_sum_is_spread_over_the_lanes(target, device, request):
    """A per-head norm: one sum of squares per head, 64 outputs from it. The partial-sum lanes each
    hold the total and take every 16th output (no lane runs the whole head), right at every size."""
    request.getfixturevalue(device)
    scheduled = schedule_run_time_sums(_kernel(_module(T, 64, "heads")))
    sch = tvm.s_tir.Schedule(scheduled)
    bound = [sch.get(loop).thread_binding.thread_tag for loop in sch.get_loops(sch.get_sblock("normed")) if sch.get(loop).thread_binding is not None]
    assert bound == ["blockIdx.x", "threadIdx.y", "threadIdx.x"], bound
    artifact = relax_vk.build(_module(T, 64, "heads"), target).artifact()
    assert [k.get("schedule") for k in artifact.program["kernels"]] == ["run_time_sums"]
    session = Session(artifact, device=device)
    rng = np.random.default_rng(1)
    q = rng.standard_normal((4, 64)).astype("float32")
    for rows in (1, 5, 64):
        x = rng.standard_normal((rows, 256)).astype("float32")
        np.testing.assert_allclose(session.run([x, q])[0], _reference("heads", x, q, 64), rtol=1e-5, atol=1e-5)


def test_a_short_sum_at_a_run_time_size_gets_a_thread_an_output(pocl):
    """Attention scores of 3-wide heads over a run-time number of tokens, ``[1, T, 3] @ [1, 3, T]``
    (a plain reduction: TVM's generic rules would take it): a sum of 3 terms stays one thread's
    (the safe schedule), not a workgroup of mostly idle threads for each of the ``T * T`` outputs
    (29 s a run on pocl at 1,170 tokens), and is right at two sizes."""
    from relax_vk.schedules.analysis import short_run_time_sum

    q = relax.Var("q", relax.TensorType((1, T, 3), "float32"))
    k = relax.Var("k", relax.TensorType((1, 3, T), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [q, k]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.multiply(relax.op.matmul(q, k), relax.const(0.5, "float32")))
        bb.emit_func_output(out)
    mod = with_dim_ranges(bb.get(), {"T": (1, 300)})
    artifact = relax_vk.build(mod, "opencl").artifact()
    (kernel,) = artifact.program["kernels"]
    assert kernel["schedule"] == "safe", kernel["schedule"]
    assert short_run_time_sum(_kernel(_module(T, 8, "scores"))) and not short_run_time_sum(_kernel(_module(T, 64, "scores")))
    assert not short_run_time_sum(_kernel(_module(40, 8, "scores")))  # (static: the usual rules)
    session = Session(artifact, device=pocl)
    rng = np.random.default_rng(0)
    for rows in (5, 300):
        a, b = rng.standard_normal((1, rows, 3)).astype("float32"), rng.standard_normal((1, 3, rows)).astype("float32")
        np.testing.assert_allclose(session.run([a, b])[0], (a @ b) * 0.5, rtol=1e-5, atol=1e-5)
