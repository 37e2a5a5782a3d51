"""Token counting for any Hugging Face tokenizer (object or local path) without special tokens."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Protocol


class TokenCounter(Protocol):
    name: str
    fingerprint: str

    def __call__(self, text: str) -> int: ...


class HFTokenCounter:
    """Counts tokens as RULER does (``tokenize()``, no BOS) using the fast backend when there is one."""

    def __init__(self, tokenizer: Any) -> None:
        if isinstance(tokenizer, str | Path):
            tokenizer = load_tokenizer(tokenizer)
        self.tokenizer = tokenizer
        self.name = str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None and hasattr(tokenizer, "encode_batch"):  # a raw ``tokenizers.Tokenizer``
            backend = tokenizer
        self._backend = backend
        self.fingerprint = _fingerprint(tokenizer, backend)

    def __call__(self, text: str) -> int:
        if self._backend is not None:
            return len(self._backend.encode(text, add_special_tokens=False).ids)
        return len(self.tokenizer.encode(text, add_special_tokens=False))


def load_tokenizer(path: str | Path) -> Any:
    """A tokenizer from a local folder, a ``tokenizer.json`` file, or a Hugging Face id."""
    p = Path(path)
    if p.suffix == ".json" and p.is_file():
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast(tokenizer_file=str(p))
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path))
    except OSError as err:
        raise FileNotFoundError(
            f"cannot load tokenizer {path!r}: not a local tokenizer folder and the hub is unreachable "
            f"or the id is wrong. Pass a local path (e.g. data/models/tiny-ruler-llama) or log in to "
            f"Hugging Face on a machine with network access. ({err})") from err


def _fingerprint(tokenizer: Any, backend: Any) -> str:
    """A short hash of the tokenizer's full definition, so a cache made with another tokenizer is detected."""
    if backend is not None and hasattr(backend, "to_str"):
        blob = backend.to_str()
    else:
        blob = json.dumps(sorted(tokenizer.get_vocab().items()))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def as_counter(tokenizer: Any) -> TokenCounter:
    return tokenizer if isinstance(tokenizer, HFTokenCounter) else HFTokenCounter(tokenizer)
