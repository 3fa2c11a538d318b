"""Math intrinsics in both kernel languages: OpenCL C gets the built-in names TVM's C default
misses (``acos``, not ``acosf``: the program used to fail to build on pocl), WGSL gets relax_vk's
helpers (``acosh``/``asinh``/``atanh`` had no translation; ``tanh``, ``pow`` of a negative base,
``asin`` and friends were NaN or 4e-4 off on lavapipe). ONNX single-op graphs of every
transcendental, over their whole domains (tiny, large and boundary values), against onnxruntime."""

from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np
import pytest
import tvm
from helpers_build import BACKENDS, build_for

from relax_vk.codegen.intrinsics import OPENCL_MATH_BUILTINS, REGISTERED_OPS
from relax_vk.frontends import from_onnx
from relax_vk.runtime import load

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

# the values each input domain starts with (random ones of the domain fill the rest)
_DOMAINS: Dict[str, Tuple[List[float], Tuple[float, float]]] = {
    "real": ([0.0, -0.0, 1e-30, -1e-30, 1e-6, -1e-6, 0.5, -0.5, 3.0, -3.0, 20.0, -20.0, 88.0, 89.0, -89.0, 100.0, -100.0, 1e4, -1e4,
              1e30, -1e30], (-6.0, 6.0)),
    "unit": ([0.0, 1e-30, -1e-30, 1e-6, -1e-6, 0.5, -0.5, 0.99999, -0.99999, 1.0, -1.0], (-1.0, 1.0)),
    "from_one": ([1.0, 1.0000001, 1.0001, 1.5, 80.0, 4096.0, 4097.0, 1e4, 1e30], (1.0, 8.0)),
    "positive": ([1e-30, 1e-6, 0.999999, 1.0, 1.000001, 2.0, 1e4, 1e30], (0.01, 10.0)),
}  # fmt: skip
# ONNX op -> input domain
_OPS = {
    "Acos": "unit", "Asin": "unit", "Atanh": "unit", "Acosh": "from_one", "Asinh": "real", "Atan": "real", "Tan": "real",
    "Sin": "real", "Cos": "real", "Tanh": "real", "Sinh": "real", "Cosh": "real", "Exp": "real", "Erf": "real",
    "Sigmoid": "real", "Log": "positive", "Sqrt": "positive",
}  # fmt: skip
SHAPES = [(23,), (2, 3, 5), (1, 8, 4, 4)]


def _inputs(shape, seed: int = 0) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    feeds = {}
    for name, (edges, (lo, hi)) in _DOMAINS.items():
        values = np.concatenate([edges, rng.uniform(lo, hi, max(n - len(edges), 0))])[:n]
        feeds[name] = rng.permutation(values).astype("float32").reshape(shape)
    return feeds


def _model(shape) -> "onnx.ModelProto":
    """One graph: each op of :data:`_OPS` on its domain's input, plus the tanh form of GELU written
    out with ``Pow(x, 3)`` (NaN on lavapipe for negative x before)."""
    inputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)) for name in _DOMAINS]
    nodes = [helper.make_node(op, [domain], [f"y_{op}"]) for op, domain in _OPS.items()]
    consts = {"three": 3.0, "k": 0.044715, "s": float(np.sqrt(2 / np.pi)), "one": 1.0, "half": 0.5}
    inits = [numpy_helper.from_array(np.array(v, "float32"), name) for name, v in consts.items()]
    gelu = [("Pow", ["real", "three"], "g0"), ("Mul", ["g0", "k"], "g1"), ("Add", ["real", "g1"], "g2"), ("Mul", ["g2", "s"], "g3"),
            ("Tanh", ["g3"], "g4"), ("Add", ["g4", "one"], "g5"), ("Mul", ["real", "g5"], "g6"), ("Mul", ["g6", "half"], "y_Gelu")]  # fmt: skip
    nodes += [helper.make_node(op, ins, [out]) for op, ins, out in gelu]
    outputs = [helper.make_tensor_value_info(f"y_{op}", TensorProto.FLOAT, list(shape)) for op in list(_OPS) + ["Gelu"]]
    graph = helper.make_graph(nodes, "transcendentals", inputs, outputs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _close(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Where got and want agree: equal (infinities too), both NaN, or within 1e-5 relative / 1e-6
    absolute; a float32 subnormal may be flushed to zero."""
    with np.errstate(invalid="ignore", over="ignore"):
        g, w = got.astype("float64"), want.astype("float64")
        return (g == w) | (np.isnan(g) & np.isnan(w)) | (np.abs(g - w) <= 1e-6 + 1e-5 * np.abs(w))


def test_math_tvm_leaves_to_c_names_gets_opencl_builtins():
    assert {"tirx.acos", "tirx.acosh", "tirx.asin", "tirx.asinh", "tirx.atan", "tirx.atanh", "tirx.tan"} <= set(REGISTERED_OPS)
    for name in REGISTERED_OPS:
        assert name.split(".", 1)[1] in OPENCL_MATH_BUILTINS
        assert tvm.ir.Op.get(name).get_attr("opencl.FLowerIntrinsic") is not None


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("backend,device", BACKENDS)
def test_onnx_transcendentals_match_onnxruntime(backend, device, shape, tmp_path):
    model = _model(shape)
    path = str(tmp_path / "transcendentals.onnx")
    onnx.save(model, path)
    feeds = _inputs(shape)
    with np.errstate(all="ignore"):
        expected = ort.InferenceSession(path).run(None, feeds)
    compiled = build_for(from_onnx(path), backend)
    if backend == "opencl":
        assert "acosf" not in compiled.source and "acos(" in compiled.source
    got = load(compiled.artifact(), device=device).run([feeds[name] for name in _DOMAINS])
    failures = []
    for op, g, want in zip(list(_OPS) + ["Gelu"], got, expected):
        ok = _close(g, want)
        if not ok.all():
            x = feeds[_OPS.get(op, "real")]
            bad = [(float(x.flat[i]), float(g.flat[i]), float(want.flat[i])) for i in np.flatnonzero(~ok)[:4]]
            failures.append(f"{op}: {int((~ok).sum())} wrong (x, got, onnxruntime): {bad}")
    assert not failures, "\n".join(failures)
