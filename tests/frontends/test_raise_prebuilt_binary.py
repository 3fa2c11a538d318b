"""RaisePrebuiltBinary: prebuilt TOPI binary kernels are raised by structure, not by name."""

import numpy as np
from tvm import relax, te, topi

from relax_vk.analysis.reference import run_on_cpu
from relax_vk.frontends import RaisePrebuiltBinary

from helpers import tensor


def _module(make):
    bb = relax.BlockBuilder()
    x = tensor("x", (1, 8, 6, 6))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(make(bb, x))
        bb.emit_func_output(out)
    return bb.get()


def _ops(mod):
    return [b.value.op.name for b in mod["main"].body.blocks[0].bindings if isinstance(b.value, relax.Call)]


def test_onnx_style_clip_is_raised_and_keeps_its_numbers():
    def clip(bb, x):
        lo = bb.emit_te(topi.maximum, x, relax.const(0.0, "float32"))
        return bb.emit_te(topi.minimum, lo, relax.const(6.0, "float32"))  # as TVM's ONNX Clip

    mod = _module(clip)
    out = RaisePrebuiltBinary()(mod)
    assert _ops(out) == ["relax.maximum", "relax.minimum"]
    assert all(isinstance(f, relax.Function) for f in out.functions.values())  # kernels dropped
    a = (np.random.default_rng(0).standard_normal((1, 8, 6, 6)) * 8).astype("float32")
    np.testing.assert_array_equal(run_on_cpu(out, [a])[0], np.clip(a, 0, 6))
    np.testing.assert_array_equal(run_on_cpu(mod, [a])[0], np.clip(a, 0, 6))


def _named_maximum(body):
    def make(bb, x):
        c = relax.const(2.0, "float32")
        return bb.emit(bb.call_te(lambda a, b: te.compute(a.shape, lambda *i: body(a(*i), b()), name="T_maximum"), x, c, primfunc_name_hint="maximum"))

    return make


def test_kernels_are_matched_by_structure_not_name():
    # a kernel named "maximum" that multiplies is TOPI's multiply, structurally
    assert _ops(RaisePrebuiltBinary()(_module(_named_maximum(lambda a, b: a * b)))) == ["relax.multiply"]
    # and one that computes something no Relax binary op is stays a call_tir
    assert _ops(RaisePrebuiltBinary()(_module(_named_maximum(lambda a, b: a * b + b)))) == ["relax.call_tir"]
