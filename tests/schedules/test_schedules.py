"""The scheduling driver: verification of every rule's result, the safe fallback, the structural
guards against upstream rules that compute wrong numbers, and clear errors."""

import numpy as np
import pytest
from tvm import tirx
from tvm.script import tirx as T

import relax_vk
from relax_vk.schedules import RULES, KernelScheduleError, schedule_kernel
from relax_vk.schedules.analysis import has_trivial_reduction, reductions_are_plain
from relax_vk.schedules.apply import NOTE_ATTR, SCHEDULE_ATTR
from relax_vk.schedules.fallback import schedule_safe
from relax_vk.schedules.verify import kernel_problems

TARGET = relax_vk.target.opencl()


@T.prim_func(s_tir=True)
def add_one(a: T.Buffer((4, 8), "float32"), b: T.Buffer((4, 8), "float32")):
    for i, j in T.grid(4, 8):
        with T.sblock("add"):
            vi, vj = T.axis.remap("SS", [i, j])
            b[vi, vj] = a[vi, vj] + T.float32(1)


@T.prim_func(s_tir=True)
def texture_scale(a: T.Buffer((1, 2, 3, 5, 4), "float32", scope="global.texture"), b: T.Buffer((1, 2, 3, 5, 4), "float32", scope="global.texture")):
    for n, c, h, w, l in T.grid(1, 2, 3, 5, 4):
        with T.sblock("scale"):
            vn, vc, vh, vw, vl = T.axis.remap("SSSSS", [n, c, h, w, l])
            b[vn, vc, vh, vw, vl] = a[vn, vc, vh, vw, vl] * T.float32(2)


@T.prim_func(s_tir=True)
def unit_reduction_then_bias(a: T.Buffer((6, 5), "float32"), w: T.Buffer((6, 1), "float32"), bias: T.Buffer((6,), "float32"), out: T.Buffer((6, 5), "float32")):
    acc = T.sblock_alloc_buffer((6, 5))
    for i, j, k in T.grid(6, 5, 1):
        with T.sblock("acc"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                acc[vi, vj] = T.float32(0)
            acc[vi, vj] = acc[vi, vj] + a[vi, vj + vk] * w[vi, vk]
    for i, j in T.grid(6, 5):
        with T.sblock("bias"):
            vi, vj = T.axis.remap("SS", [i, j])
            out[vi, vj] = acc[vi, vj] + bias[vi]


@T.prim_func(s_tir=True)
def windowed_sum(a: T.Buffer((10,), "float32"), out: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 3):
        with T.sblock("win"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                out[vi] = T.float32(0)
            out[vi] = out[vi] + a[vi + vk]


@T.prim_func(s_tir=True)
def row_sum(a: T.Buffer((8, 16), "float32"), out: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 16):
        with T.sblock("rows"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                out[vi] = T.float32(0)
            out[vi] = out[vi] + a[vi, vk]


@T.prim_func(s_tir=True)
def unroll_by_thread(a: T.Buffer((8, 8), "float32"), b: T.Buffer((8,), "float32")):
    for tx in T.thread_binding(8, thread="threadIdx.x"):
        with T.sblock("prefix"):
            vx = T.axis.spatial(8, tx)
            T.reads(a[vx, 0:8])
            T.writes(b[vx])
            b[vx] = T.float32(0)
            for k in T.unroll(vx + 1):
                b[vx] = b[vx] + a[vx, k]


@T.prim_func(s_tir=True)
def loop_around_threads(a: T.Buffer((4, 8), "float32"), b: T.Buffer((4, 8), "float32")):
    for i in range(4):
        for tx in T.thread_binding(8, thread="threadIdx.x"):
            with T.sblock("copy"):
                vi, vj = T.axis.remap("SS", [i, tx])
                b[vi, vj] = a[vi, vj]


def test_verify_names_unrolled_loops_of_varying_extent_and_host_loops():
    """A loop marked for unrolling whose extent depends on the thread (TVM's UnrollLoop fails:
    "Cannot unroll non-constant loop"), and a loop around the thread bindings (host control flow
    the exported program cannot hold)."""
    assert kernel_problems(unroll_by_thread) == ["loop k is marked for unrolling but its extent vx + 1 is not a constant"]
    assert kernel_problems(loop_around_threads) == [
        "loop i encloses the thread bindings (it would run on the host, launching the kernel per iteration)"
    ]


def test_verify_names_unbound_blocks_and_partial_texel_stores():
    assert kernel_problems(add_one) == ["block add is not bound to GPU threads"]
    problems = kernel_problems(texture_scale)
    assert "block scale is not bound to GPU threads" in problems
    assert any("store to texture b does not write whole texels" in p for p in problems)


def test_safe_schedule_binds_everything_and_writes_whole_texels():
    for func in (add_one, texture_scale, unit_reduction_then_bias, windowed_sum):
        scheduled = schedule_safe(func)
        assert kernel_problems(scheduled) == [], func
    text = schedule_safe(texture_scale).script()
    assert "T.vectorized(4)" in text and 'thread="threadIdx.x"' in text


def test_structural_guards():
    assert has_trivial_reduction(unit_reduction_then_bias) and not has_trivial_reduction(row_sum)
    assert reductions_are_plain(row_sum) and not reductions_are_plain(windowed_sum)


def test_driver_skips_rejected_rules_and_records_why():
    def unbound(func, _target):  # a rule whose result verification must reject
        return func

    def broken(func, _target):
        raise RuntimeError("cannot schedule this")

    with TARGET:
        out = schedule_kernel(texture_scale, TARGET, [("broken", broken), ("unbound", unbound)], "k")
    assert out.attrs[SCHEDULE_ATTR] == "safe"
    note = str(out.attrs[NOTE_ATTR])
    assert "broken: RuntimeError: cannot schedule this" in note and "unbound: block scale is not bound" in note
    assert kernel_problems(out) == []


def test_trivial_reductions_never_reach_the_upstream_rules():
    with TARGET:
        out = schedule_kernel(unit_reduction_then_bias, TARGET, RULES, "k")
    assert out.attrs[SCHEDULE_ATTR] == "safe"


def test_a_kernel_nothing_can_schedule_is_a_clear_error(monkeypatch):
    import relax_vk.schedules as schedules
    from relax_vk.schedules import apply

    monkeypatch.setattr(schedules, "RULES", [("unbound", lambda func, _target: func)])
    monkeypatch.setattr(apply, "schedule_safe", lambda func, threads: func)  # a "safe" schedule that binds nothing
    mod = relax_vk.models.build_example("conv-relu-pool")
    with pytest.raises(KernelScheduleError, match=r"kernel \S+: no schedule fits it .*\[computes lv"):
        relax_vk.build(mod)


def test_conv_with_hardswish_epilogue_builds_and_runs():
    """The crash class the issue names: a conv whose fused epilogue the adreno rule leaves unbound
    (hard-swish through ONNX's Clip) gets a verified schedule and the right numbers."""
    torch = pytest.importorskip("torch")
    from relax_vk.frontends import from_torch
    from relax_vk.runtime import load

    model = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.Hardswish(), torch.nn.Conv2d(8, 4, 1), torch.nn.SiLU()).eval()
    x = torch.randn(1, 8, 10, 10)
    compiled = relax_vk.build(from_torch(model, (x,)))
    schedules = {str(f.attrs[SCHEDULE_ATTR]) for _, f in compiled.lowered.functions_items() if isinstance(f, tirx.PrimFunc)}
    assert schedules  # every kernel records the rule that scheduled it
    out = load(compiled.artifact(), device="pocl").run([x.numpy()])[0]
    with torch.no_grad():
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-4, atol=1e-5)


def test_verify_names_staged_buffers_of_run_time_size():
    """A kernel of run-time size whose staged buffer is sized by the dims once compacted: OpenCL's
    codegen cannot allocate it, so the verifier names it (a staged buffer the compaction sizes to a
    constant passes, as does a kernel of static shape, which is not lowered)."""

    @T.prim_func(s_tir=True)
    def staged_row(a: T.handle, b: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (4, n), "float32")
        B = T.match_buffer(b, (4, n), "float32")
        S = T.sblock_alloc_buffer((4, n), "float32", scope="shared")
        for i in T.thread_binding(4, thread="blockIdx.x"):
            for j in range(n):
                with T.sblock("stage"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    S[vi, vj] = A[vi, vj]
            for j in range(n):
                with T.sblock("out"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = S[vi, vj] * T.float32(2)

    @T.prim_func(s_tir=True)
    def staged_texel(a: T.handle, b: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n, 4), "float32")
        B = T.match_buffer(b, (n, 4), "float32")
        S = T.sblock_alloc_buffer((n, 4), "float32", scope="shared")
        for i in T.thread_binding(n, thread="blockIdx.x"):
            for j in range(4):
                with T.sblock("stage"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    S[vi, vj] = A[vi, vj]
            for j in range(4):
                with T.sblock("out"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = S[vi, vj] * T.float32(2)

    problems = kernel_problems(staged_row)
    assert len(problems) == 1 and "shared buffer S has a run-time size" in problems[0], problems
    assert kernel_problems(staged_texel) == []
