"""Text in and out of a decoder: the checkpoint's own tokenizer (``tokenizer.json`` and its config
beside ``config.json``), read by ``transformers`` (the ``relax_vk[llm]`` extra).

``relax-vk generate --prompt TEXT`` encodes the prompt as ``transformers`` does by default (the
special tokens the tokenizer adds, a BOS for Llama), or with ``--chat`` as one user turn of the
checkpoint's chat template followed by the assistant's prompt; the new tokens are decoded with
special tokens skipped. The ids are what the model runs; the text is for people.
"""

from __future__ import annotations

import os
from typing import List, Sequence

from ..core.errors import UnsupportedError

#: files of which one marks a directory holding a tokenizer
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json")


def has_tokenizer(path: str) -> bool:
    """Whether ``path`` is a directory with a tokenizer's files."""
    return os.path.isdir(path) and any(os.path.exists(os.path.join(path, f)) for f in TOKENIZER_FILES)


def load_tokenizer(path: str):
    """The tokenizer of the checkpoint directory ``path`` (``transformers.AutoTokenizer``, local
    files only: nothing is downloaded)."""
    if not has_tokenizer(path):
        raise UnsupportedError(f"{path}: no tokenizer ({', '.join(TOKENIZER_FILES)}); give --tokenizer DIR or the ids (--prompt-ids)")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise UnsupportedError("text prompts need transformers (pip install 'relax_vk[llm]'); or give the ids (--prompt-ids)") from None
    try:
        return AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as err:
        raise UnsupportedError(f"{path}: its tokenizer does not load: {err}") from None


def encode(tokenizer, text: str, chat: bool = False) -> List[int]:
    """The ids of ``text`` (``chat``: as one user turn of the chat template, the assistant's turn
    opened)."""
    if chat:
        if not getattr(tokenizer, "chat_template", None):
            raise UnsupportedError("--chat: this tokenizer has no chat template (chat_template in its tokenizer_config.json)")
        ids = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True)
    else:
        ids = tokenizer(text)["input_ids"]
    ids = [int(i) for i in ids]
    if not ids:
        raise ValueError(f"the prompt {text!r} encodes to no tokens")
    return ids


def decode(tokenizer, ids: Sequence[int]) -> str:
    """``ids`` as text, special tokens skipped."""
    return tokenizer.decode(list(ids), skip_special_tokens=True)
