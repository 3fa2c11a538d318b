"""WGSL translations of TVM's math intrinsics, and the helper functions WGSL lacks.

``MATH_FUNCTIONS[name] = (wgsl_name, is_helper)``: ``name`` is the intrinsic as it reaches the
emitter (``tirx.exp`` -> ``exp``, or the C name of ``call_pure_extern``; a trailing ``f`` of the
C float variants is dropped first). Helpers are defined in :data:`HELPERS` and added to a shader
only when it uses them. ``erf`` uses Abramowitz & Stegun 7.1.26 (max *absolute* error 1.5e-7, far
below the 1e-3 / 1e-4 tolerances the models are checked with; relative error near 0 is larger); ``round`` rounds half away from zero like C (WGSL's ``round`` rounds half to even).
"""

from __future__ import annotations

MATH_FUNCTIONS = {
    "exp": ("exp", False),
    "exp2": ("exp2", False),
    "log": ("log", False),
    "log2": ("log2", False),
    "log10": ("rvk_log10", True),
    "sqrt": ("sqrt", False),
    "rsqrt": ("inverseSqrt", False),
    "sin": ("sin", False),
    "cos": ("cos", False),
    "tan": ("tan", False),
    "asin": ("asin", False),
    "acos": ("acos", False),
    "atan": ("atan", False),
    "atan2": ("atan2", False),
    "sinh": ("sinh", False),
    "cosh": ("cosh", False),
    "tanh": ("tanh", False),
    "fabs": ("abs", False),
    "abs": ("abs", False),
    "floor": ("floor", False),
    "ceil": ("ceil", False),
    "trunc": ("trunc", False),
    "round": ("rvk_round", True),
    "nearbyint": ("round", False),
    "rint": ("round", False),
    "pow": ("pow", False),
    "fmin": ("min", False),
    "fmax": ("max", False),
    "fma": ("fma", False),
    "erf": ("rvk_erf", True),
    "sigmoid": ("rvk_sigmoid", True),
    "isnan": ("rvk_isnan", True),
    "isinf": ("rvk_isinf", True),
    "isfinite": ("rvk_isfinite", True),
}

HELPERS = {
    "rvk_inf": "fn rvk_inf() -> f32 { var bits = 0x7f800000u; return bitcast<f32>(bits); }",
    "rvk_nan": "fn rvk_nan() -> f32 { var bits = 0x7fc00000u; return bitcast<f32>(bits); }",
    "rvk_floordiv": (
        "fn rvk_floordiv(a: i32, b: i32) -> i32 {\n"
        "    let q = a / b;\n"
        "    return select(q, q - 1, (a % b != 0) && ((a < 0) != (b < 0)));\n"
        "}"
    ),
    "rvk_floormod": (
        "fn rvk_floormod(a: i32, b: i32) -> i32 {\n"
        "    let r = a % b;\n"
        "    return select(r, r + b, (r != 0) && ((r < 0) != (b < 0)));\n"
        "}"
    ),
    "rvk_log10": "fn rvk_log10(x: f32) -> f32 { return log(x) * 0.4342944819f; }",
    "rvk_round": "fn rvk_round(x: f32) -> f32 { let t = trunc(x); return select(t, t + sign(x), abs(x - t) >= 0.5f); }",
    "rvk_sigmoid": "fn rvk_sigmoid(x: f32) -> f32 { return 1.0f / (1.0f + exp(-x)); }",
    "rvk_isnan": "fn rvk_isnan(x: f32) -> bool { let bits = bitcast<u32>(x); return (bits & 0x7fffffffu) > 0x7f800000u; }",
    "rvk_isinf": "fn rvk_isinf(x: f32) -> bool { let bits = bitcast<u32>(x); return (bits & 0x7fffffffu) == 0x7f800000u; }",
    "rvk_isfinite": "fn rvk_isfinite(x: f32) -> bool { let bits = bitcast<u32>(x); return (bits & 0x7fffffffu) < 0x7f800000u; }",
    "rvk_erf": (
        "fn rvk_erf(x: f32) -> f32 {\n"
        "    // Abramowitz & Stegun 7.1.26 (max abs error 1.5e-7)\n"
        "    let a = abs(x);\n"
        "    let t = 1.0f / (1.0f + 0.3275911f * a);\n"
        "    let poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));\n"
        "    return sign(x) * (1.0f - poly * exp(-a * a));\n"
        "}"
    ),
}
