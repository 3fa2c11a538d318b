"""relax_vk.runtime.sampling: the scores equal transformers' logits warpers (temperature, top-k,
top-p, in its order), the draws follow the kept probabilities, a seed repeats its tokens, and
temperature 0 is the arg-max."""

import numpy as np
import pytest

from relax_vk.runtime.sampling import Sampler


def test_temperature_zero_is_the_arg_max_whatever_else_is_set():
    logits = np.random.default_rng(0).standard_normal(300).astype(np.float32)
    assert Sampler(0.0, top_k=5, top_p=0.5, seed=3).pick(logits) == int(np.argmax(logits))
    assert Sampler(0.7, top_k=1, seed=3).pick(logits) == int(np.argmax(logits))
    # a temperature so small that the largest logits overflow to inf: the arg-max, not NaN probabilities
    with np.errstate(over="ignore", invalid="ignore"):
        assert Sampler(1e-38, seed=3).pick(logits) == int(np.argmax(logits))


@pytest.mark.parametrize("temperature, top_k, top_p", [(0.7, None, None), (1.3, 20, None), (0.9, None, 0.8), (0.6, 40, 0.5), (1.0, 1000, 0.95)])
def test_scores_equal_transformers_warpers(temperature, top_k, top_p):
    torch = pytest.importorskip("torch")
    generation = pytest.importorskip("transformers.generation.logits_process")
    logits = np.random.default_rng(1).standard_normal((1, 500)).astype(np.float32) * 3
    warpers = generation.LogitsProcessorList([generation.TemperatureLogitsWarper(temperature)])
    if top_k is not None:
        warpers.append(generation.TopKLogitsWarper(top_k))
    if top_p is not None:
        warpers.append(generation.TopPLogitsWarper(top_p))
    want = warpers(torch.zeros((1, 1), dtype=torch.long), torch.from_numpy(logits)).numpy()[0]
    got = Sampler(temperature, top_k, top_p).scores(logits[0])
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))  # the same tokens kept
    np.testing.assert_allclose(got[~np.isinf(got)], want[~np.isinf(want)], rtol=1e-6)


def test_draws_follow_the_kept_probabilities_and_a_seed_repeats_them():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05], np.float32))
    sampler = Sampler(1.0, top_k=3, seed=7)
    draws = np.array([sampler.pick(logits) for _ in range(20000)])
    freq = np.bincount(draws, minlength=4) / draws.size
    np.testing.assert_allclose(freq[:3], np.array([0.5, 0.3, 0.15]) / 0.95, atol=0.015)
    assert freq[3] == 0  # (outside the top 3)
    again = Sampler(1.0, top_k=3, seed=7)
    assert [again.pick(logits) for _ in range(50)] == draws[:50].tolist()


@pytest.mark.parametrize("kwargs, message", [({"temperature": -1.0}, "temperature -1.0"), ({"temperature": 1.0, "top_k": 0}, "top_k 0"),
                                             ({"temperature": 1.0, "top_p": 0.0}, "top_p 0.0"), ({"temperature": 1.0, "top_p": 1.5}, "top_p 1.5")])  # fmt: skip
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Sampler(**kwargs)
