"""relax_vk's layout_transform legalizer: gathers over the output, pads by selecting the pad
value, and marks packing kernels opaque and unpacking kernels injective."""

import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.tirx import IndexMap

from relax_vk.analysis.reference import run_on_cpu
from relax_vk.legalize.layout_transform import INJECTIVE, OPAQUE, legalize_layout_transform

from helpers import tensor


def _legalized(shape, index_map, pad_value=None):
    bb = relax.BlockBuilder()
    x = tensor("x", shape)
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(legalize_layout_transform(bb, relax.op.layout_transform(x, IndexMap.from_func(index_map), pad_value)))
        bb.emit_func_output(out)
    return bb.get()


def _kernel(mod):
    (func,) = [f for f in mod.functions.values() if isinstance(f, tvm.tirx.PrimFunc)]
    return func


@pytest.mark.parametrize("channels,pad", [(3, 0.0), (6, 1.5), (8, None)])
def test_packing_pads_channels_with_the_pad_value(channels, pad):
    mod = _legalized((1, channels, 5, 7), lambda n, c, h, w: (n, c // 4, h, w, c % 4), pad)
    x = np.random.default_rng(0).standard_normal((1, channels, 5, 7)).astype("float32")
    (out,) = run_on_cpu(mod, [x])
    cp = -(-channels // 4) * 4
    expected = np.concatenate([x, np.full((1, cp - channels, 5, 7), pad or 0.0, "float32")], axis=1)
    np.testing.assert_array_equal(out, expected.reshape(1, cp // 4, 4, 5, 7).transpose(0, 1, 3, 4, 2))
    assert int(_kernel(mod).attrs["op_pattern"]) == OPAQUE


def test_unpacking_is_injective_and_exact():
    mod = _legalized((1, 2, 3, 3, 4), lambda n, c, h, w, b: (n, c * 4 + b, h, w))
    x = np.arange(72, dtype="float32").reshape(1, 2, 3, 3, 4)
    (out,) = run_on_cpu(mod, [x])
    np.testing.assert_array_equal(out, x.transpose(0, 1, 4, 2, 3).reshape(1, 8, 3, 3))
    assert int(_kernel(mod).attrs["op_pattern"]) == INJECTIVE
