"""relax_vk.runtime and `relax-vk run x.rvk` work where TVM cannot be imported."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

import relax_vk
from relax_vk.analysis.reference import random_inputs, run_on_cpu
from relax_vk.models import build_example

BLOCK_TVM = textwrap.dedent(
    """
    import sys
    class _NoTVM:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("tvm", "tvm_ffi"):
                raise ImportError(f"TVM is made unimportable for this test ({name})")
            return None
    sys.meta_path.insert(0, _NoTVM())
    """
)


def _run(code: str, tmp_path) -> subprocess.CompletedProcess:
    root = os.path.dirname(os.path.dirname(os.path.abspath(relax_vk.__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", BLOCK_TVM + textwrap.dedent(code)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)


def test_runtime_runs_an_artifact_without_tvm(tmp_path):
    mod = build_example("conv-relu-pool")
    relax_vk.build(mod, model={"example": "conv-relu-pool"}).artifact().write(str(tmp_path / "m.rvk"))
    inputs = random_inputs(mod)
    for i, x in enumerate(inputs):
        np.save(tmp_path / f"in{i}.npy", x)
    proc = _run(
        """
        import numpy as np
        from relax_vk.runtime import load
        try:
            import tvm
            raise SystemExit("tvm imported")
        except ImportError:
            pass
        out = load("m.rvk", device="pocl").run([np.load("in0.npy"), np.load("in1.npy")])[0]
        np.save("out.npy", out)
        import sys
        assert "tvm" not in sys.modules
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), run_on_cpu(mod, inputs)[0], rtol=1e-4, atol=1e-4)


def test_vulkan_runtime_runs_an_artifact_without_tvm_torch_pyopencl_or_wgpu_py(tmp_path):
    mod = build_example("conv-relu-pool")
    relax_vk.build(mod, target="vulkan", model={"example": "conv-relu-pool"}).artifact().write(str(tmp_path / "m.rvk"))
    inputs = random_inputs(mod)
    for i, x in enumerate(inputs):
        np.save(tmp_path / f"in{i}.npy", x)
    proc = _run(
        """
        import sys
        class _NoOpenCL:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("pyopencl", "wgpu", "torch", "tvm_ffi"):
                    raise ImportError(name + " is made unimportable for this test")
                return None
        sys.meta_path.insert(0, _NoOpenCL())
        import numpy as np
        from relax_vk.runtime import load
        session = load("m.rvk", device="lavapipe")
        np.save("out.npy", session.run([np.load("in0.npy"), np.load("in1.npy")])[0])
        assert not {"tvm", "tvm_ffi", "torch", "pyopencl", "wgpu"} & set(sys.modules)
        assert type(session).__name__ == "Session" and session.target == "vulkan"
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), run_on_cpu(mod, inputs)[0], rtol=1e-4, atol=1e-4)


def test_cli_run_without_tvm_skips_the_check_clearly(tmp_path):
    relax_vk.build(build_example("rfc-conv2d"), model={"example": "rfc-conv2d"}).artifact().write(str(tmp_path / "m.rvk"))
    proc = _run(
        """
        import sys
        from relax_vk.tools.cli import main
        sys.exit(main(["run", "m.rvk", "--device", "pocl", "--check", "--repeat", "2", "--json"]))
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["ok"] is None and result["max_abs_err"] is None
    assert result["backend"] == "opencl" and result["latency_ms"]["median"] > 0


def test_compiler_api_without_tvm_says_what_to_install(tmp_path):
    proc = _run(
        """
        import relax_vk
        relax_vk.build
        """,
        tmp_path,
    )
    assert proc.returncode != 0
    assert "relax_vk.build needs TVM" in proc.stderr and "pip install 'apache-tvm==0.27.0.post1'" in proc.stderr


def test_tune_measure_runs_without_tvm(tmp_path):
    from relax_vk.schedules.workloads import ConvSpec
    from relax_vk.tools.tune import candidate_module, write_bundle

    spec = ConvSpec((1, 4, 6, 6), (8, 4, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1)
    write_bundle([candidate_module(spec, 1)], str(tmp_path / "bundle"), apis=("opencl",), memories=("buffer",), threads=(32,),
                 log=lambda _line: None)  # fmt: skip
    proc = _run(
        """
        import sys
        from relax_vk.tools.cli import main
        code = main(["tune", "--measure", "bundle", "--target", "opencl", "--device", "pocl", "--repeat", "1", "-o", "r.json"])
        assert "tvm" not in sys.modules
        raise SystemExit(code)
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "r.json").read_text())
    # one record per case: the direct candidates and each Winograd tile size's (a 3x3 stride-1 conv)
    assert len(results["records"]) == 3 and all(r["max_err"] < 1e-4 for r in results["records"])
    assert sorted(str(r["config"].get("winograd", "-")) for r in results["records"]) == ["-", "2", "4"]


def test_winograd_weight_transform_without_tvm(tmp_path):
    """The numpy Winograd weight transform (what transport bundles derive transformed weights
    with on a machine without TVM) imports without TVM and gives the compiler's constants."""
    from relax_vk.legalize.winograd import transform_weight

    w = np.random.default_rng(0).standard_normal((2, 8, 3, 3, 4)).astype("float32")
    np.save(tmp_path / "w.npy", w)
    np.save(tmp_path / "u.npy", transform_weight(w, 4))
    proc = _run(
        """
        import sys
        import numpy as np
        from relax_vk.runtime.winograd import transform_weight
        assert "tvm" not in sys.modules
        assert np.array_equal(transform_weight(np.load("w.npy"), 4), np.load("u.npy"))
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
