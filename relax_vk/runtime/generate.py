"""Text generation (greedy, or sampled: :mod:`relax_vk.runtime.sampling`) with a decoder artifact (:mod:`relax_vk.frontends.hf_decoder`): prefill
the prompt, then one token per run, the key/value cache kept on the device as the model's states.

Needs numpy and the native library only (no TVM). A prompt longer than the artifact's ``S`` bound is
prefilled in chunks; the cache holds ``T`` (``max_len``) tokens, and a generation that would pass it
is refused before it starts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence

import numpy as np

from .sampling import Sampler
from .session import Session


@dataclass
class Generation:
    """What :meth:`Generator.generate` made: the new ``tokens``, the prompt's length, the seconds the
    prefill (every prompt chunk, and the first token's logits) and the decode runs took, and, when
    asked for, the logits of every step (``[V]`` each: the prompt's last position, then each new
    token's)."""

    tokens: List[int]
    prompt_tokens: int
    prefill_seconds: float
    decode_seconds: float
    decode_runs: int
    logits: List[np.ndarray] = field(default_factory=list)
    #: "length" (``new_tokens`` made) or "stop" (the last token is one of the stop tokens)
    finish_reason: str = "length"

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prompt_tokens / self.prefill_seconds if self.prefill_seconds > 0 else float("nan")

    @property
    def decode_tokens_per_s(self) -> float:
        return self.decode_runs / self.decode_seconds if self.decode_seconds > 0 and self.decode_runs else float("nan")

    def to_json(self) -> dict:
        """The stable ``--json`` record of ``relax-vk generate``."""
        return {"tokens": list(self.tokens), "prompt_tokens": self.prompt_tokens, "prefill_tokens_per_s": _number(self.prefill_tokens_per_s),
                "decode_tokens_per_s": _number(self.decode_tokens_per_s), "prefill_seconds": self.prefill_seconds,
                "decode_seconds": self.decode_seconds, "finish_reason": self.finish_reason}  # fmt: skip


def _number(v: float) -> Optional[float]:
    return None if v != v else float(v)


class Generator:
    """Drives a decoder session: ``forward(ids)`` runs the next tokens and returns their logits
    (``[len(ids), V]``; an artifact built with ``logits="last"``: each chunk's last token's,
    ``[chunks, V]``); ``length`` is the tokens the cache holds; ``reset()`` starts a new sequence."""

    def __init__(self, session: Session):
        names = [i["name"] for i in session.inputs]
        if names != ["input_ids", "attention_mask"] or not session.states or "S" not in session.dims or "T" not in session.dims:
            raise ValueError(f"not a decoder artifact (inputs {names}, states {session.states}, dims {session.dims}); "
                             "build one from a checkpoint directory: relax-vk build MODEL_DIR -o model.rvk")  # fmt: skip
        self.session = session
        self.max_prompt = session.dims["S"][1]
        self.max_len = session.dims["T"][1]
        self.vocab = int(session.outputs[0]["shape"][-1])
        self.length = 0

    def reset(self) -> None:
        self.session.reset_states()
        self.length = 0

    def forward(self, ids: Sequence[int]) -> np.ndarray:
        """Logits ``[len(ids), V]`` of the next tokens ``ids`` (chunks of at most ``S`` tokens)."""
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab]
        if bad:
            raise ValueError(f"token id {bad[0]} is outside the vocabulary (0..{self.vocab - 1})")
        if self.length + len(ids) > self.max_len:
            raise ValueError(f"{self.length} + {len(ids)} tokens pass the cache's {self.max_len} (the artifact's T bound; rebuild with a larger --dim T)")
        out = []
        for start in range(0, len(ids), self.max_prompt):
            chunk = ids[start : start + self.max_prompt]
            total = self.length + len(chunk)
            logits = self.session.run([np.array([chunk], np.int32), np.ones((1, total), np.int64)])[0]
            self.length = total
            out.append(logits[0])
        return np.concatenate(out) if out else np.zeros((0, self.vocab), np.float32)

    def generate(self, prompt: Sequence[int], new_tokens: int, keep_logits: bool = False, stop_tokens: Sequence[int] = (),
                 sampler: Optional[Sampler] = None, on_token: Optional[Callable[[int], None]] = None) -> Generation:  # fmt: skip
        """``new_tokens`` tokens after ``prompt``, from a fresh cache, each the arg-max of its
        logits or ``sampler``'s pick; with ``stop_tokens``, fewer when one of them is made (it ends
        ``tokens``, as transformers' ``generate`` keeps its end-of-sequence token). ``on_token`` is
        called with each token as it is made (streaming; its time counts in the decode's)."""
        pick = (sampler or Sampler()).pick  # (the default sampler is greedy)

        def take(logits: np.ndarray) -> None:
            tokens.append(pick(logits))
            if on_token is not None:
                on_token(tokens[-1])

        if not prompt:
            raise ValueError("the prompt has no tokens")
        if new_tokens < 1:
            raise ValueError(f"new_tokens must be at least 1, not {new_tokens}")
        if len(prompt) + new_tokens - 1 > self.max_len:
            raise ValueError(f"a prompt of {len(prompt)} and {new_tokens} new tokens need {len(prompt) + new_tokens - 1} cache rows; "
                             f"the artifact holds {self.max_len} (rebuild with a larger --dim T)")  # fmt: skip
        self.reset()
        start = time.perf_counter()
        last = self.forward(prompt)[-1]
        prefill = time.perf_counter() - start
        kept = [last] if keep_logits else []
        tokens: List[int] = []
        take(last)
        stops = {int(t) for t in stop_tokens}
        start = time.perf_counter()
        while len(tokens) < new_tokens and tokens[-1] not in stops:
            last = self.forward(tokens[-1:])[-1]
            if keep_logits:
                kept.append(last)
            take(last)
        decode = time.perf_counter() - start
        return Generation(tokens, len(prompt), prefill, decode, len(tokens) - 1, kept, "stop" if tokens[-1] in stops else "length")
