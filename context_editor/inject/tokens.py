"""Exact token counts, offline.

tiktoken normally downloads its BPE files on first use, which fails on an offline machine.
The `bpe-openai` package ships the same files (gzipped); we hand them to tiktoken's own
constructors, which pin the expected SHA-256 of each file, so the ranks, the split pattern and
the special tokens are tiktoken's, byte for byte, and a wrong file is refused.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import threading
from functools import lru_cache
import importlib.util
from pathlib import Path

import tiktoken
import tiktoken_ext.openai_public as openai_public

from .. import registry
from ..errors import Errors

DEFAULT_MODEL = "gpt-4o"
ENCODINGS = {"o200k_base": openai_public.o200k_base, "cl100k_base": openai_public.cl100k_base}
_lock = threading.Lock()


def _bpe_data_dir() -> Path:
    """bpe-openai's data folder, found without importing the package (its import is heavy)."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise Errors.NO_BPE_PACKAGE()
    return Path(spec.submodule_search_locations[0]) / "data"


def _packaged_bpe(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
    """Stand-in for tiktoken's downloader: read the packaged file and check tiktoken's hash."""
    name = url.rsplit("/", 1)[-1]
    data = gzip.decompress((_bpe_data_dir() / f"{name}.gz").read_bytes())
    actual = hashlib.sha256(data).hexdigest()
    if expected_hash and actual != expected_hash:
        raise Errors.BPE_HASH(name=name, actual=actual, expected=expected_hash)
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _tiktoken(name: str) -> tiktoken.Encoding:
    """A tiktoken Encoding built from packaged files (no network)."""
    with _lock:  # swap the loader only while tiktoken's constructor runs
        original = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = _packaged_bpe
        try:
            params = ENCODINGS[name]()
        finally:
            openai_public.load_tiktoken_bpe = original
    return tiktoken.Encoding(**params)


def o200k_base() -> tiktoken.Encoding:
    """Registered tokenizer `o200k_base` (gpt-4o, o1, gpt-4.1 …)."""
    return _tiktoken("o200k_base")


def cl100k_base() -> tiktoken.Encoding:
    """Registered tokenizer `cl100k_base` (gpt-4, gpt-3.5)."""
    return _tiktoken("cl100k_base")


@lru_cache(maxsize=4)
def get_encoding(name: str) -> tiktoken.Encoding:
    """The tokenizer registered as `name` (entry-point group `context_editor.tokenizers`)."""
    if name not in registry.tokenizers:
        raise Errors.UNKNOWN_ENCODING(name=name, known=", ".join(registry.tokenizers.names()))
    encoding: tiktoken.Encoding = registry.tokenizers.get(name)()
    return encoding


def encoding_for_model(model: str | None) -> tiktoken.Encoding:
    """The encoding a model uses (gpt-4o, o1, gpt-4.1 … -> o200k_base; gpt-4, gpt-3.5 -> cl100k_base)."""
    model = model or DEFAULT_MODEL
    if model in registry.tokenizers:
        return get_encoding(model)
    try:
        name = tiktoken.encoding_name_for_model(model)
    except KeyError:
        raise Errors.UNKNOWN_MODEL(model=model) from None
    return get_encoding(name)


@lru_cache(maxsize=8)
def max_token_bytes(model: str | None = None) -> int:
    """The longest token of the model's vocabulary, in bytes. A text of C characters has at
    least C UTF-8 bytes, hence at least C / this many tokens: a message longer than
    this × budget characters cannot fit, and is dropped without tokenising all of it."""
    enc = encoding_for_model(model)
    return max(len(t) for t in enc.token_byte_values())


def count_tokens(text: str, model: str | None = None) -> int:
    """Exact number of tokens of `text` for `model` (special-token text counts as plain text)."""
    return len(encoding_for_model(model).encode(text, disallowed_special=()))


__all__ = ["count_tokens", "encoding_for_model", "get_encoding", "DEFAULT_MODEL"]
