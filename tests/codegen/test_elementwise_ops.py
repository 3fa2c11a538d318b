"""Every unary and binary elementwise op of TVM's legalization registry builds and runs on both APIs.

The op list is read at test time from the modules that register TVM's legalizations
(``tvm.relax.transform.legalize_ops.unary`` / ``.binary``), so an op TVM adds is walked too (in
float32 unless :data:`DTYPES` says otherwise). Each op runs on float32 (and int32 / bool where TVM
takes those) inputs holding the edge values -- zeros of both signs, tiny (1e-30) and large (80, 89,
100, 1e4, 1e30) magnitudes, both infinities and NaN -- with all the ops of a group batched into one
module (one build per API, not one per op).
Each output must match TVM's llvm build (NaN where it gives NaN); for float ops numpy has in float64
the output must also be exact to 1e-5 relative (TVM's llvm build itself is not everywhere: its
``tanh(1e-6)`` is 1.3% off), which is what proves the WGSL helpers and OpenCL built-ins over the
whole domain.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from typing import Dict, List, Tuple

import numpy as np
import pytest
import tvm
from helpers import module, tensor
from helpers_build import BACKENDS, build_for
from tvm import relax
from tvm.relax.transform.legalize_ops import binary as _binary_legalize
from tvm.relax.transform.legalize_ops import unary as _unary_legalize

from relax_vk.analysis.reference import run_on_cpu
from relax_vk.runtime import load

SHAPE = (1, 4, 4, 4)


def registry_ops(legalize_module) -> List[str]:
    """The ``relax.*`` ops a TVM legalization module registers, in its order."""
    return re.findall(r'register_legalize\(\s*"(relax\.[\w.]+)"', inspect.getsource(legalize_module))


UNARY = registry_ops(_unary_legalize)
BINARY = registry_ops(_binary_legalize)

_BITWISE = {"relax.bitwise_and", "relax.bitwise_or", "relax.bitwise_xor", "relax.bitwise_not"}
_SHIFTS = {"relax.left_shift", "relax.right_shift"}
_LOGICAL = {"relax.logical_and", "relax.logical_or", "relax.logical_xor", "relax.logical_not"}
# ops TVM computes on integers too (its llvm build refuses power, atan2 and log_add_exp of ints and
# the transcendentals' type inference refuses them)
_INTEGER_TOO = {
    "relax.abs", "relax.ceil", "relax.floor", "relax.round", "relax.trunc", "relax.negative", "relax.sign", "relax.square",
    "relax.clip", "relax.isfinite", "relax.isinf", "relax.isnan", "relax.add", "relax.subtract", "relax.multiply",
    "relax.divide", "relax.floor_divide", "relax.mod", "relax.floor_mod", "relax.maximum", "relax.minimum", "relax.equal",
    "relax.not_equal", "relax.less", "relax.less_equal", "relax.greater", "relax.greater_equal",
}  # fmt: skip


def dtypes_of(op: str) -> Tuple[str, ...]:
    """The input dtypes an op is walked with."""
    if op in _LOGICAL:
        return ("bool",)
    if op in _SHIFTS:
        return ("int32",)
    if op in _BITWISE:
        return ("int32", "bool")
    if op in _INTEGER_TOO:
        return ("float32", "int32")
    return ("float32",)


def _make(op: str, args):
    fn = getattr(relax.op, op.split(".", 1)[1])
    if op == "relax.clip":
        return fn(args[0], -1.5, 2.0)
    return fn(*args)


# ------------------------------------------------------------------ inputs
_EDGES = [0.0, -0.0, 1e-30, -1e-30, 1e-6, -1e-6, 0.3, -0.3, 0.5, -0.5, 0.99, -0.99, 1.0, -1.0, 1.5, -2.5, 2.5, 3.0,
          -3.0, 10.0, -10.0, 80.0, -80.0, 89.0, -89.0, 100.0, -100.0, 1e4, -1e4, 1e30, -1e30, math.inf, -math.inf, math.nan]  # fmt: skip
# (x, y) pairs binary ops must get right besides every edge against a shuffled edge
_PAIRS = [(-8.0, 3.0), (-2.0, 0.5), (-2.0, -3.0), (0.0, -1.0), (-0.0, 3.0), (2.0, 100.0), (0.5, 1e4), (1.0, math.nan),
          (math.nan, 0.0), (7.5, -2.0), (-7.5, 2.0), (1e30, 1e-30), (1.0, 0.0), (-1.0, 0.0), (0.0, 0.0), (5.0, 3.0)]  # fmt: skip


def _fill(values: List[float], dtype: str, seed: int) -> np.ndarray:
    """``values`` then random ones, shaped SHAPE."""
    n = int(np.prod(SHAPE))
    rng = np.random.default_rng(seed)
    rest = rng.uniform(-4, 4, n - len(values))
    return np.concatenate([np.asarray(values, "float64"), rest]).astype(dtype).reshape(SHAPE)


def float_inputs(arity: int) -> List[np.ndarray]:
    x = _fill(_EDGES + [p[0] for p in _PAIRS], "float32", 0)
    if arity == 1:
        return [x]
    shuffled = list(np.random.default_rng(1).permutation(np.asarray(_EDGES, "float64")))
    return [x, _fill(shuffled + [p[1] for p in _PAIRS], "float32", 1)]


def int_inputs() -> List[np.ndarray]:
    """x, y (no zeros: divisions) and s (shift amounts 0..31)."""
    n = int(np.prod(SHAPE))
    rng = np.random.default_rng(2)
    x = np.concatenate([[0, 1, -1, 7, -7, 46340, -46340, 12345, -12345], rng.integers(-1000, 1000, n - 9)])
    y = np.concatenate([[3, -3, 2, -2, 7, -7, 31, -31, 1], rng.integers(1, 40, n - 9) * rng.choice([-1, 1], n - 9)])
    s = np.concatenate([[0, 1, 31, 5, 3, 0, 16, 8, 2], rng.integers(0, 32, n - 9)])
    return [a.astype("int32").reshape(SHAPE) for a in (x, y, s)]


def bool_inputs() -> List[np.ndarray]:
    n = int(np.prod(SHAPE))
    x = np.arange(n) % 2 == 0
    y = (np.arange(n) // 2) % 2 == 0
    return [x.reshape(SHAPE), y.reshape(SHAPE)]


# ------------------------------------------------------------------ groups
def groups() -> Dict[str, List[str]]:
    """{group: ops}: float32 unary / binary, int32, bool (every registry op in at least one)."""
    out: Dict[str, List[str]] = {"float32-unary": [], "float32-binary": [], "int32": [], "bool": []}
    for op in UNARY + BINARY:
        for dtype in dtypes_of(op):
            key = dtype if dtype != "float32" else f"float32-{'unary' if op in UNARY else 'binary'}"
            out[key].append(op)
    return out


GROUPS = groups()


def group_module(group: str) -> Tuple[tvm.IRModule, List[np.ndarray]]:
    """One module computing every op of ``group``, and its inputs."""
    ops = GROUPS[group]
    if group.startswith("float32"):
        inputs = float_inputs(1 if group.endswith("unary") else 2)
    elif group == "int32":
        inputs = int_inputs()
    else:
        inputs = bool_inputs()
    params = [tensor(name, SHAPE, str(a.dtype)) for name, a in zip("xys", inputs)]

    def body(bb, *p):
        outs = []
        for op in ops:
            arity = 1 if op in UNARY else 2
            args = [p[0]] if arity == 1 else [p[0], p[2] if op in _SHIFTS else p[1]]
            outs.append(bb.emit(_make(op, args)))
        return relax.Tuple(outs)

    return module(params, body), inputs


@functools.lru_cache(maxsize=None)
def reference(group: str):
    mod, inputs = group_module(group)
    return mod, inputs, run_on_cpu(mod, inputs)


# float64 truths (numpy), for the float ops numpy has and TVM defines alike (not log_add_exp: TVM
# defines it as log(exp(x) + exp(y)), which overflows from 89 on; not sign: TVM's sign(NaN) is 0)
_EXACT = {
    "relax.acos": np.arccos, "relax.acosh": np.arccosh, "relax.asin": np.arcsin, "relax.asinh": np.arcsinh,
    "relax.atan": np.arctan, "relax.atanh": np.arctanh, "relax.cos": np.cos, "relax.cosh": np.cosh,
    "relax.exp": np.exp, "relax.log": np.log, "relax.sin": np.sin, "relax.sinh": np.sinh, "relax.sqrt": np.sqrt,
    "relax.tan": np.tan, "relax.tanh": np.tanh, "relax.rsqrt": lambda x: 1 / np.sqrt(x),
    "relax.sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relax.erf": np.vectorize(math.erf, otypes=["float64"]),
    "relax.abs": np.abs, "relax.negative": np.negative, "relax.square": np.square, "relax.floor": np.floor,
    "relax.ceil": np.ceil, "relax.trunc": np.trunc, "relax.mod": np.fmod,
    "relax.isnan": np.isnan, "relax.isinf": np.isinf, "relax.isfinite": np.isfinite,
    "relax.add": np.add, "relax.subtract": np.subtract, "relax.multiply": np.multiply, "relax.divide": np.divide,
    "relax.atan2": np.arctan2, "relax.power": np.power,
    "relax.equal": np.equal, "relax.not_equal": np.not_equal, "relax.less": np.less, "relax.less_equal": np.less_equal,
    "relax.greater": np.greater, "relax.greater_equal": np.greater_equal,
}  # fmt: skip


def exact(op: str, inputs: List[np.ndarray], like: np.ndarray) -> np.ndarray:
    """The float64 truth of a float32 op, rounded to the output's dtype."""
    with np.errstate(all="ignore"):
        return _EXACT[op](*[a.astype("float64") for a in inputs]).astype(like.dtype)


_ROUNDS_X = {"relax.floor_mod", "relax.mod"}


def _mismatch(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Where ``got`` differs from ``want`` (both NaN, or equal infinities, agree)."""
    if got.dtype == np.bool_ or np.issubdtype(got.dtype, np.integer):
        return got != want
    with np.errstate(invalid="ignore", over="ignore"):
        got, want = got.astype("float64"), want.astype("float64")
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        close = np.abs(got - want) <= atol + rtol * np.abs(want)
    return ~(same | close)


def _describe(op, inputs, got, want, bad) -> str:
    where = np.argwhere(bad)[:4]
    cases = [f"{tuple(float(a[tuple(i)]) for a in inputs)} -> {got[tuple(i)]!r}, want {want[tuple(i)]!r}" for i in where]
    return f"{op}: {int(bad.sum())} wrong, e.g. " + "; ".join(cases)


def test_the_walk_covers_the_whole_registry():
    walked = {op for ops in GROUPS.values() for op in ops}
    assert walked == set(UNARY + BINARY)
    assert len(UNARY) >= 30 and len(BINARY) >= 25  # the registry was read (TVM 0.27: 32 and 26)
    assert {"relax.acosh", "relax.tanh", "relax.erf", "relax.power", "relax.atan2"} <= walked


@pytest.mark.one_api("backend")
@pytest.mark.parametrize("group", sorted(GROUPS))
@pytest.mark.parametrize("backend,device", BACKENDS)
def test_elementwise_op_matches_tvm_llvm(group, backend, device):
    mod, inputs, ref = reference(group)
    compiled = build_for(mod, backend)
    got = load(compiled.artifact(), device=device).run(inputs)
    ops = GROUPS[group]
    assert len(got) == len(ops)
    used = lambda op: [inputs[0]] if op in UNARY else [inputs[0], inputs[2] if op in _SHIFTS else inputs[1]]  # noqa: E731
    failures = []
    for op, g, r in zip(ops, got, ref):
        assert g.dtype == r.dtype and g.shape == r.shape, op
        args = used(op)
        # a float op's result may carry a rounding of its input's magnitude (x - floor(x/y)*y)
        atol = 1e-6 + (4 * np.spacing(np.abs(args[0]).astype("float32")) if op in _ROUNDS_X else 0)
        wrong = _mismatch(g, r, 1e-5, atol)
        if op in _EXACT and group.startswith("float32"):
            truth = exact(op, args, g)
            off = _mismatch(g, truth, 1e-5, 1e-37)  # (1e-37: a float32 subnormal may be flushed to zero)
            if off.any():
                failures.append("vs float64 " + _describe(op, args, g, truth, off))
            wrong &= ~_mismatch(r, truth, 1e-5, 1e-37)  # where TVM's llvm build is itself wrong, the truth decides
        if wrong.any():
            failures.append("vs llvm " + _describe(op, args, g, r, wrong))
    assert not failures, f"{backend}: " + "\n".join(failures)
