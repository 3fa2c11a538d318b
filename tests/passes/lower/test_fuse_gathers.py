"""FuseGathers: a gather on buffers (take, an embedding lookup) fuses with its consumer as an
injective op (TVM calls it opaque: a launch and an intermediate of its own), right on pocl and
lavapipe at every run-time size, out-of-range ids clipped as before; reductions stay opaque."""

import numpy as np
import pytest
import tvm
from tvm import relax, tirx

import relax_vk
from relax_vk.core.dims import with_dim_ranges
from relax_vk.passes.lower.fuse_gathers import FuseGathers, _is_gather
from relax_vk.runtime import Session

S = tirx.Var("S", "int64")
TABLE = np.random.default_rng(0).standard_normal((50, 24)).astype(np.float32)


def _module():
    ids = relax.Var("ids", relax.TensorType((S,), "int32"))
    x = relax.Var("x", relax.TensorType((S, 24), "float32"))
    bb = relax.BlockBuilder()
    R = relax.op
    with bb.function("main", [ids, x]):
        with bb.dataflow():
            rows = bb.emit(R.take(relax.const(TABLE), ids, axis=0, mode="clip"))
            out = bb.emit_output(bb.emit(R.where(bb.emit(R.greater(x, relax.const(0.0))), rows, bb.emit(R.multiply(rows, x)))))
        bb.emit_func_output(out)
    return with_dim_ranges(bb.get(), {"S": (1, 16)})


def test_only_single_spatial_blocks_are_gathers():
    mod = relax.transform.AnnotateTIROpPattern()(relax.transform.LegalizeOps()(_module()))
    kinds = {gv.name_hint: (int(f.attrs["op_pattern"]), _is_gather(f)) for gv, f in mod.functions_items() if isinstance(f, tirx.PrimFunc)}
    assert kinds["take"] == (8, True)  # (TVM: opaque)
    marked = FuseGathers()(mod)
    assert int(marked["take"].attrs["op_pattern"]) == 2
    x = relax.Var("x", relax.TensorType((S, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.sum(x, axis=[1]))
        bb.emit_func_output(y)
    reduction = relax.transform.LegalizeOps()(bb.get())
    assert not _is_gather(next(f for _, f in reduction.functions_items() if isinstance(f, tirx.PrimFunc)))


@pytest.mark.parametrize("target, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_a_gather_fuses_into_its_consumer_and_stays_right(target, device, request):
    request.getfixturevalue(device)
    artifact = relax_vk.build(_module(), target).artifact()
    launched = [s["kernel"] for s in artifact.program["steps"] if s.get("op") == "launch"]
    assert len(launched) == 1 and "take" in launched[0], launched
    session = Session(artifact, device=device)
    rng = np.random.default_rng(1)
    for count in (1, 6, 16):
        ids = rng.integers(-4, 60, count).astype(np.int32)  # (outside 0..49: clipped, as take's mode="clip")
        x = rng.standard_normal((count, 24)).astype(np.float32)
        rows = TABLE[np.clip(ids, 0, 49)]
        np.testing.assert_allclose(session.run([ids, x])[0], np.where(x > 0, rows, rows * x), rtol=1e-6)
