"""Shared test helpers: building small modules, reading scopes back, checking semantics."""

from typing import List, Tuple

import numpy as np
import tvm
from tvm import relax

import relax_vk
from relax_vk.analysis.reference import random_inputs, run_on_cpu

TARGET = relax_vk.target.opencl()


def tensor(name, shape, dtype="float32"):
    return relax.Var(name, relax.TensorType(shape, dtype))


def const(shape, seed=0, dtype="float32"):
    rng = np.random.default_rng(seed)
    return relax.const((rng.standard_normal(shape) * 0.1).astype(dtype))


def module(params, body_fn):
    """A module whose main takes ``params`` and returns ``body_fn(bb, *params)`` from one dataflow block."""
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = body_fn(bb, *params)
            gv = bb.emit_output(out)
        bb.emit_func_output(gv)
    return bb.get()


def scope_of(expr) -> str:
    ty = expr.ty
    return str(ty.vdevice.memory_scope) if isinstance(ty, relax.TensorType) and ty.vdevice is not None else "global"


def out_scopes(ty) -> List[str]:
    if isinstance(ty, relax.TupleType):
        return [scope_of_ty(f) for f in ty.fields]
    return [scope_of_ty(ty)]


def scope_of_ty(ty) -> str:
    return str(ty.vdevice.memory_scope) if ty.vdevice is not None else "global"


def call_scopes(mod, func="main") -> List[Tuple[str, List[str], List[str]]]:
    """(callee, argument scopes, output scopes) for every call of ``mod[func]``, in order.
    ``to_vdevice`` copies appear as ("copy", [src scope], [dst scope])."""
    rows = []
    for block in mod[func].body.blocks:
        for b in block.bindings:
            v = b.value
            if not isinstance(v, relax.Call):
                continue
            if isinstance(v.op, tvm.ir.Op) and v.op.name == "relax.call_tir":
                args = [a for a in v.args[1].fields]
                rows.append((v.args[0].name_hint, [scope_of(a) for a in args if isinstance(a.ty, relax.TensorType)], out_scopes(v.ty)))
            elif isinstance(v.op, tvm.ir.Op) and v.op.name == "relax.to_vdevice":
                rows.append(("copy", [scope_of(v.args[0])], out_scopes(v.ty)))
            else:
                name = v.op.name if isinstance(v.op, tvm.ir.Op) else str(v.op)
                args = []
                for a in v.args:
                    args += list(a.fields) if isinstance(a, relax.Tuple) else [a]
                rows.append((name, [scope_of(a) for a in args if isinstance(a.ty, relax.TensorType)], out_scopes(v.ty)))
    return rows


def copies(mod, func="main") -> List[Tuple[str, str]]:
    return [(r[1][0], r[2][0]) for r in call_scopes(mod, func) if r[0] == "copy"]


def op_count(mod, op_name, func="main") -> int:
    count = [0]

    def visit(e):
        if isinstance(e, relax.Call) and isinstance(e.op, tvm.ir.Op) and e.op.name == op_name:
            count[0] += 1

    relax.analysis.post_order_visit(mod[func], visit)
    return count[0]


def assert_same_numbers(original, transformed, rtol=1e-5, atol=1e-5, seed=0):
    """``transformed`` (scopes mapped back to CPU buffers) computes what ``original`` computes."""
    inputs = random_inputs(original, seed=seed)
    expected = run_on_cpu(original, inputs)
    actual = run_on_cpu(transformed, inputs)
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual):
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)


def scoped(mod, target=TARGET, **kw):
    return relax_vk.scope_pipeline(target, **kw)(mod)


def wgpu_lavapipe_adapter():
    """wgpu-py's lavapipe adapter: the tests that dispatch one WGSL shader by hand use wgpu-py as a
    shader harness (the runtime is the native library)."""
    import os

    import wgpu

    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    for adapter in wgpu.gpu.enumerate_adapters_sync():
        info = adapter.info
        if str(info.get("backend_type", "")).lower() == "vulkan" and str(info.get("adapter_type", "")).lower() == "cpu":
            return adapter
    import pytest

    pytest.skip("no lavapipe adapter through wgpu-py")


def opencl_build_program(source: str) -> list:
    """``clBuildProgram`` of ``source`` on pocl through pyopencl (a test harness: the runtime is the
    native library); the kernel names the program defines. Fails with the build log."""
    import pyopencl as cl

    device = pyopencl_pocl()
    program = cl.Program(cl.Context([device]), source)
    try:
        program.build()
    except cl.RuntimeError as err:
        raise AssertionError(f"clBuildProgram failed on {device.name}:\n{program.get_build_info(device, cl.program_build_info.LOG)}") from err
    return sorted(k.function_name for k in program.all_kernels())


def pyopencl_pocl():
    """pocl's device through pyopencl (for tests that check the library against another reader)."""
    import pyopencl as cl

    return next(d for p in cl.get_platforms() if "portable" in p.name.lower() or "pocl" in p.name.lower() for d in p.get_devices())


def small_classifier() -> tvm.IRModule:
    """x (1,16,4,4): two convs (textures), a spatial mean, then two dense layers (buffers). TVM's
    planner pools storage tokens by scope and dtype only, so the hidden (1,64) activation reuses
    the token of the first conv's output, a storage made on the texture VDevice (as mobilenet_v2's
    (1,1280) features did): the case of ``relax_vk.passes.PlaceBufferStorage``."""
    bb = relax.BlockBuilder()
    x = tensor("x", (1, 16, 4, 4))
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(relax.op.nn.relu(relax.op.nn.conv2d(x, const((16, 16, 3, 3), 1), padding=(1, 1))))
            b = bb.emit(relax.op.nn.relu(relax.op.nn.conv2d(a, const((16, 16, 1, 1), 2))))
            p = bb.emit(relax.op.mean(b, axis=[2, 3]))
            h = bb.emit(relax.op.nn.relu(relax.op.matmul(p, const((16, 64), 3))))
            gv = bb.emit_output(relax.op.matmul(h, const((64, 10), 4)))
        bb.emit_func_output(gv)
    return bb.get()


def cli_in_process(*args):
    """``relax-vk ARGS`` run in this process (``relax_vk.tools.cli.main``, what the script calls):
    ``.returncode``, ``.stdout``, ``.stderr``; argparse's usage errors are return codes too."""
    import contextlib
    import io
    from types import SimpleNamespace

    from relax_vk.tools.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exit_:
            code = exit_.code
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def assert_clear_error(proc, *needles):
    """A user error: exit code 2, no traceback, one ``relax-vk: error:`` line holding every needle."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("relax-vk: error:")]
    assert line, proc.stderr[-2000:]
    for needle in needles:
        assert needle in line[0], (needle, line[0])


def run_time_conv_module(weight, ranges, stride=1, padding=1) -> tvm.IRModule:
    """One conv of ``weight`` over an NCHW input whose H and W are run-time dims in ``ranges``
    (``{"H": (lo, hi), "W": (lo, hi)}``)."""
    from relax_vk.core.dims import with_dim_ranges

    h, w = tvm.tirx.Var("H", "int64"), tvm.tirx.Var("W", "int64")
    x = relax.Var("x", relax.TensorType((1, weight.shape[1], h, w), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.nn.conv2d(x, relax.const(weight), strides=stride, padding=padding))
        bb.emit_func_output(y)
    return with_dim_ranges(bb.get(), ranges)


def exp_rows_module(bound: int) -> tvm.IRModule:
    """``exp(x)`` over ``x: [S, 256]``, ``S`` a run-time dim in ``1..bound``."""
    from relax_vk.core.dims import with_dim_ranges

    S = tvm.tirx.Var("S", "int64")
    x = relax.Var("x", relax.TensorType((S, 256), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.exp(x))
        bb.emit_func_output(y)
    return with_dim_ranges(bb.get(), {"S": (1, bound)})
