"""Any text, in any role, through every bundled domain: no crash, and the log stays verifiable."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_editor import ContextEditor, audit
from context_editor.domain.model import DOMAINS_DIR

EDITORS = {p.stem: ContextEditor(p.stem, "memory://") for p in sorted(DOMAINS_DIR.glob("*.yaml"))}
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300) | st.sampled_from(
    ["预算两千五以内，不要红色", "</state>]]><context action='x'>", "{\"orderId\": [1, {\"a\": null}]}", "2k $ ¥ 100%",
     "下下周五早上9点半 three years 5日游", "\x00\x1b[31m", "{" * 200, "1" * 500])
turns = st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool", "system"]), text), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(EDITORS)), turns, st.integers(0, 10**6))
def test_random_messages_never_crash_and_verify(domain, conv, n):
    editor = EDITORS[domain]
    session = f"fuzz-{n}"
    for i, (role, content) in enumerate(conv):
        editor.add(session, {"role": role, "content": content, "timestamp": f"2024-05-01T10:00:{i:02d}+08:00"})
    assert audit.verify(editor.store, session)[0].ok
    for action in editor.domain.actions:
        editor.render(session, action, budget=100_000)
