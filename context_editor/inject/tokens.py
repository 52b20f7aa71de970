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
import unicodedata
import time
from array import array
from bisect import bisect_left
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Protocol

import tiktoken
import tiktoken_ext.openai_public as openai_public

from .. import registry
from .diskcache import cache_dir
from ..errors import Errors, MissingExtraError

DEFAULT_MODEL = "gpt-4o"
ENCODINGS = {"o200k_base": openai_public.o200k_base, "cl100k_base": openai_public.cl100k_base}
_lock = threading.Lock()
_build_lock = threading.Lock()  # one build of each encoder


def _bpe_data_dir() -> Path:
    """bpe-openai's data folder, found without importing the package (its import is heavy)."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise Errors.NO_BPE_PACKAGE()
    return Path(spec.submodule_search_locations[0]) / "data"


def _packaged_bpe(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
    """Stand-in for tiktoken's downloader: the packaged file's ranks, checked against tiktoken's hash."""
    return _packaged_table(url.rsplit("/", 1)[-1], expected_hash).ranks()


@lru_cache(maxsize=4)
def _packaged_table(name: str, expected_hash: str | None) -> RankTable:
    """The ranks of a packaged BPE file (`o200k_base.tiktoken`), checked against tiktoken's hash.

    Parsing 200,000 base64 lines costs ~150 ms at every process start, so the parsed ranks are
    kept in a cache file (see `_RanksCache`); the packaged file is read only when that is missing."""
    source = _bpe_data_dir() / f"{name}.gz"
    cache = _RanksCache(source, expected_hash)
    if (table := cache.read()) is not None:
        return table
    data = gzip.decompress(source.read_bytes())
    actual = hashlib.sha256(data).hexdigest()
    if expected_hash and actual != expected_hash:
        raise Errors.BPE_HASH(name=name, actual=actual, expected=expected_hash)
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    table = RankTable.of(ranks)
    cache.write(table)
    return table


class RankTable:
    """BPE ranks as two parallel arrays, the tokens sorted by their bytes: loading it takes
    ~10 ms where a dict of 200,000 entries takes ~50 ms (hashing every key), and a lookup is a
    binary search in C. Enough for the pure-Python count (`PythonBPE`); `ranks()` gives the dict
    tiktoken's encoder is built from."""

    def __init__(self, tokens: list[bytes], rank_of: array[int], longest: int):
        self.tokens, self.rank_of, self.longest = tokens, rank_of, longest

    @classmethod
    def of(cls, ranks: dict[bytes, int]) -> RankTable:
        tokens = sorted(ranks)
        return cls(tokens, array("I", [ranks[t] for t in tokens]), max(map(len, tokens), default=0))

    def get(self, token: bytes) -> int | None:
        i = bisect_left(self.tokens, token)
        return self.rank_of[i] if i < len(self.tokens) and self.tokens[i] == token else None

    def ranks(self) -> dict[bytes, int]:
        return dict(zip(self.tokens, self.rank_of))


class _RanksCache:
    """Parsed BPE ranks in `$CONTEXT_EDITOR_CACHE` (default `~/.cache/context-editor`): a
    RankTable's arrays, as marshal.

    The file's name binds it to the packaged file it came from (path, size, mtime) and to
    tiktoken's pinned hash of that file; its first 32 bytes are the SHA-256 of the rest, so a
    truncated or altered cache is ignored and rebuilt, never trusted. An unwritable cache directory
    only costs the parse."""

    def __init__(self, source: Path, expected_hash: str | None):
        stat = source.stat()
        key = hashlib.sha256(f"{source}|{stat.st_size}|{stat.st_mtime_ns}|{expected_hash}".encode()).hexdigest()[:24]
        self.path = cache_dir() / f"{source.name.removesuffix('.gz')}-{key}.table"  # RankTable's arrays

    def read(self) -> RankTable | None:
        try:
            blob = self.path.read_bytes()
        except OSError:
            return None
        if hashlib.sha256(blob[32:]).digest() != blob[:32]:
            return None
        try:
            tokens, ranks, longest = marshal.loads(blob[32:])
            rank_of = array("I")
            rank_of.frombytes(ranks)
        except (EOFError, ValueError, TypeError):
            return None
        if not isinstance(tokens, list) or len(tokens) != len(rank_of) or not isinstance(longest, int):
            return None
        return RankTable(tokens, rank_of, longest)

    def write(self, table: RankTable) -> None:
        body = marshal.dumps((table.tokens, table.rank_of.tobytes(), table.longest))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(hashlib.sha256(body).digest() + body)
            os.replace(tmp, self.path)  # readers see the old file or the whole new one
        except OSError:
            pass  # a read-only home: every start parses the packaged file, as without a cache


def _parameters(name: str, loader: Callable[..., dict[bytes, int]]) -> dict[str, Any]:
    """tiktoken's constructor parameters of an encoding, its BPE file read by `loader`."""
    with _lock:  # swap the loader only while tiktoken's constructor runs
        original = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = loader
        try:
            return dict(ENCODINGS[name]())
        finally:
            openai_public.load_tiktoken_bpe = original


def _tiktoken(name: str) -> tiktoken.Encoding:
    """A tiktoken Encoding built from packaged files (no network)."""
    return tiktoken.Encoding(**_parameters(name, _packaged_bpe))


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
# The pattern matches the empty string at each cut point (after the newline), so `re.split` cuts
# the text in C.
_CUT = re.compile(r"(?<=\n)(?=[ \t]*[^\s/])")


# tiktoken's split patterns (SHA-256 of `pat_str`, first 16 hex digits) the reasoning above was
# made on: o200k_base and cl100k_base. cl100k's `\s++$` takes a piece's trailing "  \n" whole, as
# `\s*[\r\n]` takes it in place. A property test compares piece sums with whole counts on random
# texts of the characters these patterns decide on, and on every golden context.
PROVEN_PATTERNS = frozenset({"2d1b8dc11e89af71", "f021c3d976978e62"})


def cuts(marks: str) -> re.Pattern[str]:
    """The same cut points in a text that also holds marks matching `marks` (a pattern whose
    matches start with NUL, which no XML text holds, and with no capturing group): they are
    looked past, as if absent."""
    pattern = re.compile(rf"(?<=\n)(?=[ \t]*(?:{marks})*[^\s/\x00])")
    assert not pattern.groups, "a capturing group would come back from re.split as a piece"
    return pattern


_DIGIT = re.compile(r"[0-9]")
_DIGITS = re.compile(r"[0-9]+")
_GROUPS = re.compile(r"[0-9]{1,3}")  # how the proven split patterns cut a run of digits (`\p{N}{1,3}`)


def _digits_apart(text: str) -> bool:
    """Whether the numeric characters of `text` are all ASCII digits, to tiktoken's Unicode tables
    too (`python_countable`): each run of digits is then a whole run of `\\p{N}` there."""
    return text.isascii() or python_countable(text) and not any(unicodedata.category(c)[0] == "N" for c in text if not c.isascii())


SEGMENT_CACHE = 1 << 16  # cached piece counts per tokenizer (render outputs repeat line by line)


class SegmentCounter:
    """Exact counts of texts that repeat piece by piece (a context re-rendered as its history
    grows): the text is cut where the tokenizer's pre-tokens never span, and each piece's count is
    cached. `additive` is False for tokenizers without that guarantee; they are counted whole."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        base = tokenizer.base if isinstance(tokenizer, EstimatedCounter) else tokenizer
        self.additive = isinstance(base, TiktokenCounter)
        # Proven: the tokenizer's split pattern is one the cut rule was checked against (above), so
        # a render need not confirm its summed count with a whole count of its output (the other
        # additive tokenizers are confirmed at every render, and counted whole once a sum disagrees).
        self.proven = self.additive and isinstance(base, PackagedCounter) and \
            hashlib.sha256(_pattern(base.name).encode()).hexdigest()[:16] in PROVEN_PATTERNS
        self._base = base
        self._cache: dict[str, int] = {}
        self._lines: dict[tuple[tuple[str, str], bool], int] = {}  # base counts of "role: text" lines (`count_said`)

    def pieces(self, text: str, cut: re.Pattern[str] = _CUT) -> list[str]:
        return cut.split(text)

    def piece(self, text: str) -> int:
        """The base count of one piece (before an estimate's margin), cached. With a proven split
        pattern a piece that differs from one counted before only in its numbers (a new round, a
        `tokens` claim, sources "m9951 m9999 ×5") is told from the count of its skeleton, the text
        with each number written "0": in those patterns only `\\p{N}{1,3}` matches a numeric
        character and no other pre-token reaches across one (`_digits_apart`), so the rest of the
        text splits alike whatever the numbers, and each number is pre-tokens of its own (BPE merges
        only inside a pre-token): count(text) = count(skeleton) - runs * count("0") + the counts of
        the numbers' 1-3 digit groups."""
        n = self._cache.get(text)
        if n is None:
            if self.proven and _DIGIT.search(text) is not None and _digits_apart(text):
                skeleton, runs = _DIGITS.subn("0", text)
                if skeleton != text:
                    told = self._whole(skeleton) - runs * self._whole("0") + sum(map(self._whole, _GROUPS.findall(text)))
                    return self._remember(text, told)
            n = self._whole(text)
        return n

    def _whole(self, text: str) -> int:
        """The base count of `text` counted whole by the tokenizer, cached."""
        n = self._cache.get(text)
        return self._remember(text, self._base.count(text)) if n is None else n

    def _remember(self, text: str, n: int) -> int:
        """Keep a piece's count, within SEGMENT_CACHE: every count is kept here, so a long-lived
        process that renders ever new numbers (rounds, `tokens=`) does not grow the cache."""
        if len(self._cache) >= SEGMENT_CACHE:
            self._cache.clear()
        self._cache[text] = n
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

    def count_said(self, said: list[tuple[str, str]]) -> int:
        """The count of the lines "role: text" joined by newlines (a render's raw window). When each
        line starts a piece (its role's first character is neither whitespace nor "/": the newline
        before it is a cut point), the sum of each line's count with its newline, each remembered by
        (role, text) and whether a newline follows: a render of the same window builds no line again."""
        if not self.additive or any(not role[:1] or role[:1].isspace() or role[:1] == "/" for role, _ in said[1:]):
            return self.count("\n".join(f"{role}: {text}" for role, text in said))
        last = len(said) - 1
        total = 0
        for i, pair in enumerate(said):
            key = (pair, i < last)
            n = self._lines.get(key)
            if n is None:
                if len(self._lines) >= SEGMENT_CACHE:
                    self._lines.clear()
                line = f"{pair[0]}: {pair[1]}\n" if i < last else f"{pair[0]}: {pair[1]}"
                n = self._lines[key] = sum(self.piece(p) for p in self.pieces(line))
            total += n
        return self.total(total)


class TiktokenCounter:
    estimated = False

    def __init__(self, encoding: tiktoken.Encoding):
        self._encoding = encoding
        self.name = encoding.name
        self.max_token_bytes = max(map(len, encoding.token_byte_values()))  # map: C speed over 200k tokens

    @property
    def encoding(self) -> tiktoken.Encoding:
        return self._encoding

    def count(self, text: str) -> int:
        return len(self.encoding.encode(text, disallowed_special=()))  # special-token text counts as plain text


class PackagedCounter(TiktokenCounter):
    """o200k_base or cl100k_base from the packaged files, ready at once: texts are counted by
    `PythonBPE` over the cached ranks until that has cost about what building tiktoken's encoder
    costs (~150 ms: the dict of 200,000 ranks and the Rust CoreBPE, which holds the GIL, so it
    cannot be built beside the first render), then by the encoder. The counts are the same either
    way; a process's first render no longer waits for the encoder."""

    def __init__(self, name: str):
        self.name = name
        self._encoding = None  # type: ignore[assignment]
        self._table = _packaged_table(f"{name}.tiktoken", _pinned_hash(name))
        self.max_token_bytes = self._table.longest
        self._python: PythonBPE | None = None
        self._spent = 0.0  # seconds counted in Python so far

    @property
    def encoding(self) -> tiktoken.Encoding:
        if self._encoding is None:
            with _build_lock:
                if self._encoding is None:
                    encoding = get_encoding(self.name)
                    assert isinstance(encoding, tiktoken.Encoding)
                    self._encoding = encoding
        return self._encoding

    def count(self, text: str) -> int:
        if self._encoding is None and self._spent < PYTHON_BPE_SECONDS and len(text) <= PYTHON_BPE_CHARS \
                and python_countable(text):
            start = time.perf_counter()
            if self._python is None:
                self._python = PythonBPE(self._table, _pattern(self.name))
            n = self._python.count(text)
            self._spent += time.perf_counter() - start
            return n
        return len(self.encoding.encode(text, disallowed_special=()))


# The pure-Python count is used for the first PYTHON_BPE_SECONDS of counting in a process, for
# texts of at most PYTHON_BPE_CHARS (beyond that the encoder is cheaper than the Python loop), and
# only for characters Python's Unicode tables know: a character unassigned there could split
# differently under tiktoken's newer tables, so such text goes to the encoder.
PYTHON_BPE_SECONDS = 0.15
PYTHON_BPE_CHARS = 32_768


# The `regex` package's Unicode tables are newer than tiktoken's, so a character assigned
# recently may be a letter to one and not the other. Python's own tables (14.0 in 3.11, 15.1 in
# 3.13) are not newer than tiktoken's: a character they know splits alike in both.
_PYTHON_TABLES_OLD_ENOUGH = tuple(map(int, unicodedata.unidata_version.split("."))) <= (15, 1, 0)


def python_countable(text: str) -> bool:
    """Whether `PythonBPE` counts `text` as tiktoken does: ASCII, or only characters Python's
    Unicode tables know (while those are not newer than tiktoken's)."""
    return text.isascii() or _PYTHON_TABLES_OLD_ENOUGH and not any(unicodedata.category(c) == "Cn" for c in text)


def _pinned_hash(name: str) -> str | None:
    """tiktoken's pinned SHA-256 of a packaged BPE file (read from its constructor's call)."""
    return _constructor_call(name)[1]


def _pattern(name: str) -> str:
    """tiktoken's split pattern of an encoding."""
    return str(_constructor_call(name)[0]["pat_str"])


@lru_cache(maxsize=4)
def _constructor_call(name: str) -> tuple[dict[str, Any], str | None]:
    """tiktoken's own parameters of an encoding (pattern, special tokens), with the file hash it
    pins, taken without loading the ranks (its loader is stubbed while the constructor runs)."""
    pinned: list[str | None] = []

    def stub(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        pinned.append(expected_hash)
        return {}

    params = _parameters(name, stub)
    return params, pinned[0] if pinned else None


class PythonBPE:
    """tiktoken's `encode_ordinary` count, in pure Python over a RankTable: the same split pattern
    (through the `regex` package, tiktoken's own dependency) and the same merge loop as its Rust
    `byte_pair_merge` (the lowest-ranked adjacent pair first, leftmost on a tie). Slower per byte
    than the Rust encoder, but ready in ~15 ms where building that encoder costs ~150 ms; counts
    are equal (a property test against tiktoken, and every golden context)."""

    def __init__(self, table: RankTable, pattern: str):
        import regex  # type: ignore[import-untyped,unused-ignore]  # imported only when this counter is used

        self.table, self.split = table, regex.compile(pattern).finditer

    def count(self, text: str) -> int:
        get, n = self.table.get, 0
        for m in self.split(text):
            piece = m.group().encode("utf-8")
            n += 1 if len(piece) == 1 or get(piece) is not None else self._merged(piece)
        return n

    def _merged(self, piece: bytes) -> int:
        """How many tokens byte-pair merging leaves of `piece` (tiktoken's `_byte_pair_merge`)."""
        get, none = self.table.get, 1 << 32
        starts = list(range(len(piece) + 1))  # part i is piece[starts[i]:starts[i + 1]]
        ranks = [r if (r := get(piece[i:i + 2])) is not None else none for i in range(len(piece) - 1)] + [none]

        def rank(i: int) -> int:  # of parts i and i+1 merged, if that is a token
            if i + 2 >= len(starts):
                return none
            r = get(piece[starts[i]:starts[i + 2]])
            return none if r is None else r

        while True:
            low = min(ranks)
            if low == none:
                return len(starts) - 1
            i = ranks.index(low)  # the leftmost lowest
            del starts[i + 1], ranks[i + 1]
            ranks[i] = rank(i)
            if i > 0:
                ranks[i - 1] = rank(i - 1)


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
        base = tokenizer_for("o200k_base")
        assert isinstance(base, TiktokenCounter)
        self.base = base
        self.name = f"{model} (estimated: o200k_base + {ESTIMATE_MARGIN:.0%})"
        self.max_token_bytes = self.base.max_token_bytes  # the estimate is never below the base count

    def count(self, text: str) -> int:
        return self.scale(self.base.count(text))

    @staticmethod
    def scale(base_count: int) -> int:
        return math.ceil(base_count * (1 + ESTIMATE_MARGIN))


_BUNDLED = {"o200k_base": o200k_base, "cl100k_base": cl100k_base}


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
    if name in ENCODINGS and registry.tokenizers.get(name) is _BUNDLED[name]:
        return PackagedCounter(name)
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
