"""pocl compiles a kernel's work-group function at its first launch, one for grids under 65,535
work-items wide and another for wider ones; a session of a run-time-dims program on pocl runs once
at the dims' extremes when it loads (Session::warm_up_across), so that a first run at a new size
compiles nothing. Counted by the work-group functions pocl writes to its cache folder, in a
process of its own (pocl reads POCL_CACHE_DIR when it starts)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import relax_vk  # noqa: E402
from relax_vk.frontends.onnx import from_onnx  # noqa: E402

_RUN = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np
    from relax_vk.runtime import load
    path, cache = sys.argv[1:3]
    def compiled():
        return sum(f.endswith(".so") for _, _, files in os.walk(cache) for f in files)
    session = load(path, device="pocl")
    out = {"dims_after_load": session.dim_values}
    rng = np.random.default_rng(0)
    for width in (4, 300, 37):  # under, over and under 65,535 work-items again
        x = rng.standard_normal((1, 64, 16, width)).astype("float32")
        (y,) = session.run([x])
        out[str(width)] = {"compiled": compiled(), "error": float(np.abs(y - 1 / (1 + np.exp(-x))).max())}
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def artifact_path(tmp_path_factory):
    folder = tmp_path_factory.mktemp("warm")
    graph = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 16, "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 16, "W"])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(folder / "m.onnx"))
    artifact = relax_vk.build(from_onnx(str(folder / "m.onnx"), dims={"W": (4, 300)}), "opencl").artifact()
    # the one kernel's grid: one work-item an element, 4,096 wide at W=4, 307,200 at W=300
    path = str(folder / "m.rvk")
    artifact.write(path)
    return path


def _run(path, tmp_path, **env):
    cache = tmp_path / "pocl"
    cache.mkdir(parents=True)
    run_env = {k: v for k, v in os.environ.items() if k not in ("POCL_WORK_GROUP_SPECIALIZATION", "RVK_POCL_WARM_UP")}
    run_env.update(POCL_CACHE_DIR=str(cache), **env)
    done = subprocess.run([sys.executable, "-c", _RUN, path, str(cache)], env=run_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_first_run_at_a_new_size_compiles_nothing_on_pocl(pocl, artifact_path, tmp_path):
    warm = _run(artifact_path, tmp_path / "warm")
    cold = _run(artifact_path, tmp_path / "cold", RVK_POCL_WARM_UP="0")
    for result in (warm, cold):
        assert all(result[w]["error"] < 1e-6 for w in ("4", "300", "37"))
        assert result["dims_after_load"] == {"W": -1}  # (the warm-up leaves the dims unbound)
    # warmed at load: the runs at 300 and 37 compile nothing more than the first run did
    assert warm["4"]["compiled"] == warm["300"]["compiled"] == warm["37"]["compiled"]
    # without it the run at 300 compiles the wide grid's function (what the warm-up prevents)
    assert cold["300"]["compiled"] > cold["4"]["compiled"]
