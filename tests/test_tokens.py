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
    caches = sorted(tmp_path.glob("o200k_base*.ranks"))  # one per pinned hash asked for
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
