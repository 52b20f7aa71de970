"""Exact token counts offline, from the packaged BPE files tiktoken itself would download."""

from __future__ import annotations

import os
import subprocess
import sys

from context_editor.inject.tokens import count_tokens, encoding_for_model, get_encoding


def test_known_counts():
    assert count_tokens("hello world") == 2
    assert count_tokens("hello world", "gpt-4") == 2
    enc = get_encoding("o200k_base")
    assert enc.n_vocab == 200019 and get_encoding("cl100k_base").n_vocab == 100277
    assert enc.decode(enc.encode("预算2000以内 </state>")) == "预算2000以内 </state>"
    assert encoding_for_model("gpt-4o").name == "o200k_base"
    assert encoding_for_model("gpt-3.5-turbo").name == "cl100k_base"


def test_special_token_text_is_counted_as_text():
    assert count_tokens("<|endoftext|>") > 1


def test_counts_without_network_or_cache(tmp_path):
    # An empty cache dir and no proxy route: any download attempt would fail.
    code = "from context_editor.inject.tokens import count_tokens; print(count_tokens('预算2000以内'))"
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path), "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == count_tokens("预算2000以内")
    assert list(tmp_path.iterdir()) == []


def _fresh_ranks(cache_dir, expected_hash=None):
    """The o200k ranks read in a new process with the given cache dir (as a CLI start would)."""
    code = ("import sys; from context_editor.inject import tokens as T;"
            "r = T._packaged_bpe('x/o200k_base.tiktoken'); print(len(r), r[b'hello'], T.count_tokens('预算2000以内'))")
    env = {**os.environ, "CONTEXT_EDITOR_CACHE": str(cache_dir)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_parsed_ranks_cache_is_used_and_a_damaged_one_is_rebuilt(tmp_path):
    first = _fresh_ranks(tmp_path)
    caches = sorted(tmp_path.glob("o200k_base*.table"))  # one per pinned hash asked for
    assert caches and _fresh_ranks(tmp_path) == first  # read back from the cache
    for cache in caches:
        blob = bytearray(cache.read_bytes())
        blob[len(blob) // 2] ^= 0xFF  # a flipped byte: the checksum no longer matches
        cache.write_bytes(bytes(blob))
    assert _fresh_ranks(tmp_path) == first  # ignored and parsed again
    assert all(cache.read_bytes() != bytes(blob) for cache in caches)  # and rewritten whole
    for cache in caches:
        cache.write_bytes(b"short")
    assert _fresh_ranks(tmp_path) == first


def test_unwritable_cache_dir_only_costs_the_parse(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert _fresh_ranks(blocker / "cache") == _fresh_ranks(tmp_path / "cache")


# ---- the pure-Python count a fresh process starts with (PackagedCounter) -------------------------

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from hypothesis import given, settings, strategies as st  # noqa: E402

from context_editor.inject import tokens as T  # noqa: E402

# Characters where tiktoken's split pattern and merges have their cases: letters of both cases
# and scripts, CJK, digits, apostrophes (contractions), whitespace runs and newlines, punctuation,
# XML, marks, emoji.
ALPHABET = st.sampled_from(list("aAzZéÉßſKǅ预算以内的我你好。，！？、：；「」0123456789'’ \t\n\r/<>=\"&.,!?-_()[]{}$¥€@#%*+|~`")
                           + ["\u0301", "\u200b", "\u3000", "😀", "👍🏽", "ー", "ア", "한", "ع", "'s", "'LL", "  \n  ", "\n\n"])
TEXTS = st.lists(ALPHABET, max_size=60).map("".join) | st.text(max_size=40)


@pytest.fixture(scope="module", params=["o200k_base", "cl100k_base"])
def both(request):
    name = request.param
    return T.PythonBPE(T._packaged_table(f"{name}.tiktoken", T._pinned_hash(name)), T._pattern(name)), get_encoding(name)


@settings(max_examples=int(os.environ.get("BPE_EXAMPLES", 300)), deadline=None)
@given(text=TEXTS)
def test_python_bpe_counts_equal_tiktoken(both, text):
    python, encoding = both
    if T.python_countable(text):  # else the counter leaves it to tiktoken (characters newer than Python's tables)
        assert python.count(text) == len(encoding.encode(text, disallowed_special=()))


def test_python_bpe_counts_equal_tiktoken_on_real_text(both):
    python, encoding = both
    root = Path(__file__).resolve().parents[1]
    texts = [p.read_text("utf-8") for p in [root / "README.md", *sorted((root / "tests" / "golden").rglob("*.*"))]
             if p.suffix in (".md", ".jsonl", ".json", ".xml", ".yaml")]
    assert len(texts) > 40
    for text in texts:
        assert python.count(text) == len(encoding.encode(text, disallowed_special=()))


def test_a_fresh_counter_counts_in_python_then_builds_the_encoder(monkeypatch):
    counter = T.PackagedCounter("o200k_base")
    assert counter.count("预算2000以内 </state>") == count_tokens("预算2000以内 </state>")
    assert counter._encoding is None and counter._python is not None  # no encoder built for that
    assert counter.max_token_bytes == max(map(len, get_encoding("o200k_base").token_byte_values()))
    monkeypatch.setattr(T, "PYTHON_BPE_SECONDS", 0.0)  # its Python budget spent: the next count builds it
    assert counter.count("hello world") == 2 and counter._encoding is not None
    unassigned = "\U0001df1f:A"  # a Unicode 15 letter, unknown to Python 3.11's tables and to tiktoken's
    assert not T.python_countable(unassigned)
    assert T.PackagedCounter("o200k_base").count(unassigned) == len(counter.encoding.encode(unassigned))
