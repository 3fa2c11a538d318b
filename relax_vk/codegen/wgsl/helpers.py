"""WGSL translations of TVM's math intrinsics, and the helper functions WGSL lacks.

``MATH_FUNCTIONS[name] = (wgsl_name, is_helper)``: ``name`` is the intrinsic as it reaches the
emitter (``tirx.exp`` -> ``exp``, or the plain C name of ``call_pure_extern``, see
:mod:`relax_vk.codegen.intrinsics`; a trailing ``f`` of the C float variants is dropped first).
Helpers are defined in :data:`HELPERS` and added to a shader only when it uses them, with the
helpers they call (:func:`helper_closure`).

Why helpers rather than WGSL's built-ins: WGSL's accuracy for most transcendentals is "inherited
from" a textbook formula (``tanh`` = ``sinh/cosh``, ``asinh(x)`` = ``log(x + sqrt(x*x + 1))``),
so a driver may overflow for large inputs (NaN from ``tanh`` of a large argument), cancel for tiny
ones (``asinh(1e-30)`` = 0) or use a coarse polynomial (lavapipe's ``asin``/``acos`` are off by
4e-4, ``atan`` by 340 ulp, ``log`` near 1 by 5e-7 absolute, ``sin(1e30)`` = -1). Each helper
here but ``pow`` (below) is exact to a few float32 ulp over its whole domain (measured on
lavapipe against float64: at most 6 ulp), using only ``exp`` (on a reduced argument), ``exp2``,
``sqrt``, arithmetic and bit casts, with these formulas:

* ``log``/``log2``/``log10``: ``x = m * 2^e`` by its bits, ``m`` in ``[sqrt(1/2), sqrt(2))``;
  ``log(m) = 2 atanh(s)``, ``s = (m - 1)/(m + 1)``, from atanh's series (``|s| < 0.172``);
* ``log1p``: the same series of ``s = x/(2 + x)`` while ``|x| < 0.41``; ``expm1``: its Taylor
  series while ``|x| < 0.7`` (no cancellation near 0), ``exp(x) - 1`` beyond;
* ``sin``/``cos``/``tan``: ``|x| = (q + t) pi/2`` by Payne & Hanek's reduction (``|x| 2/pi`` mod 4
  from 72 bits of ``2/pi``, in 32-bit integer arithmetic: exact for every finite float32), then
  the Taylor series of ``sin`` and ``cos`` on ``|t pi/2| <= pi/4``;
* ``exp``: ``x = n log(2) + r`` (Cody & Waite, exact), ``exp(r) 2^n`` (the built-in's error grows
  with ``|x|``: 55 ulp at 84 on lavapipe);
* ``tanh = t/(t + 2)``, ``t = expm1(2|x|)``, 1 beyond 9.2; ``sinh = (t + t/(t + 1))/2``,
  ``t = expm1(|x|)``, and ``cosh = (e + 1/e)/2``; beyond 20 both are ``exp(|x|) 2^-1`` scaled in
  the exponent (finite up to 89.4, where float32's range ends, not 88.7 where ``exp`` overflows);
* ``asinh = log1p(a + a^2/(1 + sqrt(1 + a^2)))``, ``acosh = log1p(t + sqrt(2t + t^2))``
  (``t = x - 1``), both ``log(a) + log(2)`` beyond 4096; ``atanh = log1p(2a/(1 - a))/2``;
* ``atan``: reduced to ``[0, 1]`` (``pi/2 - atan(1/a)``), then to ``|u| < tan(pi/12)`` by
  ``atan(t) = pi/6 + atan((t sqrt(3) - 1)/(t + sqrt(3)))``, then its Taylor series; ``atan2``
  from it with C's signs of zero and quadrants; ``asin(a) = atan(a/sqrt(1 - a^2))`` up to 1/2 and
  ``pi/2 - 2 asin(sqrt((1 - a)/2))`` beyond; ``acos`` likewise;
* ``erf``: its Taylor series below 1 (exact relative error near 0), Abramowitz & Stegun 7.1.26
  (absolute error 1.5e-7) from 1 on;
* ``pow``: ``2^(y e) 2^(y log2 m)`` for ``|x| = m 2^e``, with ``y e`` exact, so its relative
  error is about ``2^-24 |y log2 m|`` (measured on lavapipe: 1.8e-6 for ``|y| <= 30``, where
  ``exp2(y log2 |x|)`` was 5.7e-6);
  C's rules for negative bases (integer exponents keep the sign of odd powers, others give
  NaN), zeros, ones and infinities;
* ``round`` rounds half away from zero like C (WGSL's ``round`` rounds half to even);
* ``fmod`` is C's, exact (WGSL's float ``%`` is ``x - y trunc(x/y)``); ``max``/``min`` of floats are
  TVM's ``a > b ? a : b`` (WGSL's return the operand that is not NaN).

Every math helper returns NaN for NaN, tested on the bits (a WGSL implementation may assume NaN never
occurs and fold ``x != x``).
"""

from __future__ import annotations

import math
import re
from typing import Iterable, List, Sequence, Set

MATH_FUNCTIONS = {
    "exp": ("rvk_exp", True),
    "exp2": ("exp2", False),
    "exp10": ("rvk_exp10", True),
    "expm1": ("rvk_expm1", True),
    "log": ("rvk_log", True),
    "log2": ("rvk_log2", True),
    "log10": ("rvk_log10", True),
    "log1p": ("rvk_log1p", True),
    "sqrt": ("sqrt", False),
    "rsqrt": ("inverseSqrt", False),
    "sin": ("rvk_sin", True),
    "cos": ("rvk_cos", True),
    "tan": ("rvk_tan", True),
    "asin": ("rvk_asin", True),
    "acos": ("rvk_acos", True),
    "atan": ("rvk_atan", True),
    "atan2": ("rvk_atan2", True),
    "sinh": ("rvk_sinh", True),
    "cosh": ("rvk_cosh", True),
    "tanh": ("rvk_tanh", True),
    "asinh": ("rvk_asinh", True),
    "acosh": ("rvk_acosh", True),
    "atanh": ("rvk_atanh", True),
    "fabs": ("abs", False),
    "abs": ("abs", False),
    "floor": ("floor", False),
    "ceil": ("ceil", False),
    "trunc": ("trunc", False),
    "round": ("rvk_round", True),
    "nearbyint": ("round", False),
    "rint": ("round", False),
    "pow": ("rvk_pow", True),
    "fmin": ("min", False),
    "fmax": ("max", False),
    "fma": ("fma", False),
    "erf": ("rvk_erf", True),
    "sigmoid": ("rvk_sigmoid", True),
    "isnan": ("rvk_isnan", True),
    "isinf": ("rvk_isinf", True),
    "isfinite": ("rvk_isfinite", True),
}


def _f32(value: float) -> str:
    """A WGSL float32 literal (9 significant digits: round-trips)."""
    text = format(value, ".9g")
    return (text if any(c in text for c in ".en") else text + ".0") + "f"


def _horner(var: str, coefficients: Sequence[float]) -> str:
    """``c0 + var*(c1 + var*(c2 + ...))`` as WGSL text."""
    text = _f32(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        text = f"{_f32(c)} + {var} * ({text})"
    return text


# series coefficients, computed from their definitions (nothing fitted):
_ATANH_SERIES = [1.0 / (2 * k + 1) for k in range(8)]  # atanh(s)/s in z = s^2 (|s| <= 0.26)
_ATAN_SERIES = [(-1.0) ** k / (2 * k + 1) for k in range(8)]  # atan(u)/u in z = u^2 (|u| <= 0.268)
_EXPM1_SERIES = [1.0 / math.factorial(k + 1) for k in range(12)]  # expm1(x)/x in x (|x| < 0.7)
_ERF_SERIES = [2 / math.sqrt(math.pi) * (-1.0) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(13)]  # erf(x)/x in z = x^2

_SIN_SERIES = [(-1.0) ** k / math.factorial(2 * k + 1) for k in range(7)]  # sin(r)/r in z = r^2 (|r| <= pi/4)
_COS_SERIES = [(-1.0) ** k / math.factorial(2 * k) for k in range(8)]  # cos(r) in z = r^2


def _two_over_pi_limbs(count: int, zero_limbs: int) -> List[int]:
    """2/pi in 12-bit limbs, most significant first, after ``zero_limbs`` zero limbs: pi from
    Machin's formula (pi = 16 atan(1/5) - 4 atan(1/239)) in integer arithmetic."""
    bits = 12 * count + 64

    def atan_inv(x: int) -> int:  # atan(1/x) * 2^bits
        total = term = (1 << bits) // x
        n, sign = 1, -1
        while term:
            term //= x * x
            total += sign * (term // (2 * n + 1))
            n, sign = n + 1, -sign
        return total

    pi = 16 * atan_inv(5) - 4 * atan_inv(239)  # pi * 2^bits
    frac = (2 << (2 * bits)) // pi  # 2/pi * 2^bits (2/pi < 1: all fraction bits)
    limbs = [(frac >> (bits - 12 * (k + 1))) & 0xFFF for k in range(count - zero_limbs)]
    return [0] * zero_limbs + limbs


_TWO_OVER_PI = _two_over_pi_limbs(20, 3)

_PI = math.pi
_LN2_HI, _LN2_LO = 0.693145751953125, math.log(2) - 0.693145751953125  # e*_LN2_HI is exact for |e| < 2^11

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
    "rvk_round": "fn rvk_round(x: f32) -> f32 { let t = trunc(x); return select(t, t + sign(x), abs(x - t) >= 0.5f); }",
    "rvk_sigmoid": "fn rvk_sigmoid(x: f32) -> f32 { return 1.0f / (1.0f + rvk_exp(-x)); }",
    "rvk_isnan": "fn rvk_isnan(x: f32) -> bool { let bits = bitcast<u32>(x); return (bits & 0x7fffffffu) > 0x7f800000u; }",
    "rvk_isinf": "fn rvk_isinf(x: f32) -> bool { let bits = bitcast<u32>(x); return (bits & 0x7fffffffu) == 0x7f800000u; }",
    "rvk_isfinite": "fn rvk_isfinite(x: f32) -> bool { let bits = bitcast<u32>(x); return (bits & 0x7fffffffu) < 0x7f800000u; }",
    "rvk_signbit": "fn rvk_signbit(x: f32) -> bool { return (bitcast<u32>(x) & 0x80000000u) != 0u; }",
    # TVM's max/min (llvm and OpenCL C alike): a > b ? a : b, so max(NaN, 1) = 1 and max(1, NaN) = NaN
    # (WGSL's max/min return the other operand of a NaN)
    "rvk_max": "fn rvk_max(a: f32, b: f32) -> f32 { return select(b, a, a > b); }",
    "rvk_min": "fn rvk_min(a: f32, b: f32) -> f32 { return select(b, a, a < b); }",
    "rvk_fmod": (
        "fn rvk_fmod(x: f32, y: f32) -> f32 {\n"
        "    // C's fmod, exact: the remainder of |x| by |y| by long division of the mantissas, x's sign\n"
        "    let ux = bitcast<u32>(x) & 0x7fffffffu;\n"
        "    let uy = bitcast<u32>(y) & 0x7fffffffu;\n"
        "    if (uy == 0u || ux >= 0x7f800000u || uy > 0x7f800000u) { return rvk_nan(); }\n"
        "    if (ux < uy) { return x; }\n"
        "    let sign = bitcast<u32>(x) & 0x80000000u;\n"
        "    var ex = i32(ux >> 23u);\n"
        "    var mx = ux & 0x7fffffu;\n"
        "    if (ex == 0) { ex = 1; loop { if ((mx & 0x800000u) != 0u) { break; } mx = mx << 1u; ex = ex - 1; } } else { mx = mx | 0x800000u; }\n"
        "    var ey = i32(uy >> 23u);\n"
        "    var my = uy & 0x7fffffu;\n"
        "    if (ey == 0) { ey = 1; loop { if ((my & 0x800000u) != 0u) { break; } my = my << 1u; ey = ey - 1; } } else { my = my | 0x800000u; }\n"
        "    loop {\n"
        "        if (mx >= my) { mx = mx - my; }\n"
        "        if (ex == ey || mx == 0u) { break; }\n"
        "        mx = mx << 1u;\n"
        "        ex = ex - 1;\n"
        "    }\n"
        "    if (mx == 0u) { return bitcast<f32>(sign); }\n"
        "    loop { if ((mx & 0x800000u) != 0u) { break; } mx = mx << 1u; ey = ey - 1; }\n"
        "    var bits = 0u;\n"
        "    if (ey > 0) { bits = (mx & 0x7fffffu) | (u32(ey) << 23u); } else { bits = mx >> u32(1 - ey); }\n"
        "    return bitcast<f32>(bits | sign);\n"
        "}"
    ),
    # ---- logarithms
    "rvk_atanh_series": (
        "fn rvk_atanh_series(s: f32) -> f32 {\n"
        "    // 2 atanh(s) = log((1 + s)/(1 - s)), for |s| <= 0.26\n"
        "    let z = s * s;\n"
        f"    return 2.0f * s * ({_horner('z', _ATANH_SERIES)});\n"
        "}"
    ),
    "rvk_log_parts": (
        "fn rvk_log_parts(x: f32) -> vec2<f32> {\n"
        "    // (e, log(m)) with x = m * 2^e, m in [sqrt(1/2), sqrt(2)); e is -inf for 0, +inf for +inf, NaN below 0 and for NaN\n"
        "    var bits = bitcast<u32>(x);\n"
        "    if (bits == 0u || bits == 0x80000000u) { return vec2<f32>(-rvk_inf(), 0.0f); }\n"
        "    if (bits == 0x7f800000u) { return vec2<f32>(rvk_inf(), 0.0f); }\n"
        "    if (bits > 0x7f800000u) { return vec2<f32>(rvk_nan(), 0.0f); }\n"
        "    var e = 0;\n"
        "    if (bits < 0x00800000u) { bits = bitcast<u32>(x * 8388608.0f); e = -23; }  // subnormal: scaled by 2^23\n"
        "    e = e + i32(bits >> 23u) - 127;\n"
        "    var m = bitcast<f32>((bits & 0x007fffffu) | 0x3f800000u);\n"
        "    if (m > 1.41421356f) { m = m * 0.5f; e = e + 1; }\n"
        "    return vec2<f32>(f32(e), rvk_atanh_series((m - 1.0f) / (m + 1.0f)));\n"
        "}"
    ),
    "rvk_log": (
        "fn rvk_log(x: f32) -> f32 {\n"
        "    let p = rvk_log_parts(x);\n"
        f"    return p.x * {_f32(_LN2_HI)} + (p.x * {_f32(_LN2_LO)} + p.y);\n"
        "}"
    ),
    "rvk_log2": f"fn rvk_log2(x: f32) -> f32 {{ let p = rvk_log_parts(x); return p.x + p.y * {_f32(1 / math.log(2))}; }}",
    "rvk_log10": (
        "fn rvk_log10(x: f32) -> f32 {\n"
        f"    let p = rvk_log_parts(x); return p.x * {_f32(math.log10(2))} + p.y * {_f32(1 / math.log(10))};\n"
        "}"
    ),
    "rvk_log1p": (
        "fn rvk_log1p(x: f32) -> f32 {\n"
        "    if (abs(x) < 0.41f) { return rvk_atanh_series(x / (2.0f + x)); }\n"
        "    return rvk_log(1.0f + x);  // (NaN, below -1 and infinities too)\n"
        "}"
    ),
    # ---- exponentials and hyperbolic functions
    "rvk_exp10": f"fn rvk_exp10(x: f32) -> f32 {{ return exp2(x * {_f32(math.log2(10))}); }}",
    "rvk_expm1": (
        "fn rvk_expm1(x: f32) -> f32 {\n"
        "    if (rvk_isnan(x)) { return x; }\n"
        f"    if (abs(x) < 0.7f) {{ return x * ({_horner('x', _EXPM1_SERIES)}); }}\n"
        "    return rvk_exp(x) - 1.0f;\n"
        "}"
    ),
    "rvk_tanh": (
        "fn rvk_tanh(x: f32) -> f32 {\n"
        "    if (rvk_isnan(x)) { return x; }\n"
        "    let a = abs(x);\n"
        "    var r = 1.0f;\n"
        "    if (a < 9.2f) { let t = rvk_expm1(2.0f * a); r = t / (t + 2.0f); }\n"
        "    return select(r, -r, x < 0.0f);\n"
        "}"
    ),
    "rvk_pow2i": (
        "fn rvk_pow2i(k: i32) -> f32 {\n"
        "    // 2^k for k in [-126, 127]\n"
        "    return bitcast<f32>(u32(k + 127) << 23u);\n"
        "}"
    ),
    "rvk_exp_scaled": (
        "fn rvk_exp_scaled(x: f32, k: i32) -> f32 {\n"
        "    // exp(x) * 2^k (k in {-1, 0}), overflowing only where the result does\n"
        "    if (rvk_isnan(x)) { return x; }\n"
        "    if (x > 100.0f) { return rvk_inf(); }\n"
        "    if (x < -110.0f) { return 0.0f; }\n"
        f"    let n = round(x * {_f32(1 / math.log(2))});\n"
        f"    let r = (x - n * {_f32(_LN2_HI)}) - n * {_f32(_LN2_LO)};  // exact: Cody & Waite\n"
        "    let m = i32(n) + k;\n"
        "    let m1 = m / 2;\n"
        "    return exp(r) * rvk_pow2i(m1) * rvk_pow2i(m - m1);\n"
        "}"
    ),
    "rvk_exp": "fn rvk_exp(x: f32) -> f32 { return rvk_exp_scaled(x, 0); }",
    "rvk_sinh": (
        "fn rvk_sinh(x: f32) -> f32 {\n"
        "    if (rvk_isnan(x)) { return x; }\n"
        "    let a = abs(x);\n"
        "    var r = rvk_exp_scaled(a, -1);\n"
        "    if (a <= 20.0f) { let t = rvk_expm1(a); r = 0.5f * (t + t / (t + 1.0f)); }\n"
        "    return select(r, -r, x < 0.0f);\n"
        "}"
    ),
    "rvk_cosh": (
        "fn rvk_cosh(x: f32) -> f32 {\n"
        "    if (rvk_isnan(x)) { return x; }\n"
        "    let a = abs(x);\n"
        "    if (a > 20.0f) { return rvk_exp_scaled(a, -1); }\n"
        "    let e = rvk_exp(a);\n"
        "    return 0.5f * (e + 1.0f / e);\n"
        "}"
    ),
    "rvk_asinh": (
        "fn rvk_asinh(x: f32) -> f32 {\n"
        "    if (rvk_isnan(x)) { return x; }\n"
        "    let a = abs(x);\n"
        f"    var r = rvk_log(a) + {_f32(math.log(2))};\n"
        "    if (a <= 4096.0f) { let a2 = a * a; r = rvk_log1p(a + a2 / (1.0f + sqrt(1.0f + a2))); }\n"
        "    return select(r, -r, x < 0.0f);\n"
        "}"
    ),
    "rvk_acosh": (
        "fn rvk_acosh(x: f32) -> f32 {\n"
        "    if (rvk_isnan(x) || x < 1.0f) { return rvk_nan(); }\n"
        f"    if (x > 4096.0f) {{ return rvk_log(x) + {_f32(math.log(2))}; }}\n"
        "    let t = x - 1.0f;\n"
        "    return rvk_log1p(t + sqrt(2.0f * t + t * t));\n"
        "}"
    ),
    "rvk_atanh": (
        "fn rvk_atanh(x: f32) -> f32 {\n"
        "    if (rvk_isnan(x)) { return x; }\n"
        "    let a = abs(x);\n"
        "    if (a > 1.0f) { return rvk_nan(); }\n"
        "    let r = 0.5f * rvk_log1p((a + a) / (1.0f - a));\n"
        "    return select(r, -r, x < 0.0f);\n"
        "}"
    ),
    # ---- inverse trigonometric functions
    "rvk_atan_unit": (
        "fn rvk_atan_unit(t: f32) -> f32 {\n"
        "    // atan(t) for t in [0, 1]\n"
        "    var u = t;\n"
        "    var base = 0.0f;\n"
        f"    if (t > {_f32(math.tan(_PI / 12))}) {{\n"
        f"        u = (t * {_f32(math.sqrt(3))} - 1.0f) / (t + {_f32(math.sqrt(3))});\n"
        f"        base = {_f32(_PI / 6)};\n"
        "    }\n"
        "    let z = u * u;\n"
        f"    return base + u * ({_horner('z', _ATAN_SERIES)});\n"
        "}"
    ),
    "rvk_atan": (
        "fn rvk_atan(x: f32) -> f32 {\n"
        "    if (rvk_isnan(x)) { return x; }\n"
        "    let a = abs(x);\n"
        f"    let r = select(rvk_atan_unit(a), {_f32(_PI / 2)} - rvk_atan_unit(1.0f / a), a > 1.0f);\n"
        "    return select(r, -r, x < 0.0f);\n"
        "}"
    ),
    "rvk_atan2": (
        "fn rvk_atan2(y: f32, x: f32) -> f32 {\n"
        "    if (rvk_isnan(x) || rvk_isnan(y)) { return rvk_nan(); }\n"
        "    var ax = abs(x);\n"
        "    var ay = abs(y);\n"
        "    if (rvk_isinf(ax) && rvk_isinf(ay)) { ax = 1.0f; ay = 1.0f; }\n"
        "    var r = 0.0f;\n"
        f"    if (ay > ax) {{ r = {_f32(_PI / 2)} - rvk_atan_unit(ax / ay); }}\n"
        "    else if (ay > 0.0f) { r = rvk_atan_unit(ay / ax); }\n"
        f"    r = select(r, {_f32(_PI)} - r, rvk_signbit(x));\n"
        "    return select(r, -r, rvk_signbit(y));\n"
        "}"
    ),
    "rvk_asin_half": (
        "fn rvk_asin_half(a: f32) -> f32 {\n"
        "    // asin(a) for a in [0, 1/2]\n"
        "    return rvk_atan_unit(a / sqrt((1.0f - a) * (1.0f + a)));\n"
        "}"
    ),
    "rvk_asin": (
        "fn rvk_asin(x: f32) -> f32 {\n"
        "    if (rvk_isnan(x)) { return x; }\n"
        "    let a = abs(x);\n"
        "    if (a > 1.0f) { return rvk_nan(); }\n"
        f"    let r = select({_f32(_PI / 2)} - 2.0f * rvk_asin_half(sqrt(0.5f * (1.0f - a))), rvk_asin_half(a), a <= 0.5f);\n"
        "    return select(r, -r, x < 0.0f);\n"
        "}"
    ),
    "rvk_acos": (
        "fn rvk_acos(x: f32) -> f32 {\n"
        "    if (rvk_isnan(x)) { return x; }\n"
        "    let a = abs(x);\n"
        "    if (a > 1.0f) { return rvk_nan(); }\n"
        f"    let r = select(2.0f * rvk_asin_half(sqrt(0.5f * (1.0f - a))), {_f32(_PI / 2)} - rvk_asin_half(a), a <= 0.5f);\n"
        f"    return select(r, {_f32(_PI)} - r, x < 0.0f);\n"
        "}"
    ),
    # ---- trigonometric functions
    "rvk_reduce_half_pi": (
        "fn rvk_reduce_half_pi(a: f32) -> vec2<f32> {\n"
        "    // a >= 0 finite: a = (q + t) pi/2, q an integer, |t| <= 1/2; returns (t pi/2, q mod 4).\n"
        "    // Payne & Hanek: a = m 2^s (m of 24 bits); a 2/pi mod 4 = 4 frac(m F), F the 72 bits of 2/pi\n"
        "    // from bit s - 1 on (the bits before add multiples of 4), as 12-bit limbs in u32 arithmetic\n"
        f"    if (a <= {_f32(_PI / 4)}) {{ return vec2<f32>(a, 0.0f); }}\n"
        f"    var limbs = array<u32, {len(_TWO_OVER_PI)}>({', '.join(f'{v}u' for v in _TWO_OVER_PI)});\n"
        "    let bits = bitcast<u32>(a);\n"
        "    let m = (bits & 0x7fffffu) | 0x800000u;\n"
        "    let p = i32(bits >> 23u) - 116;  // the window's first bit, s - 1 = e - 24, after the 36 zero bits leading the table\n"
        "    let j = p / 12;\n"
        "    let rho = u32(p % 12);\n"
        "    var f: array<u32, 6>;\n"
        "    for (var k = 0; k < 6; k++) {\n"
        "        f[k] = ((limbs[j + k] << rho) | (limbs[j + k + 1] >> (12u - rho))) & 0xfffu;\n"
        "    }\n"
        "    let m1 = m >> 12u;\n"
        "    let m0 = m & 0xfffu;\n"
        "    var v = m0 * f[5];\n"
        "    let l6 = v & 0xfffu;\n"
        "    v = (v >> 12u) + m1 * f[5] + m0 * f[4];\n"
        "    let l5 = v & 0xfffu;\n"
        "    v = (v >> 12u) + m1 * f[4] + m0 * f[3];\n"
        "    let l4 = v & 0xfffu;\n"
        "    v = (v >> 12u) + m1 * f[3] + m0 * f[2];\n"
        "    let l3 = v & 0xfffu;\n"
        "    v = (v >> 12u) + m1 * f[2] + m0 * f[1];\n"
        "    let l2 = v & 0xfffu;\n"
        "    v = (v >> 12u) + m1 * f[1] + m0 * f[0];\n"
        "    let l1 = v & 0xfffu;\n"
        "    // 4 frac(m F) in units of 2^-30, rounded to the nearest quadrant (mod 2^32 is mod 4)\n"
        "    let y = ((l1 << 20u) | (l2 << 8u) | (l3 >> 4u)) + 0x20000000u;\n"
        "    let rest = f32(((l3 & 0xfu) << 12u) | l4) * 0.0000152587890625f + f32(l5) * 3.7252902984e-09f;\n"
        "    let t = f32(i32(y & 0x3fffffffu) - 0x20000000) + rest;\n"
        f"    return vec2<f32>(t * {_f32(_PI / 2 / 2**30)}, f32(y >> 30u));\n"
        "}"
    ),
    "rvk_sin_poly": (
        "fn rvk_sin_poly(r: f32) -> f32 {\n"
        "    let z = r * r;\n"
        f"    return r * ({_horner('z', _SIN_SERIES)});\n"
        "}"
    ),
    "rvk_cos_poly": f"fn rvk_cos_poly(r: f32) -> f32 {{ let z = r * r; return {_horner('z', _COS_SERIES)}; }}",
    "rvk_sin": (
        "fn rvk_sin(x: f32) -> f32 {\n"
        "    if (!rvk_isfinite(x)) { return rvk_nan(); }\n"
        "    let rq = rvk_reduce_half_pi(abs(x));\n"
        "    let q = u32(rq.y);\n"
        "    let v = select(rvk_sin_poly(rq.x), rvk_cos_poly(rq.x), (q & 1u) == 1u);\n"
        "    return select(v, -v, ((q & 2u) == 2u) != (x < 0.0f));\n"
        "}"
    ),
    "rvk_cos": (
        "fn rvk_cos(x: f32) -> f32 {\n"
        "    if (!rvk_isfinite(x)) { return rvk_nan(); }\n"
        "    let rq = rvk_reduce_half_pi(abs(x));\n"
        "    let q = u32(rq.y);\n"
        "    let v = select(rvk_cos_poly(rq.x), rvk_sin_poly(rq.x), (q & 1u) == 1u);\n"
        "    return select(v, -v, ((q + 1u) & 2u) == 2u);\n"
        "}"
    ),
    "rvk_tan": (
        "fn rvk_tan(x: f32) -> f32 {\n"
        "    if (!rvk_isfinite(x)) { return rvk_nan(); }\n"
        "    let rq = rvk_reduce_half_pi(abs(x));\n"
        "    let s = rvk_sin_poly(rq.x);\n"
        "    let c = rvk_cos_poly(rq.x);\n"
        "    let v = select(s / c, -c / s, (u32(rq.y) & 1u) == 1u);\n"
        "    return select(v, -v, x < 0.0f);\n"
        "}"
    ),
    # ---- special functions
    "rvk_erf": (
        "fn rvk_erf(x: f32) -> f32 {\n"
        "    if (rvk_isnan(x)) { return x; }\n"
        "    let a = abs(x);\n"
        f"    if (a < 1.0f) {{ let z = x * x; return x * ({_horner('z', _ERF_SERIES)}); }}\n"
        "    // Abramowitz & Stegun 7.1.26 (max abs error 1.5e-7)\n"
        "    let t = 1.0f / (1.0f + 0.3275911f * a);\n"
        "    let poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));\n"
        "    let r = 1.0f - poly * rvk_exp(-a * a);\n"
        "    return select(r, -r, x < 0.0f);\n"
        "}"
    ),
    "rvk_pow": (
        "fn rvk_pow(x: f32, y: f32) -> f32 {\n"
        "    if (y == 0.0f || x == 1.0f) { return 1.0f; }\n"
        "    if (rvk_isnan(x) || rvk_isnan(y)) { return rvk_nan(); }\n"
        "    let a = abs(x);\n"
        "    var r = 0.0f;\n"
        "    if (a == 0.0f) { r = select(0.0f, rvk_inf(), y < 0.0f); }\n"
        "    else if (a == 1.0f) { r = 1.0f; }  // (-1)^(+-inf) = 1\n"
        "    else if (rvk_isinf(a)) { r = select(0.0f, rvk_inf(), y > 0.0f); }\n"
        "    else if (rvk_isinf(y)) { r = select(0.0f, rvk_inf(), (a > 1.0f) == (y > 0.0f)); }\n"
        "    else {\n"
        "        // y log2(a) = y e + y log2(m): y e exactly (y split into 12-bit halves by its bits), so only\n"
        "        // the second part's rounding (2^-24 |y log2 m|) reaches the result; then exp2 of what is\n"
        "        // left after the integer part, scaled in three steps\n"
        "        let lp = rvk_log_parts(a);\n"
        "        let yh = bitcast<f32>(bitcast<u32>(y) & 0xfffff000u);\n"
        "        let eh = yh * lp.x;\n"
        "        let k = round(eh);\n"
        f"        let t = ((eh - k) + (y - yh) * lp.x) + y * lp.y * {_f32(1 / math.log(2))};\n"
        "        let kt = round(t);\n"
        "        let total = k + kt;\n"
        "        if (total > 260.0f) { r = rvk_inf(); }\n"
        "        else if (total < -280.0f) { r = 0.0f; }\n"
        "        else {\n"
        "            let n = i32(total);\n"
        "            let n1 = n / 3;\n"
        "            let n2 = (n - n1) / 2;\n"
        "            r = exp2(t - kt) * rvk_pow2i(n1) * rvk_pow2i(n2) * rvk_pow2i(n - n1 - n2);\n"
        "        }\n"
        "    }\n"
        "    if (!rvk_signbit(x) || rvk_isinf(y)) { return r; }\n"
        "    if (floor(y) != y) { return select(rvk_nan(), r, a == 0.0f); }  // a negative base to a fractional power\n"
        "    let odd = abs(y) < 16777216.0f && floor(0.5f * y) != 0.5f * y;\n"
        "    return select(r, -r, odd);\n"
        "}"
    ),
}

_CALLS = re.compile(r"\b(rvk_\w+)\(")


def helper_closure(names: Iterable[str]) -> List[str]:
    """``names`` and every helper they call, transitively, sorted (the definitions a shader needs)."""
    seen: Set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(_CALLS.findall(HELPERS[name]))
    return sorted(seen)
