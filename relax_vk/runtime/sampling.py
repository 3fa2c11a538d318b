"""Choosing the next token from a decoder's logits: greedy, or sampled as transformers'
``generate(do_sample=True, ...)`` processes the scores (its logits warpers, in its order).

:class:`Sampler` applies, to one step's logits ``[V]`` (float32, as the artifact returns them):

1. ``temperature``: the logits divided by it (``TemperatureLogitsWarper``);
2. ``top_k``: every logit below the ``k``-th largest masked (``TopKLogitsWarper``; ties kept);
3. ``top_p``: the smallest set of largest-probability tokens whose probabilities sum past ``top_p``
   kept, the rest masked (``TopPLogitsWarper``: the tokens whose ascending cumulative probability
   is at most ``1 - top_p`` go; at least one stays);
4. a softmax in float64, and one draw from numpy's ``Generator`` seeded with ``seed``.

``temperature == 0`` is greedy (the arg-max, the first of equal largest logits, as ``np.argmax``),
whatever ``top_k`` and ``top_p`` say. The same seed and logits give the same tokens; the draws are
numpy's, so a run does not reproduce transformers' (torch's) random tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np


@dataclass
class Sampler:
    """How the next token is chosen (module docstring). Checked on construction (ValueError)."""

    temperature: float = 0.0
    top_k: Optional[int] = None
    top_p: Optional[float] = None
    seed: Optional[int] = None
    _rng: np.random.Generator = field(init=False, repr=False)

    def __post_init__(self):
        if not self.temperature >= 0.0:
            raise ValueError(f"temperature {self.temperature}: 0 (greedy) or more")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k {self.top_k}: at least 1")
        if self.top_p is not None and not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p {self.top_p}: in (0, 1]")
        self._rng = np.random.default_rng(self.seed)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def to_json(self) -> dict:
        return {"temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p, "seed": self.seed}

    def scores(self, logits: np.ndarray) -> np.ndarray:
        """The processed scores of one step's ``logits`` [V] (steps 1-3; ``-inf`` where masked)."""
        scores = np.asarray(logits, np.float32) / np.float32(self.temperature)
        if self.top_k is not None and self.top_k < scores.size:
            kth = np.partition(scores, -self.top_k)[-self.top_k]
            scores = np.where(scores < kth, np.float32(-np.inf), scores)
        if self.top_p is not None and self.top_p < 1.0:
            order = np.argsort(scores, kind="stable")  # ascending, as transformers sorts
            probs = _softmax(scores[order])
            drop = np.cumsum(probs) <= 1.0 - self.top_p
            drop[-1] = False  # (the most likely token stays)
            scores = scores.copy()
            scores[order[drop]] = -np.inf
        return scores

    def pick(self, logits: np.ndarray) -> int:
        """The next token of one step's ``logits`` [V]."""
        scores = None if self.greedy else self.scores(logits)
        if scores is None or not np.isfinite(scores.max()):  # (greedy, or a temperature so small the largest logit overflows)
            return int(np.argmax(logits))
        probs = _softmax(scores)
        return int(self._rng.choice(probs.size, p=probs))


def _softmax(scores: np.ndarray) -> np.ndarray:
    x = scores.astype(np.float64)
    x = np.exp(x - np.max(x))
    return x / x.sum()
