"""A render right after a new message, in a process that rendered the session before (its piece
counts, the zone's scored lines and settled past, turns, state views, history scores, whether
the action fitted last time), equals byte for byte the render of a cold one, on real captured
conversations: each domain's golden conversations in their own order and SGD dev dialogues
(issue 15: whatever a render reuses from the render before may never show in its output)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from context_editor import ContextEditor
from context_editor.domaintest import load_cases
from context_editor.errors import BudgetError
from context_editor.inject import compact, history, xmltext
from context_editor.inject.render import Renderer
from context_editor.inject.tokens import segment_counter

from conftest import ROOT

GOLDEN = ROOT / "tests" / "golden"
DOMAINS = ("ecommerce", "travel", "finance")
MODELS = ("gpt-4o", "gpt-4", "claude-3-5-sonnet")  # o200k_base, cl100k_base, the estimate on o200k_base
CASES = {d: [[m for m in case.messages] for case in load_cases(GOLDEN / d)] for d in DOMAINS}
SGD_DEV = ROOT.parent / "shared" / "data" / "sgd" / "dev"
STAMP = "2024-05-01T10:00:00+00:00"


def rendered(editor: ContextEditor, session: str, action: str, budget: int | None) -> str:
    try:
        return editor.render(session, action, budget=budget).xml
    except BudgetError as exc:  # too small a budget: the same error either way
        return f"over budget: {exc}"


def forget_process(model: str | None) -> None:
    """What this process remembers across editors (piece counts, zone scores and memos, history
    scores, entity mentions, escaped texts): dropped, so the next editor renders as a new process
    would (its renderer's own memos are per editor: a new editor starts without them)."""
    history.forget_scores()
    compact.forget_entities()
    xmltext.forget()
    compact._zone_memo.clear()
    compact._scores.clear()
    counter = segment_counter(model)
    counter._cache.clear()
    counter._lines.clear()


def cold(store: Any, domain: Any, model: str | None, session: str, action: str, budget: int | None) -> str:
    forget_process(model)
    return rendered(ContextEditor(domain, store, model=model), session, action, budget)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(domain=st.sampled_from(DOMAINS), model=st.sampled_from(MODELS), data=st.data())
def test_a_golden_conversation_renders_warm_as_cold(domain, model, data):
    """Messages of one golden conversation in their order: the first part read at once, then one
    by one, each followed by a render of some action at some budget, warm and cold."""
    messages = data.draw(st.sampled_from(CASES[domain]), label="conversation")
    start = data.draw(st.integers(0, max(0, len(messages) - 1)), label="read at once")
    budgets = data.draw(st.lists(st.one_of(st.none(), st.integers(120, 900)), min_size=1, max_size=2), label="budgets")
    warm = ContextEditor(domain, "memory://", model=model)
    actions = sorted(warm.domain.actions)
    if start:
        warm.ingest("s", [{**m, "timestamp": STAMP} for m in messages[:start]])
    for step, message in enumerate(messages[start:]):
        warm.add("s", {**message, "timestamp": STAMP})
        action = data.draw(st.sampled_from(actions), label=f"action {step}")
        for budget in budgets:
            xml = rendered(warm, "s", action, budget)
            assert xml == cold(warm.store, domain, model, "s", action, budget), (step, action, budget)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(domain=st.sampled_from(DOMAINS), model=st.sampled_from(MODELS[:2]), data=st.data())
def test_the_budget_search_answers_from_this_render_alone(domain, model, data):
    """The cut a budget search chooses depends on this render's plan alone: after every message,
    every action at budgets under what its whole context counts (a cut of one item or of many, in
    every tier), the warm renderer's search (it remembers, per session, action and limit, whether
    everything fitted last time; it could remember the last cut) chooses what a new renderer's
    search chooses for the same plan; and at the end a cold editor renders the warm one's bytes.
    The exact count of a cut is not monotone in what it keeps (a dropped turn brings back its
    summary lines, the first cut adds <truncated_context>), so a search that walked from the last
    render's cut to the nearest crossing fails this (checked)."""
    messages = data.draw(st.sampled_from(CASES[domain]), label="conversation")
    # Budgets the same after every message (a search could start from the last cut at the same
    # limit), and budgets under the whole count wherever that is (the budget's own digits count too).
    fixed = data.draw(st.lists(st.integers(120, 500), min_size=2, max_size=2), label="budgets")
    under = data.draw(st.lists(st.integers(4, 400), min_size=2, max_size=2), label="tokens under the whole count")
    warm = ContextEditor(domain, "memory://", model=model)
    searched = []
    original = Renderer._fit

    def fit(self: Renderer, plan: Any, state: Any) -> Any:
        kept, probe = original(self, plan, state)
        fresh = Renderer(self.domain, model=self.model, scorer=self.scorer, system=self.system, window=self.window,
                         condense=self.condense)
        again, other = original(fresh, plan, state)
        assert (kept, probe.xml) == (again, other.xml), (plan.action, plan.limit, state.round)
        searched.append(kept != plan.sizes())
        return kept, probe

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Renderer, "_fit", fit)
        for message in messages:
            warm.add("s", {**message, "timestamp": STAMP})
            for action, spec in warm.domain.actions.items():
                whole = warm.render("s", action, budget=100_000).tokens + spec.safety_margin
                for budget in fixed + [max(whole - d, 1) for d in under]:
                    rendered(warm, "s", action, budget)
    assert sum(searched) > len(messages)  # the searches ran
    for action, spec in warm.domain.actions.items():
        whole = warm.render("s", action, budget=100_000).tokens + spec.safety_margin
        for budget in fixed + [max(whole - d, 1) for d in under]:
            # (the cold editor is given the warm one's loaded domain: configuration, read in 0.3 s)
            assert rendered(warm, "s", action, budget) == cold(warm.store, warm.domain, model, "s", action, budget), (action, budget)


@pytest.fixture(scope="module")
def sgd(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if not SGD_DEV.is_dir():
        pytest.skip(f"no SGD dev split at {SGD_DEV}")
    from context_editor.bench.sgd import load_sgd

    return load_sgd(SGD_DEV, tmp_path_factory.mktemp("sgd"), limit=40)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_sgd_dialogues_render_warm_as_cold(sgd, data):
    """SGD dev dialogues of one service one after another in one session (the imported domain's
    minimal `track`, near its budget as the session grows), rendered after each new message."""
    single = sorted({d.domains[0] for d in sgd.dialogues if len(d.domains) == 1})
    domain = data.draw(st.sampled_from(single), label="service")
    dialogues = [d for d in sgd.dialogues if d.domains == (domain,)]
    turns = [u for d in dialogues for u in d.utterances][:120]
    start = data.draw(st.integers(0, max(0, len(turns) - 8)), label="read at once")
    budget = data.draw(st.sampled_from([None, 120, 250, 400]), label="budget")
    stamp = sgd.now.isoformat()
    path = sgd.domain_files[domain]
    warm = ContextEditor(path, "memory://")
    actions = sorted(warm.domain.actions)
    if start:
        warm.ingest("s", [{"role": u.role, "content": u.text, "timestamp": stamp} for u in turns[:start]])
    for step, u in enumerate(turns[start:start + 8]):
        warm.add("s", {"role": u.role, "content": u.text, "timestamp": stamp})
        action = actions[step % len(actions)]
        xml = rendered(warm, "s", action, budget)
        assert xml == cold(warm.store, path, None, "s", action, budget), (domain, step, action, budget)


FRESH = """
import json, sys
from context_editor import ContextEditor
from context_editor.errors import BudgetError
asks = json.loads(sys.argv[1])
out, editors = [], {}
for domain, url, session, action, budget in asks:
    editor = editors.get(url) or editors.setdefault(url, ContextEditor(domain, url))
    try:
        out.append(editor.render(session, action, budget=budget).xml)
    except BudgetError as exc:
        out.append(f"over budget: {exc}")
print(json.dumps(out))
"""


def test_a_fresh_process_renders_the_bytes_a_warm_one_rendered(tmp_path):
    """Every golden conversation, rendered after each of its messages in this process (an action
    in turn), then each action at two budgets, warm; read by a new Python process: byte for byte."""
    asks: list[list[Any]] = []
    warm_xml: list[str] = []
    for domain in DOMAINS:
        url = f"sqlite:///{tmp_path}/{domain}.db"
        warm = ContextEditor(domain, url)
        for n, messages in enumerate(CASES[domain]):
            session = f"c{n}"
            actions = sorted(warm.domain.actions)
            for i, message in enumerate(messages):
                warm.add(session, {**message, "timestamp": STAMP})
                rendered(warm, session, actions[i % len(actions)], 300 if i % 2 else None)
            for action in actions:
                for budget in (None, 300):
                    asks.append([domain, url, session, action, budget])
                    warm_xml.append(rendered(warm, session, action, budget))
    fresh = subprocess.run([sys.executable, "-c", FRESH, json.dumps(asks)], cwd=ROOT, capture_output=True, text=True,
                           check=True)
    assert json.loads(fresh.stdout) == warm_xml
