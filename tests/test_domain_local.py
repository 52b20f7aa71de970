"""A domain team's own extraction, beside its domain file, with no change to the package.

Rule packs (`rule_packs: [./rules]`), inline rules, a gazetteer and a template live next to the
domain file; everything the domain uses is resolved into the stored domain document, so replay
runs what ran even after the package's rules or the files beside the domain change.
"""

from __future__ import annotations

import importlib
import shutil
import time
from pathlib import Path

import pytest

from context_editor import ContextEditor, audit
from context_editor.domain import lint_domain, load_domain
from context_editor.domain import rulepacks
lang_lexicon = importlib.import_module("context_editor.lang.lexicon")  # the module (the package exports a function of that name)
from context_editor.resources import rules_dir
from context_editor.errors import DomainError
from context_editor.memory import summary
from context_editor.store import open_store

DOMAIN = """\
domain: claims
version: 1
languages: [zh, en]
rule_packs: [./rules]
templates: ./templates
fields:
  policy_number:
    type: text
    extract: [policy.number]
    ask: {zh: 您的保单号是多少？, en: 'What is your policy number?'}
  claim_amount:
    type: money
    extract:
      - {pattern: '(?:claim(?:ing)?(?:\\s+for)?|索赔)\\s*(?P<value><<AMOUNT>>)', parse: money, confidence: 0.95}
  insurer:
    type: enum
    gazetteer: ./insurers.csv
  people:
    type: int
    extract: [count.people]
actions:
  intake:
    fields: [policy_number, claim_amount, insurer, people]
    required: [policy_number]
"""

PACK = """\
language: any
rules:
  - id: policy.number.any
    description: a policy number such as P-12345
    pattern: '(?P<value>\\bP-\\d{5}\\b)'
    parse: upper
    confidence: 0.97
"""

GAZETTEER = "value,synonyms\nPing An,平安|中国平安|pingan\nAllianz,安联\n"
TEMPLATE = '{% extends "default.xml.j2" %}{% block instructions %}  <instructions>Claims intake.</instructions>{% endblock %}'

CHAT = [
    {"role": "user", "content": "Hi, my policy is p-12345 with Ping An", "timestamp": "2024-06-01T10:00:00+08:00"},
    {"role": "assistant", "content": "What are you claiming?", "timestamp": "2024-06-01T10:00:30+08:00"},
    {"role": "user", "content": "I'm claiming $3,200 for the two of us", "timestamp": "2024-06-01T10:01:00+08:00"},
]


def write_domain(root: Path, domain: str = DOMAIN, pack: str = PACK, gazetteer: str = GAZETTEER) -> Path:
    (root / "rules").mkdir(parents=True, exist_ok=True)
    (root / "rules" / "claims.yaml").write_text(pack, "utf-8")
    (root / "insurers.csv").write_text(gazetteer, "utf-8")
    (root / "templates").mkdir(exist_ok=True)
    (root / "templates" / "intake.xml.j2").write_text(TEMPLATE, "utf-8")
    path = root / "claims.yaml"
    path.write_text(domain, "utf-8")
    return path


@pytest.fixture
def package_rules(tmp_path, monkeypatch):
    """A private copy of the bundled rule packs and lexicons, standing in for 'the package' so a
    test can change it."""
    copy = tmp_path / "package_rules"
    shutil.copytree(rules_dir(), copy)
    monkeypatch.setattr(rulepacks, "rules_dir", lambda: copy)
    monkeypatch.setattr(lang_lexicon, "rules_dir", lambda: copy)
    lang_lexicon.reset()
    yield copy
    lang_lexicon.reset()


def test_local_pack_inline_rule_gazetteer_and_template_extract(tmp_path):
    editor = ContextEditor(write_domain(tmp_path / "d"), "memory://")
    state = editor.ingest("s", CHAT)
    assert state.values() == {"policy_number": "P-12345", "claim_amount": {"amount": 3200, "currency": "USD"},
                              "insurer": "Ping An", "people": 2}
    extractors = {n: state.fields[n].provenance.extractor for n in state.values()}
    assert extractors == {"policy_number": "rule:policy.number.any", "claim_amount": "rule:claim_amount.inline.0",
                          "insurer": "enum:insurer", "people": "rule:count.people.any"}
    assert "<instructions>Claims intake.</instructions>" in editor.render("s", "intake").xml
    zh = ContextEditor(editor.domain, "memory://").ingest("z", [{"role": "user", "content": "中国平安的保单，索赔5000元",
                                                                 "timestamp": "2024-06-01T10:00:00+08:00"}])
    assert zh.get("insurer") == "Ping An" and zh.get("claim_amount") == {"amount": 5000, "currency": "CNY"}


def test_stored_document_holds_what_ran_and_the_hash_covers_it(tmp_path):
    path = write_domain(tmp_path / "d")
    domain = load_domain(path)
    resolved = domain.source["_resolved"]
    assert set(resolved["rules"]) == {"policy.number.any", "claim_amount.inline.0", "count.people.any"}
    assert resolved["gazetteers"]["./insurers.csv"]["Ping An"] == ["平安", "中国平安", "pingan"]
    assert set(resolved["templates"]) == {"intake.xml.j2"}
    (tmp_path / "d" / "insurers.csv").write_text(GAZETTEER + "AXA,安盛\n", "utf-8")
    assert load_domain(path).version_hash != domain.version_hash  # the gazetteer is part of the version


def test_enum_matchers_are_compiled_once_per_domain_version_and_shared(tmp_path):
    path = write_domain(tmp_path / "d")
    first = ContextEditor(path, "memory://")
    again = ContextEditor(load_domain(path), "memory://")  # a new editor (a reopen) compiles nothing
    assert again.extractor.enum_matchers is first.extractor.enum_matchers
    assert summary._entity_matchers(first.domain) == [m for m in first.extractor.enum_matchers.values() if m.pattern is not None]
    assert summary._Entities(first.domain, "中国平安的保单").spans == [(0, 4)]
    (tmp_path / "d" / "insurers.csv").write_text(GAZETTEER + "AXA,安盛\n", "utf-8")
    changed = ContextEditor(path, "memory://")  # another version: its own vocabulary, never the cached one
    assert changed.extractor.enum_matchers["insurer"] is not first.extractor.enum_matchers["insurer"]
    said = [{"role": "user", "content": "安盛的保单", "timestamp": "2024-06-01T10:00:00+08:00"}]
    assert changed.ingest("s", said).get("insurer") == "AXA"
    assert first.ingest("s", said).get("insurer") is None


def test_per_version_keeps_one_compiled_copy_per_key_and_drops_the_oldest_past_its_limit():
    from context_editor.domain.versions import PerVersion
    made = []
    kept = PerVersion[str, list[str]](limit=2)
    def make(key):
        return lambda: made.append(key) or [key]
    first = kept.get("a", make("a"))
    assert kept.get("a", make("a")) is first and made == ["a"]  # made once, then shared
    kept.get("b", make("b"))
    kept.get("c", make("c"))  # past the limit: "a", the oldest, goes
    assert len(kept) == 2 and kept.get("b", make("b")) == ["b"] and made == ["a", "b", "c"]
    assert kept.get("a", make("a")) is not first and made == ["a", "b", "c", "a"]


def test_replay_is_identical_after_the_package_and_local_rules_change(tmp_path, package_rules):
    path = write_domain(tmp_path / "d")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    chat = CHAT + [{"role": "user", "content": "I don't want Allianz", "timestamp": "2024-06-01T10:02:00+08:00"}]
    before = ContextEditor(path, url).ingest("s", chat)
    assert before.get("people") == 2 and before.get("insurer") == "Ping An"  # "don't" negates Allianz
    # After ingest, the package's people rule, its English lexicon and the domain's own pack change.
    people = package_rules / "common" / "people.yaml"
    people.write_text(people.read_text("utf-8").replace("pattern: '(?P<value><<CLAUSE>>+)'", "pattern: 'NEVER-MATCHES'"), "utf-8")
    lexicon_file = package_rules / "en" / "lexicon.yaml"
    lexicon_file.write_text(lexicon_file.read_text("utf-8").replace(" don't, dont,", ""), "utf-8")
    (tmp_path / "d" / "rules" / "claims.yaml").write_text(PACK.replace("P-", "Q-"), "utf-8")
    rulepacks._load_library.cache_clear()
    lang_lexicon.reset()
    today = ContextEditor(load_domain(path), "memory://").ingest("s", chat)
    assert today.get("people") is None and today.get("policy_number") is None  # the changes are real
    assert today.get("insurer") == "Allianz"
    report = audit.replay(open_store(url), "s")
    assert report.identical, report.first_difference


def test_unknown_rule_says_how_to_add_a_local_pack(tmp_path):
    path = write_domain(tmp_path / "d", domain=DOMAIN.replace("[policy.number]", "[policy.numbr]"))
    problems = lint_domain(path)[1]
    [p] = [p for p in problems if p.code == "CE106"]
    assert "policy.numbr" in p.message and "rule_packs: [./rules]" in p.fix and "inline" in p.fix
    assert p.line == 9


@pytest.mark.parametrize("change,code,needle", [
    (lambda root: shutil.rmtree(root / "rules"), "CE112", "rule pack './rules' not found"),
    (lambda root: (root / "insurers.csv").write_text(",平安\n", "utf-8"), "CE113", "gazetteer ./insurers.csv line 1"),
    (lambda root: (root / "insurers.csv").unlink(), "CE113", "gazetteer './insurers.csv' not found"),
    (lambda root: (root / "rules" / "claims.yaml").write_text(PACK.replace("parse: upper", "parse: shout"), "utf-8"),
     "CE110", "unknown parser 'shout'"),
    (lambda root: (root / "rules" / "claims.yaml").write_text(
        PACK.replace("(?P<value>\\bP-\\d{5}\\b)", "(?P<value>(a+)+$)"), "utf-8"), "CE115", "backtracks catastrophically"),
])
def test_bad_resources_are_clear_errors_and_nothing_is_stored(tmp_path, change, code, needle):
    root = tmp_path / "d"
    path = write_domain(root)
    change(root)
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    started = time.monotonic()
    with pytest.raises(DomainError) as exc:
        ContextEditor(path, store).ingest("s", CHAT)
    assert time.monotonic() - started < 10
    found = [p for p in exc.value.problems if p.code == code]
    assert found and needle in found[0].message and found[0].fix, [p.message for p in exc.value.problems]
    assert found[0].line is not None
    assert store.sessions() == [] and store.get_domain("anything") is None
