"""Blockwise 4-bit weights (MatMulNBits' layout, llama.cpp's Q4_0 rounding): the packing holds what
it claims, and the matmul and gather that decode it in their kernels equal numpy on the unpacked
weight, on pocl and lavapipe, at every row count of a run-time dim."""

import numpy as np
import pytest
from tvm import relax, tirx

import relax_vk
from relax_vk.core.dims import with_dim_ranges
from relax_vk.frontends.blockwise import BlockwiseFormat, gather_parts, pack_symmetric, unpack
from relax_vk.runtime import Session


def test_the_packing_keeps_each_blocks_peak_and_rounds_the_rest_to_its_step():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((70, 24)).astype(np.float32)  # K = 70: the last block padded with zeros
    w[32:64, 5] = 0.0  # an all-zero block: scale 0, decoded as zeros
    fmt, B, scales = pack_symmetric(w)
    assert (fmt.K, fmt.N, fmt.k_blocks) == (70, 24, 3) and B.shape == (24, 3, 16) and B.dtype == np.uint8
    assert scales.shape == (24 * 3,) and scales.dtype == np.float32
    back = unpack(fmt, B, scales)
    assert back.shape == w.shape
    step = np.repeat(np.abs(scales).reshape(24, 3), 32, axis=1)[:, :70].T
    # half a step, except past +7 steps (the side opposite the peak: Q4_0's range is -8..7 steps)
    inside = np.abs(w) <= 7.5 * step
    assert np.all(np.abs(back - w)[inside] <= step[inside] / 2 + 1e-6)
    assert np.all(np.abs(back - w) <= step + 1e-6)
    for n in range(24):  # Q4_0: the block's largest-magnitude value is -8 steps, exactly
        for b in range(3):
            block = w[b * 32 : (b + 1) * 32, n]
            peak = block[np.abs(block).argmax()]
            assert back[b * 32 + np.abs(block).argmax(), n] == pytest.approx(peak, rel=1e-6)
    assert np.all(back[32:64, 5] == 0)
    half = pack_symmetric(w, scale_dtype="float16")[2]
    assert half.dtype == np.float16


def test_a_format_the_kernels_cannot_read_is_refused():
    with pytest.raises(ValueError, match="bits=3, block_size=32: bits 2, 4 or 8"):
        BlockwiseFormat(64, 8, bits=3)
    with pytest.raises(ValueError, match="block_size=24"):
        BlockwiseFormat(64, 8, block=24)


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_the_matmul_and_the_gather_decode_the_weight_in_their_kernels(target, device, request):
    request.getfixturevalue(device)
    rng = np.random.default_rng(1)
    w = rng.standard_normal((96, 40)).astype(np.float32)
    fmt, B, scales = pack_symmetric(w)
    S = tirx.Var("S", "int64")
    x = relax.Var("x", relax.TensorType((S, 96), "float32"))
    ids = relax.Var("ids", relax.TensorType((S,), "int32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, ids]):
        with bb.dataflow():
            Bc, Sc = relax.const(B, "uint8"), relax.const(scales)
            y = bb.emit(bb.call_te(lambda X, Bq, Sq: fmt.matmul(X, Bq, Sq), x, Bc, Sc, primfunc_name_hint="matmul_int4"))
            rows = bb.emit(bb.call_te(lambda I, Bq, Sq: gather_parts([(fmt, 0)], I, (Bq, Sq)), ids, Bc, Sc, primfunc_name_hint="take_int4"))
            out = bb.emit_output(relax.Tuple([y, rows]))
        bb.emit_func_output(out)
    artifact = relax_vk.build(with_dim_ranges(bb.get(), {"S": (1, 16)}), target).artifact()
    assert {k["name"]: k["schedule"] for k in artifact.program["kernels"] if "matmul" in k["name"]} == {"matmul_int4_kernel": "linear"}
    assert not any(c.dtype == np.float32 and c.size >= w.size for c in artifact.constants.values())  # no float copy of the weight
    session = Session(artifact, device=device)
    dense = unpack(fmt, B, scales)
    for count in (1, 5, 16):
        xs = rng.standard_normal((count, 96)).astype(np.float32)
        picks = rng.integers(-3, 44, count).astype(np.int32)  # (outside 0..39: the nearest column, as take's clip)
        got_y, got_rows = session.run([xs, picks])
        np.testing.assert_allclose(got_y, xs @ dense, rtol=1e-5, atol=1e-4)
        np.testing.assert_array_equal(got_rows, dense[:, np.clip(picks, 0, 39)].T)
