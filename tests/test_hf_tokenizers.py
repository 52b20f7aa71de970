"""--model beyond OpenAI: a Hugging Face tokenizer.json counted exactly with `tokenizers`, and an
explicit, marked estimate for models without a published tokenizer. The tokenizer.json files are
built here with the tokenizers library itself (nothing is downloaded)."""

from __future__ import annotations

import math
import re

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from context_editor import ContextEditor
from context_editor.cli import main
from context_editor.errors import ContextEditorError
from context_editor.inject.tokens import ESTIMATE_MARGIN, count_tokens, max_token_bytes

CORPUS = ["我想买蓝牙耳机，预算2000以内", "要黑色的，帮我下单吧", "I want wireless headphones under 2000",
          "<context action=\"place_order\"><state><field name=\"color\">black</field></state></context>"] * 20
TURNS = [{"role": "user", "content": "我想买蓝牙耳机，预算2000以内，要黑色"},
         {"role": "assistant", "content": "推荐Sony WH-1000XM5，现价1999元。"}]


@pytest.fixture(scope="module")
def byte_level_json(tmp_path_factory) -> str:
    """A small byte-level BPE, like Qwen's, Llama 3's or DeepSeek's tokenizer.json."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                        show_progress=False))
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    tok.save(str(path))
    return str(path)


def test_a_tokenizer_json_counts_exactly_and_renders_within_budget(byte_level_json):
    reference = Tokenizer.from_file(byte_level_json)
    for text in ["hello 你好 2000 元", "<state>…</state>", ""]:
        assert count_tokens(text, byte_level_json) == len(reference.encode(text, add_special_tokens=False).ids)
    assert count_tokens("我想买蓝牙耳机", byte_level_json) != count_tokens("我想买蓝牙耳机", "gpt-4o")
    editor = ContextEditor("ecommerce", "memory://", model=byte_level_json)
    editor.ingest("s", TURNS, now="2024-05-01T10:00:00+08:00")
    ctx = editor.render("s", "place_order", budget=1500)
    assert ctx.tokens == len(reference.encode(ctx.xml, add_special_tokens=False).ids) <= 1500
    assert f'tokens="{ctx.tokens}"' in ctx.xml and "tokens_estimated" not in ctx.xml and not ctx.estimated
    assert max_token_bytes(byte_level_json) >= max(len(t.encode()) for t in ["蓝牙"])  # bounded by the vocabulary


def test_a_word_level_tokenizer_has_no_size_bound(tmp_path):
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(CORPUS, trainers.WordLevelTrainer(special_tokens=["[UNK]"], show_progress=False))
    path = str(tmp_path / "words.json")
    tok.save(path)
    assert count_tokens("x" * 5000, path) == 1  # one unknown word: one token, however long
    assert max_token_bytes(path) >= 1 << 30  # so no message is dropped up front as too long


def test_claude_is_an_explicit_estimate_with_a_stated_margin():
    editor = ContextEditor("ecommerce", "memory://")
    editor.ingest("s", TURNS, now="2024-05-01T10:00:00+08:00")
    ctx = editor.render("s", "place_order", model="claude-sonnet-4-5")
    assert ctx.estimated and re.search(r'tokens="\d+" tokens_estimated="true" budget=', ctx.xml)
    assert ctx.tokens == math.ceil(count_tokens(ctx.xml, "o200k_base") * (1 + ESTIMATE_MARGIN)) <= ctx.budget
    exact = editor.render("s", "place_order")
    assert not exact.estimated and exact.tokens < ctx.tokens


def test_cli_model_flag_and_bad_tokenizer_files(byte_level_json, tmp_path, capsys):
    conversation = tmp_path / "c.jsonl"
    conversation.write_text('{"role": "user", "content": "我想买蓝牙耳机，预算2000以内"}\n', "utf-8")
    assert main(["run", "ecommerce", str(conversation), "--action", "place_order", "--budget", "1500", "--model", byte_level_json]) == 0
    xml = capsys.readouterr().out
    claimed = int(re.search(r'tokens="(\d+)"', xml).group(1))
    assert claimed == len(Tokenizer.from_file(byte_level_json).encode(xml.rstrip("\n"), add_special_tokens=False).ids)
    broken = tmp_path / "tokenizer.json"
    broken.write_text("{not json", "utf-8")
    assert main(["run", "ecommerce", str(conversation), "--action", "place_order", "--model", str(broken)]) == 2
    assert "[CE405]" in capsys.readouterr().err
    with pytest.raises(ContextEditorError, match="CE403"):
        count_tokens("x", "no-such-model")
