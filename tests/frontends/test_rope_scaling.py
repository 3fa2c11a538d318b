"""relax_vk.frontends.rope_scaling: each ``rope_scaling`` kind's inverse frequencies and attention
factor equal transformers' own (``modeling_rope_utils``), from the configs the decoder tests
build end to end, and more: yarn's optional fields, ``dynamic`` within its bound, partial ``beta``s."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from relax_vk.frontends.hf_decoder import DecoderConfig  # noqa: E402
from relax_vk.frontends.rope_scaling import rotary_frequencies  # noqa: E402

BASE = dict(vocab_size=160, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=256)  # fmt: skip
CONFIGS = {
    "default": (transformers.LlamaConfig, dict(rope_theta=10000.0)),
    "linear (older key type)": (transformers.Qwen2Config, dict(rope_scaling={"type": "linear", "factor": 3.0})),
    "llama3": (transformers.LlamaConfig, dict(rope_theta=500000.0, rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 16})),
    "yarn": (transformers.Qwen3Config, dict(head_dim=32, rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32})),
    "yarn, its betas and mscale": (transformers.Qwen3Config, dict(head_dim=64, rope_theta=1e6, rope_scaling={
        "rope_type": "yarn", "factor": 8.0, "beta_fast": 16.0, "beta_slow": 2.0, "mscale": 0.8, "mscale_all_dim": 0.5,
        "original_max_position_embeddings": 64})),
    "dynamic": (transformers.LlamaConfig, dict(rope_scaling={"rope_type": "dynamic", "factor": 2.0})),
    # Phi-4-mini's kind: LongRoPE's short factors over the rotary three quarters of a head
    "longrope, partial": (transformers.Phi3Config, dict(partial_rotary_factor=0.75, original_max_position_embeddings=64, rope_scaling={
        "type": "longrope", "short_factor": [1.0 + 0.3 * i for i in range(6)], "long_factor": [2.0 + i for i in range(6)]})),
    "longrope, its attention factor": (transformers.LlamaConfig, dict(rope_scaling={
        "rope_type": "longrope", "short_factor": [1.1] * 8, "long_factor": [3.0] * 8, "attention_factor": 1.3, "factor": 2.0})),
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_frequencies_equal_transformers(kind):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    cls, extra = CONFIGS[kind]
    config = cls(**BASE, **extra)
    ours = DecoderConfig.from_dict(config.to_dict())
    inv_freq, factor = ours.rotary_frequencies()
    assert ours.rotary == int(ours.head_dim * getattr(config, "partial_rotary_factor", 1.0))
    scaling = config.rope_scaling or {}
    want, want_factor = ROPE_INIT_FUNCTIONS[scaling.get("rope_type", scaling.get("type", "default"))](config, "cpu")
    assert inv_freq.dtype == np.float32 and inv_freq.shape == want.shape
    # (within 2 ulp: transformers' float32 powers and divisions round in their own order)
    np.testing.assert_array_max_ulp(inv_freq, want.numpy().astype(np.float32), maxulp=2)
    assert factor == pytest.approx(float(want_factor), rel=1e-6)
    if kind != "default" and kind != "dynamic":  # (the scaling is not a no-op here)
        assert not np.allclose(inv_freq, rotary_frequencies(ours.rotary, ours.rope_theta, None, ours.max_positions)[0])


@pytest.mark.parametrize("arch, extra, window, sliding", [
    ("mistral", dict(sliding_window=8), 8, (0, 1, 2)),  # Mistral: every layer
    ("mistral", dict(sliding_window=None), None, ()),
    ("qwen2", dict(sliding_window=8, use_sliding_window=True, max_window_layers=1), 8, (1, 2)),  # Qwen: from max_window_layers on
    ("qwen2", dict(sliding_window=8, use_sliding_window=False), None, ()),
    ("gemma3", dict(sliding_window=8, sliding_window_pattern=2), 8, (0, 2)),  # Gemma 3: all but every pattern-th
    ("gemma3", dict(sliding_window=8, layer_types=["full_attention", "sliding_attention", "full_attention"]), 8, (1,)),
    ("gemma2", dict(sliding_window=8), 8, (0, 2)),  # Gemma 2: every other layer from the first
])  # fmt: skip
def test_the_sliding_layers_are_transformers(arch, extra, window, sliding):
    """Which layers attend through the window, and the window, as transformers reads the config
    (its ``layer_types``, which each config class derives from the older fields)."""
    cls = {"mistral": transformers.MistralConfig, "qwen2": transformers.Qwen2Config, "gemma2": transformers.Gemma2Config,
           "gemma3": transformers.Gemma3TextConfig}[arch]  # fmt: skip
    config = cls(**{**BASE, "num_hidden_layers": 3}, **extra)
    ours = DecoderConfig.from_dict(config.to_dict())
    assert (ours.sliding_window, ours.sliding_layers) == (window, sliding)
    types = getattr(config, "layer_types", None)
    if types is not None and window is not None:
        assert tuple(i for i, t in enumerate(types) if t == "sliding_attention") == sliding
    # without layer_types in the dict, the older fields give the same layers
    raw = {k: v for k, v in config.to_dict().items() if k != "layer_types"}
    if arch != "gemma3" or "sliding_window_pattern" in extra:
        assert DecoderConfig.from_dict(raw).sliding_layers == sliding
