"""Reshapes of tensors with run-time dims: relax_vk's legalizer makes them injective kernels that
fuse with their neighbours (TVM's reads ``% S`` and is opaque: one launch and one copy per reshape),
right at every size on pocl and lavapipe, the leading dim split, merged or kept, and two run-time
dims flattened."""

import numpy as np
import pytest
from tvm import relax, tirx

import relax_vk
from relax_vk.core.dims import with_dim_ranges
from relax_vk.runtime import Session

S, T = tirx.Var("S", "int64"), tirx.Var("T", "int64")


def _module():
    x = relax.Var("x", relax.TensorType((S, 64), "float32"))
    y = relax.Var("y", relax.TensorType((S, T), "float32"))
    bb = relax.BlockBuilder()
    R = relax.op
    with bb.function("main", [x, y]):
        with bb.dataflow():
            heads = bb.emit(R.reshape(bb.emit(R.add(x, x)), (S, 4, 16)))  # the leading dim kept
            rows = bb.emit(R.reshape(bb.emit(R.multiply(heads, heads)), (S * 4, 16)))  # merged into it
            back = bb.emit(R.add(bb.emit(R.reshape(rows, (S, 64))), x))  # split from it
            flat = bb.emit(R.reshape(bb.emit(R.negative(y)), (S * T,)))  # two run-time dims
            out = bb.emit_output(relax.Tuple([bb.emit(R.exp(rows)), back, bb.emit(R.add(flat, flat))]))
        bb.emit_func_output(out)
    return with_dim_ranges(bb.get(), {"S": (1, 9), "T": (1, 5)})


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_run_time_reshapes_fuse_and_are_right_at_every_size(target, device, request):
    request.getfixturevalue(device)
    artifact = relax_vk.build(_module(), target).artifact()
    launched = [s["kernel"] for s in artifact.program["steps"] if s.get("op") == "launch"]
    # every reshape fused into a neighbour (the flattening of two run-time dims reads ``flat % T``,
    # which TVM's op-pattern analysis calls opaque: FuseGathers lets it fuse)
    assert not [k for k in launched if k.startswith("reshape")], launched
    session = Session(artifact, device=device)
    rng = np.random.default_rng(0)
    for s, t in ((1, 1), (4, 3), (9, 5)):
        x, y = rng.standard_normal((s, 64)).astype(np.float32), rng.standard_normal((s, t)).astype(np.float32)
        rows, back, flat = session.run([x, y])
        want_rows = ((2 * x) ** 2).reshape(s * 4, 16)
        np.testing.assert_allclose(rows, np.exp(want_rows), rtol=1e-5)
        np.testing.assert_allclose(back, want_rows.reshape(s, 64) + x, rtol=1e-5)
        np.testing.assert_allclose(flat, -2 * y.reshape(-1), rtol=1e-6)
