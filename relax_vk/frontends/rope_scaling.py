"""RoPE's inverse frequencies as a Hugging Face ``config.json`` asks for them (``rope_scaling``).

A decoder's rotary angles are ``position * inv_freq``; scaled RoPE changes ``inv_freq`` (and, for
YaRN, multiplies ``cos`` and ``sin`` by an attention factor). Both are constants of the checkpoint,
so the program carries them as constants and nothing else changes. The arithmetic follows
transformers' ``modeling_rope_utils`` (float32, as its ``torch`` code computes it):

* ``default`` (or no ``rope_scaling``): ``1 / theta ** (2i / d)``;
* ``linear``: divided by ``factor`` (position interpolation);
* ``llama3`` (Llama 3.1 / 3.2): long wavelengths divided by ``factor``, short ones kept, the band
  between smoothed;
* ``yarn``: interpolated and extrapolated frequencies blended over a ramp, and the attention
  factor;
* ``dynamic`` (dynamic NTK): transformers changes the frequencies only once a sequence passes
  ``max_position_embeddings``; the cache bound never does (``build_decoder`` refuses a longer
  one), so within it the frequencies are the default ones;
* ``longrope`` (Phi-3.5, Phi-4-mini): each frequency divided by its ``short_factor``, and the
  attention factor. transformers switches to ``long_factor`` once a sequence passes
  ``original_max_position_embeddings``, for the new tokens only (the cached keys keep their
  rotation); ``DecoderConfig.position_bound`` holds the cache bound within the short factors.

Every kind rotates the first ``dim`` values of a head (``partial_rotary_factor`` times
``head_dim``: transformers' ``rotary_ndims``), as transformers computes them. Anything else is
refused by name: :class:`relax_vk.core.errors.UnsupportedError`.
"""

from __future__ import annotations

import math
from typing import Mapping, Optional, Tuple

import numpy as np

from ..core.errors import UnsupportedError

#: the ``rope_type`` values :func:`rotary_frequencies` computes
SUPPORTED = ("default", "linear", "llama3", "yarn", "dynamic", "longrope")


def rope_type(scaling: Optional[Mapping]) -> str:
    """The ``rope_type`` of a ``rope_scaling`` dict (older configs name it ``type``)."""
    if not scaling:
        return "default"
    return str(scaling.get("rope_type") or scaling.get("type") or "default")


def check(scaling: Optional[Mapping], dim: int, where: str) -> None:
    """Refuse, naming the field, what :func:`rotary_frequencies` cannot compute for RoPE over
    ``dim`` values of a head."""
    kind = rope_type(scaling)
    if kind not in SUPPORTED:
        raise UnsupportedError(f"{where}: rope_scaling {dict(scaling)} is not supported (rope_type one of {', '.join(SUPPORTED)})")
    needs = {"linear": ("factor",), "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
             "yarn": ("factor",), "dynamic": ("factor",), "longrope": ("short_factor", "long_factor")}.get(kind, ())  # fmt: skip
    missing = [key for key in needs if scaling.get(key) is None]
    if missing:
        raise UnsupportedError(f"{where}: rope_scaling of type {kind!r} lacks {', '.join(missing)}")
    if kind == "longrope":
        for key in ("short_factor", "long_factor"):
            if not isinstance(scaling[key], (list, tuple)) or len(scaling[key]) != dim // 2:
                raise UnsupportedError(f"{where}: rope_scaling {key} has {len(scaling[key]) if isinstance(scaling[key], (list, tuple)) else 'no'} "
                                       f"values; the rotary dims ({dim}) take {dim // 2}")  # fmt: skip
    if kind == "llama3" and float(scaling["high_freq_factor"]) == float(scaling["low_freq_factor"]):
        raise UnsupportedError(f"{where}: rope_scaling llama3 with high_freq_factor equal to low_freq_factor divides by zero")


def rotary_frequencies(dim: int, theta: float, scaling: Optional[Mapping], max_positions: int,
                       original_max_positions: Optional[int] = None) -> Tuple[np.ndarray, float]:
    """``(inv_freq [dim / 2] float32, attention factor)`` for a checked ``scaling`` (:func:`check`)
    over ``dim`` rotary values; ``max_positions`` is the config's ``max_position_embeddings`` and
    ``original_max_positions`` its ``original_max_position_embeddings`` (Phi-3's, longrope's)."""
    exponents = (np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)).astype(np.float32)
    inv_freq = (1.0 / (theta**exponents)).astype(np.float32)
    kind = rope_type(scaling)
    if kind in ("default", "dynamic"):
        return inv_freq, 1.0
    if kind == "longrope":
        return _longrope(exponents, float(theta), scaling, max_positions, original_max_positions)
    factor = float(scaling["factor"])
    if kind == "linear":
        return (inv_freq / np.float32(factor)).astype(np.float32), 1.0
    if kind == "llama3":
        return _llama3(inv_freq, factor, scaling), 1.0
    return _yarn(dim, float(theta), factor, scaling, max_positions)


def _longrope(exponents: np.ndarray, base: float, scaling: Mapping, max_positions: int, original: Optional[int]) -> Tuple[np.ndarray, float]:
    """The short factors' frequencies (a sequence within ``original_max_position_embeddings``) and
    the attention factor, as transformers' ``_compute_longrope_parameters``."""
    factor = scaling.get("factor")
    if original:  # (Phi-3: the factor is the ratio of the two lengths)
        factor = max_positions / original
    else:
        original = max_positions
    attention = scaling.get("attention_factor")
    if attention is None:
        attention = 1.0 if factor is None or float(factor) <= 1.0 else math.sqrt(1 + math.log(float(factor)) / math.log(original))
    short = np.asarray(scaling["short_factor"], np.float32)
    pos_freqs = (np.float32(base) ** exponents).astype(np.float32)
    return (np.float32(1.0) / (short * pos_freqs)).astype(np.float32), float(attention)


def _llama3(inv_freq: np.ndarray, factor: float, scaling: Mapping) -> np.ndarray:
    low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    old = float(scaling["original_max_position_embeddings"])
    wavelen = (np.float32(2 * math.pi) / inv_freq).astype(np.float32)
    scaled = np.where(wavelen > old / low, inv_freq / np.float32(factor), inv_freq).astype(np.float32)
    smooth = ((np.float32(old) / wavelen - np.float32(low)) / np.float32(high - low)).astype(np.float32)
    smoothed = ((1 - smooth) * scaled / np.float32(factor) + smooth * scaled).astype(np.float32)
    medium = ~(wavelen < old / high) & ~(wavelen > old / low)
    return np.where(medium, smoothed, scaled).astype(np.float32)


def _yarn(dim: int, base: float, factor: float, scaling: Mapping, max_positions: int) -> Tuple[np.ndarray, float]:
    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention = scaling.get("attention_factor")
    if attention is None:
        m, m_all = scaling.get("mscale"), scaling.get("mscale_all_dim")
        attention = mscale(factor, m) / mscale(factor, m_all) if m and m_all else mscale(factor)
    beta_fast, beta_slow = scaling.get("beta_fast") or 32, scaling.get("beta_slow") or 1
    original = scaling.get("original_max_position_embeddings") or max_positions

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # (transformers' guard against a zero-width ramp)
    ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - np.float32(low)) / np.float32(high - low), 0, 1).astype(np.float32)
    pos_freqs = (np.float32(base) ** (np.arange(0, dim, 2).astype(np.float32) / np.float32(dim))).astype(np.float32)
    extrapolation, interpolation = np.float32(1.0) / pos_freqs, np.float32(1.0) / (np.float32(factor) * pos_freqs)
    keep = (1 - ramp).astype(np.float32)  # (transformers' "extrapolation factor")
    return (interpolation * (1 - keep) + extrapolation * keep).astype(np.float32), float(attention)
