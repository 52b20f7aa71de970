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
