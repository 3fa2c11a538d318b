"""Run-time dims end to end: an ONNX model with a symbolic width built once (``dims``), run by
the native runtime at several widths against onnxruntime, with sizes outside the declared range,
inputs that disagree and artifacts that lie refused by name."""

import copy

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import relax_vk  # noqa: E402
from relax_vk.core.errors import UnsupportedError  # noqa: E402
from relax_vk.frontends.onnx import from_onnx, parse_dim, parse_input_shape  # noqa: E402
from relax_vk.runtime import load  # noqa: E402
from relax_vk.serialization.artifact import Artifact, ArtifactError  # noqa: E402


def _two_input_model(path):
    """x [1,3,16,width] -> conv 3x3 -> relu -> + y [1,8,16,width] -> 2x2 max pool -> transpose ->
    softmax over the last axis; conv output channels 8 (a width-dependent grid, reduction and
    transposed layout)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 3, 3, 3)).astype("float32")
    b = rng.standard_normal((8,)).astype("float32")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Add", ["r", "y"], ["s"]),
        helper.make_node("MaxPool", ["s"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Transpose", ["p"], ["t"], perm=[0, 3, 1, 2]),
        helper.make_node("Softmax", ["t"], ["out"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, "width"]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, "width"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, "half", 8, 8])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return _two_input_model(tmp_path_factory.mktemp("dims") / "two_inputs.onnx")


@pytest.fixture(scope="module")
def artifact(model_path):
    # the model's own dim_param "width" kept as a run-time dim by its range alone
    mod = from_onnx(model_path, dims={"width": (4, 300)})
    return relax_vk.build(mod, "opencl").artifact()


def test_the_artifact_carries_dims_shape_expressions_and_kernel_sizes(artifact):
    program = artifact.program
    assert program["dims"] == [{"name": "width", "min": 4, "max": 300}]
    x = program["tensors"][program["inputs"][0]]
    assert x["shape_expr"] == [1, 3, 16, "width"] and x["shape"] == [1, 3, 16, 300]
    assert x["bytes"] == 3 * 16 * 300 * 4  # storage at the bound
    out = program["tensors"][program["outputs"][0]]
    assert out["shape_expr"] == [1, ["floordiv", "width", 2], 8, 8] and out["shape"] == [1, 150, 8, 8]
    launches = [s for s in program["steps"] if s["op"] == "launch"]
    assert any(s.get("scalars") for s in launches) and any(s.get("global") for s in launches)


def test_one_artifact_is_right_at_every_width_in_its_range(artifact, model_path):
    session = load(artifact, device="pocl")
    assert session.dims == {"width": (4, 300)}
    assert session.inputs[0]["shape"] == [1, 3, 16, -1]
    reference = ort.InferenceSession(model_path)
    rng = np.random.default_rng(1)
    objects = None
    for width in (4, 37, 300, 9, 37):  # the bound, the least, odd sizes, a size again
        x = rng.standard_normal((1, 3, 16, width)).astype("float32")
        y = rng.standard_normal((1, 8, 16, width)).astype("float32")
        (out,) = session.run([x, y])
        expected = reference.run(None, {"x": x, "y": y})[0]
        assert out.shape == expected.shape == (1, width // 2, 8, 8)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-6)
        assert session.dim_values == {"width": width}
        np.testing.assert_array_equal(session.read_tensor(artifact.program["outputs"][0]), out)  # the run's shape, read back
        objects = session.device_objects if objects is None else objects
        assert session.device_objects == objects  # nothing allocated at a new shape


def test_sizes_outside_the_range_and_disagreeing_inputs_are_refused_by_name(artifact):
    session = load(artifact, device="pocl")
    out_id = artifact.program["outputs"][0]
    with pytest.raises(ValueError, match=rf"tensor {artifact.program['tensors'][out_id]['name']}: its shape depends on run-time dims and "
                                         "the session has not run yet"):  # fmt: skip
        session.read_tensor(out_id)
    ok = np.zeros((1, 8, 16, 10), np.float32)
    with pytest.raises(ValueError, match=r"input x: axis 3 \(width\) is 301, outside width's declared range 4\.\.300"):
        session.run([np.zeros((1, 3, 16, 301), np.float32), ok])
    with pytest.raises(ValueError, match=r"input x: axis 3 \(width\) is 3, outside"):
        session.run([np.zeros((1, 3, 16, 3), np.float32), ok])
    with pytest.raises(ValueError, match=r"input y: axis 3 \(width\) is 10, but input x gives width = 12"):
        session.run([np.zeros((1, 3, 16, 12), np.float32), ok])
    with pytest.raises(ValueError, match=r"input x: shape \[1, 4, 16, 10\], expected \[1, 3, 16, width\]"):
        session.run([np.zeros((1, 4, 16, 10), np.float32), ok])
    (out,) = session.run([np.ones((1, 3, 16, 10), np.float32), ok])  # still usable after the refusals
    assert out.shape == (1, 5, 8, 8)


def _damaged(artifact, change) -> bytes:
    program = copy.deepcopy(artifact.program)
    change(program)
    return Artifact(program, artifact.source, dict(artifact.constants)).to_bytes()


def _first_scalar_step(program):
    return next(s for s in program["steps"] if s.get("scalars"))


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda p: p["dims"].append({"name": "H", "min": 1, "max": 8}), "dim H is no input's axis"),
        (lambda p: p["dims"].__setitem__(0, {"name": "width", "min": 0, "max": 300}), "1 <= min <= max"),
        (lambda p: p["tensors"][p["inputs"][0]]["shape_expr"].__setitem__(3, ["pow", "width", 2]), "is not an integer, a dim or"),
        (lambda p: p["tensors"][p["inputs"][0]]["shape_expr"].__setitem__(3, "height"), "which is not a dim of the program"),
        (lambda p: _first_scalar_step(p)["scalars"][0].__setitem__("dtype", "float32"), "dtype int32|int64"),
        (lambda p: _first_scalar_step(p)["scalars"][0].__setitem__("index", 0), "which is not a scalar parameter"),
    ],
)
def test_artifacts_with_bad_run_time_dims_are_refused(artifact, change, message):
    with pytest.raises(ArtifactError, match=message):
        load(_damaged(artifact, change), device="pocl")


def test_a_size_that_cannot_be_computed_is_named_and_leaves_the_session_as_it_was(artifact):
    """A size expression that divides by zero at some dims (here the output's second axis,
    ``width // (width - 10)``, which is ``width // 2`` at 12) refuses that run naming the tensor,
    its axis, the expression and the dims; the session keeps the sizes of its last run and runs
    again as before."""
    out_id = artifact.program["outputs"][0]
    damaged = _damaged(artifact, lambda p: p["tensors"][out_id]["shape_expr"].__setitem__(1, ["floordiv", "width", ["-", "width", 10]]))
    session, reference = load(damaged, device="pocl"), load(artifact, device="pocl")
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((1, 3, 16, 12)).astype(np.float32), rng.standard_normal((1, 8, 16, 12)).astype(np.float32)
    want = reference.run([x, y])[0]
    np.testing.assert_array_equal(session.run([x, y])[0], want)
    name = artifact.program["tensors"][out_id]["name"]
    with pytest.raises(ValueError, match=rf"tensor {name} axis 1: floordiv\(width, \(width - 10\)\) at width=10 is a division by zero"):
        session.run([x[..., :10], y[..., :10]])
    np.testing.assert_array_equal(session.run([x, y])[0], want)


def test_front_door_syntax_and_missing_ranges(model_path):
    assert parse_input_shape("x=1,3,48,W") == ("x", (1, 3, 48, "W"))
    assert parse_dim("W=32:1280") == ("W", (32, 1280))
    for bad in ("W=0:10", "W=10:5", "W=10", "1W=1:2"):
        with pytest.raises(UnsupportedError, match="--dim"):
            parse_dim(bad)
    with pytest.raises(UnsupportedError, match=r"names the run-time dim W; give its range with --dim W=MIN:MAX"):
        from_onnx(model_path, {"x": (1, 3, 16, "W"), "y": (1, 8, 16, "W")})
    with pytest.raises(UnsupportedError, match=r"--dim H: no input has such a dim"):
        from_onnx(model_path, {"x": (1, 3, 16, 8), "y": (1, 8, 16, 8)}, dims={"H": (1, 4)})


def test_a_dim_without_an_upper_bound_is_refused_at_export():
    from tvm import relax, tirx

    width = tirx.Var("W", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([1, 4, width], "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(relax.op.nn.relu(x)))
        bb.emit_func_output(out)
    with pytest.raises(UnsupportedError, match=r"dim W has no upper bound; declare its range \(ONNX: --dim W=MIN:MAX"):
        relax_vk.build(bb.get(), "opencl").artifact()


@pytest.mark.parametrize("api, device", [("opencl", "pocl"), ("vulkan", "lavapipe")])
def test_grids_of_run_time_size_fold_under_the_workgroup_limit(model_path, api, device):
    """A cut-down workgroup limit (8) folds every grid that depends on the width: its extents
    become expressions the runtime computes per run (codegen/launch_grid.py). Sizes come back
    again: a Vulkan run replays steps recorded during the last run at another size, its grids
    and integer arguments written per run."""
    make = relax_vk.target.opencl if api == "opencl" else relax_vk.target.vulkan
    artifact = relax_vk.build(from_onnx(model_path, dims={"width": (4, 300)}), make(max_workgroups=8)).artifact()
    session = load(artifact, device=device)
    reference = ort.InferenceSession(model_path)
    rng = np.random.default_rng(2)
    for width in (300, 5, 64, 5, 300):
        x = rng.standard_normal((1, 3, 16, width)).astype("float32")
        y = rng.standard_normal((1, 8, 16, width)).astype("float32")
        (out,) = session.run([x, y])
        np.testing.assert_allclose(out, reference.run(None, {"x": x, "y": y})[0], rtol=1e-4, atol=1e-6)


def test_sizes_the_host_binds_once_reach_workspaces_scalars_and_grids():
    """TVM's host code computes a size once (``n = W * 4``) and uses it for a workspace, a kernel
    argument and the grid: each is read as an expression of the input's dim."""
    import tvm
    from tvm.script import tirx as T

    from relax_vk.codegen.export import kernel_launches

    @T.prim_func(s_tir=True)
    def host(a: T.handle):
        W = T.int64()
        A = T.match_buffer(a, (W,), "float32")
        n: T.let[T.int64] = W * T.int64(4)
        ws = T.alloc_buffer((n,), "float32")
        T.call_ffi_kernel("k", A.data, ws.data, n, (n + T.int64(255)) // T.int64(256), T.int64(256),
                          launch_params=["blockIdx.x", "threadIdx.x"], ret_ty="int32")  # fmt: skip

    width = host.params[0].ty.shape[0]
    (workspace,), (launch,) = kernel_launches(host, "host")
    tvm.ir.assert_structural_equal(workspace["shape"][0], width * 4)
    assert launch["args"][:2] == [("param", 0), ("workspace", 0)]
    tvm.ir.assert_structural_equal(launch["args"][2][1], width * 4)
    tvm.ir.assert_structural_equal(launch["grid"][0], (width * 4 + 255) // 256)
    assert launch["block"] == [256, 1, 1]
