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
import importlib.util
import json
import marshal
import math
import os
import re
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import tiktoken
import tiktoken_ext.openai_public as openai_public

from .. import registry
from ..errors import Errors, MissingExtraError

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
    """Stand-in for tiktoken's downloader: the packaged file's ranks, checked against tiktoken's hash.

    Parsing 200,000 base64 lines costs ~150 ms at every process start, so the parsed ranks are
    kept in a cache file (see `_RanksCache`); the packaged file is read only when that is missing."""
    name = url.rsplit("/", 1)[-1]
    source = _bpe_data_dir() / f"{name}.gz"
    cache = _RanksCache(source, expected_hash)
    if (ranks := cache.read()) is not None:
        return ranks
    data = gzip.decompress(source.read_bytes())
    actual = hashlib.sha256(data).hexdigest()
    if expected_hash and actual != expected_hash:
        raise Errors.BPE_HASH(name=name, actual=actual, expected=expected_hash)
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    cache.write(ranks)
    return ranks


class _RanksCache:
    """Parsed BPE ranks in `$CONTEXT_EDITOR_CACHE` (default `~/.cache/context-editor`), as marshal.

    The file's name binds it to the packaged file it came from (path, size, mtime) and to
    tiktoken's pinned hash of that file; its first 32 bytes are the SHA-256 of the rest, so a
    truncated or altered cache is ignored and rebuilt, never trusted. An unwritable cache directory
    only costs the parse."""

    def __init__(self, source: Path, expected_hash: str | None):
        stat = source.stat()
        key = hashlib.sha256(f"{source}|{stat.st_size}|{stat.st_mtime_ns}|{expected_hash}".encode()).hexdigest()[:24]
        root = os.environ.get("CONTEXT_EDITOR_CACHE") or Path.home() / ".cache" / "context-editor"
        self.path = Path(root) / f"{source.name.removesuffix('.gz')}-{key}.ranks"

    def read(self) -> dict[bytes, int] | None:
        try:
            blob = self.path.read_bytes()
        except OSError:
            return None
        if hashlib.sha256(blob[32:]).digest() != blob[:32]:
            return None
        try:
            ranks = marshal.loads(blob[32:])
        except (EOFError, ValueError, TypeError):
            return None
        return ranks if isinstance(ranks, dict) else None

    def write(self, ranks: dict[bytes, int]) -> None:
        body = marshal.dumps(ranks)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(hashlib.sha256(body).digest() + body)
            os.replace(tmp, self.path)  # readers see the old file or the whole new one
        except OSError:
            pass  # a read-only home: every start parses the packaged file, as without a cache


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
def get_encoding(name: str) -> Any:
    """The tokenizer registered as `name` (entry-point group `context_editor.tokenizers`)."""
    if name not in registry.tokenizers:
        raise Errors.UNKNOWN_ENCODING(name=name, known=", ".join(registry.tokenizers.names()))
    return registry.tokenizers.get(name)()


def encoding_for_model(model: str | None) -> tiktoken.Encoding:
    """The tiktoken encoding an OpenAI model uses (gpt-4o, o1, gpt-4.1 … -> o200k_base; gpt-4,
    gpt-3.5 -> cl100k_base)."""
    model = model or DEFAULT_MODEL
    if model not in registry.tokenizers:
        try:
            model = tiktoken.encoding_name_for_model(model)
        except KeyError:
            raise Errors.UNKNOWN_MODEL(model=model) from None
    encoding: tiktoken.Encoding = get_encoding(model)
    return encoding


# Claude's tokenizer is not published: its counts are estimated from o200k_base with this margin
# on top, so a context that fits the estimate fits the budget with room to spare.
ESTIMATE_MARGIN = 0.30
NO_BOUND = 1 << 30  # "a token may be this long": disables the up-front size check


class Tokenizer(Protocol):
    """What the renderer needs of a tokenizer: an exact (or, if `estimated`, a stated) count, and
    the longest token in bytes (a text of C characters is at least C / that many tokens)."""

    name: str
    estimated: bool
    max_token_bytes: int

    def count(self, text: str) -> int: ...


# Where a text may be cut so that its count is the sum of its pieces' counts, for tiktoken's
# split patterns (o200k_base, cl100k_base): right after a newline followed by spaces or tabs and
# then a character that is neither whitespace nor "/" (an indented XML line). No pre-token spans
# such a point. The only patterns that take a newline are a punctuation run (with `[\r\n/]*` after
# it: it stops at a space or any other character) and a whitespace run ending in its last newline
# (none follows before the non-space); the letter patterns exclude newlines; no pattern looks
# behind, so the piece after the cut splits as it does in place. BPE merges only inside a
# pre-token, so the counts add up exactly. `SegmentCounter` relies on this and checks it: the
# renderer compares the sum with one whole count of its final output, and a test compares them on
# every golden conversation.
_CUT = re.compile(r"\n(?=[ \t]*[^\s/])")


def cuts(marks: str) -> re.Pattern[str]:
    """The same cut points in a text that also holds marks matching `marks` (a pattern whose
    matches start with NUL, which no XML text holds): they are looked past, as if absent."""
    return re.compile(rf"\n(?=[ \t]*(?:{marks})*[^\s/\x00])")


SEGMENT_CACHE = 1 << 16  # cached piece counts per tokenizer (render outputs repeat line by line)


class SegmentCounter:
    """Exact counts of texts that repeat piece by piece (a context re-rendered as its history
    grows): the text is cut where the tokenizer's pre-tokens never span, and each piece's count is
    cached. `additive` is False for tokenizers without that guarantee; they are counted whole."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        base = tokenizer.base if isinstance(tokenizer, EstimatedCounter) else tokenizer
        self.additive = isinstance(base, TiktokenCounter)
        self._base = base
        self._cache: dict[str, int] = {}

    def pieces(self, text: str, cut: re.Pattern[str] = _CUT) -> list[str]:
        out, start = [], 0
        for m in cut.finditer(text):
            out.append(text[start:m.end()])
            start = m.end()
        out.append(text[start:])
        return out

    def piece(self, text: str) -> int:
        """The base count of one piece (before an estimate's margin), cached."""
        n = self._cache.get(text)
        if n is None:
            if len(self._cache) >= SEGMENT_CACHE:
                self._cache.clear()
            n = self._cache[text] = self._base.count(text)
        return n

    def total(self, base_count: int) -> int:
        """A sum of base counts as the tokenizer's count (an estimate adds its margin once)."""
        if isinstance(self.tokenizer, EstimatedCounter):
            return self.tokenizer.scale(base_count)
        return base_count

    def count(self, text: str) -> int:
        if not self.additive:
            return self.tokenizer.count(text)
        return self.total(sum(self.piece(p) for p in self.pieces(text)))


class TiktokenCounter:
    estimated = False

    def __init__(self, encoding: tiktoken.Encoding):
        self.encoding = encoding
        self.name = encoding.name
        self.max_token_bytes = max(map(len, self.encoding.token_byte_values()))  # map: C speed over 200k tokens

    def count(self, text: str) -> int:
        return len(self.encoding.encode(text, disallowed_special=()))  # special-token text counts as plain text


class HuggingFaceCounter:
    """A model's own tokenizer.json (the `tokenizers` package; the [hf] extra), counted exactly.
    Special tokens a model adds around a prompt (BOS …) are not counted: the context is a part."""

    estimated = False

    def __init__(self, path: Path):
        try:
            from tokenizers import Tokenizer as HFTokenizer
        except ImportError:
            raise MissingExtraError("tokenizers", "hf", f"counting with {path}") from None
        file = path / "tokenizer.json" if path.is_dir() else path
        try:
            spec = json.loads(file.read_text("utf-8"))
            self.tokenizer = HFTokenizer.from_file(str(file))
        except Exception as exc:  # OSError, bad JSON, or the Rust library's own Exception
            raise Errors.TOKENIZER_FILE(path=str(file), detail=str(exc)) from None
        self.name = str(file)
        self.max_token_bytes = self._longest(spec)

    def _longest(self, spec: dict[str, Any]) -> int:
        """The vocabulary's longest token in bytes, if every text is encoded byte by byte at
        worst; else NO_BOUND (an unknown-word token may stand for a word of any length)."""
        model = spec.get("model") or {}
        pre = json.dumps(spec.get("pre_tokenizer"))
        bytewise = '"ByteLevel"' in pre or bool(model.get("byte_fallback"))
        if not bytewise:
            return NO_BOUND
        return max((len(tok.encode("utf-8")) for tok in self.tokenizer.get_vocab()), default=NO_BOUND)

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)


class EncoderCounter:
    """Any other registered encoder: exact counts from `encode(text)`, no size bound."""

    estimated = False
    max_token_bytes = NO_BOUND

    def __init__(self, name: str, encoder: Any):
        self.name, self.encoder = name, encoder

    def count(self, text: str) -> int:
        return len(self.encoder.encode(text))


class EstimatedCounter:
    """For models whose tokenizer is not published (claude-…): o200k_base plus ESTIMATE_MARGIN,
    rounded up, and marked `estimated` so the context says tokens_estimated="true"."""

    estimated = True

    def __init__(self, model: str):
        self.base = TiktokenCounter(get_encoding("o200k_base"))
        self.name = f"{model} (estimated: o200k_base + {ESTIMATE_MARGIN:.0%})"
        self.max_token_bytes = self.base.max_token_bytes  # the estimate is never below the base count

    def count(self, text: str) -> int:
        return self.scale(self.base.count(text))

    @staticmethod
    def scale(base_count: int) -> int:
        return math.ceil(base_count * (1 + ESTIMATE_MARGIN))


def claude() -> EstimatedCounter:
    """Registered tokenizer `claude` (every claude-… model): an estimate, marked as one."""
    return EstimatedCounter("claude")


@lru_cache(maxsize=16)
def tokenizer_for(model: str | None = None) -> Tokenizer:
    """The tokenizer of `model`: a path to a Hugging Face tokenizer.json (or its folder), else a
    tokenizer registered under the model's name (entry-point group `context_editor.tokenizers`:
    o200k_base, cl100k_base, claude for claude-…), else tiktoken's encoding for an OpenAI model."""
    model = model or DEFAULT_MODEL
    path = Path(model)
    if model.endswith(".json") or (path.is_dir() and (path / "tokenizer.json").exists()):
        return HuggingFaceCounter(path)
    name = "claude" if model.startswith("claude") and "claude" in registry.tokenizers else model
    if name not in registry.tokenizers:
        try:
            name = tiktoken.encoding_name_for_model(model)
        except KeyError:
            raise Errors.UNKNOWN_MODEL(model=model) from None
    encoder = get_encoding(name)
    if isinstance(encoder, tiktoken.Encoding):
        return TiktokenCounter(encoder)
    if hasattr(encoder, "count") and hasattr(encoder, "estimated"):
        counter: Tokenizer = encoder
        return counter
    return EncoderCounter(name, encoder)


@lru_cache(maxsize=16)
def segment_counter(model: str | None = None) -> SegmentCounter:
    """The model's tokenizer with cached piece counts (one per model, shared by every renderer)."""
    return SegmentCounter(tokenizer_for(model))


def max_token_bytes(model: str | None = None) -> int:
    """The longest token of the model's vocabulary, in bytes. A text of C characters has at
    least C UTF-8 bytes, hence at least C / this many tokens: a message longer than
    this × budget characters cannot fit, and is dropped without tokenising all of it."""
    return tokenizer_for(model).max_token_bytes


def count_tokens(text: str, model: str | None = None) -> int:
    """The number of tokens of `text` for `model`: exact, except for models marked estimated."""
    return tokenizer_for(model).count(text)


__all__ = ["count_tokens", "encoding_for_model", "get_encoding", "tokenizer_for", "Tokenizer", "DEFAULT_MODEL",
           "ESTIMATE_MARGIN", "SegmentCounter", "segment_counter"]
