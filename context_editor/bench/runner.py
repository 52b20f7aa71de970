"""The harness: feed a dataset's dialogues through the editors and measure as it goes.

One `ContextEditor` per imported domain (in-memory store), one session per dialogue. Every
utterance is ingested into the editor of each of the dialogue's domains; after each user
utterance that has gold, the harness scores the frames, sizes the five contexts (full history,
last 5 and 10 utterances, the editor's `track` context of the frame domains — one envelope for
all of them, `render_together` — and the most recent utterances that fit in the editor's tokens) and checks which
gold values each still contains. Ingest and render calls are timed one by one.
"""

from __future__ import annotations

import gc
import time
from collections import defaultdict
from dataclasses import dataclass
from html import unescape

from ..domain import load_domain
from ..pipeline import ContextEditor, carried_for, render_together
from .contexts import HistoryMeter
from .dataset import Dataset, Dialogue, Utterance
from .metrics import DomainScore, Gold, Predicted, contained, norm, scored_value
from .progress import Progress

GENERAL_ACTION = "track"


@dataclass
class TurnRow:
    """Context sizes and coverage after one scored user utterance."""

    turn: int  # index of the utterance in its dialogue (user and system turns both count)
    tokens: dict[str, int]  # context name -> tokens
    gold_values: int  # surface gold values in play
    covered: dict[str, int]  # context name -> how many of them it contains


class Harness:
    def __init__(self, dataset: Dataset, envelope: bool = True, carry: bool = True, activation: bool = True):
        """`envelope`: one context for the turn's frame domains (`render_together`); without it,
        each frame domain's own context, their tokens added up (the ablation's "before").
        `carry`: each message is offered what the dialogue's other domains hold for the domain's
        `carry:` fields (`add_together`'s carries). `activation`: a turn whose domains the dataset
        gives (SGD's frames) names them in its `domains` metadata, so the other domains keep it
        in their history without reading values from it; without it, every domain reads every turn."""
        self.ds = dataset
        self.envelope, self.carry, self.activation = envelope, carry, activation
        self.editors = {name: ContextEditor(load_domain(path), "memory://") for name, path in dataset.domain_files.items()}
        self.scores: dict[str, DomainScore] = defaultdict(DomainScore)
        self.rows: list[TurnRow] = []
        self.turn_joint: list[float] = []
        self.ingest_ms: list[float] = []
        self.render_ms: list[float] = []
        self.messages = 0

    def run(self, label: str) -> None:
        with Progress(label, len(self.ds.dialogues), "dialogues") as bar:
            for d in self.ds.dialogues:
                self.dialogue(d)
                bar.advance()

    def close(self) -> None:
        """Drop the editors and their in-memory sessions once everything is scored, so that the
        measurements that follow (the scaling run) do not share a heap with thousands of sessions."""
        self.editors.clear()
        gc.collect()

    def dialogue(self, d: Dialogue) -> None:
        meter = HistoryMeter()
        stamp = self.ds.now.isoformat()
        parts = [(self.editors[name], d.id) for name in d.domains]
        for t, u in enumerate(d.utterances):
            msg: dict[str, object] = {"role": u.role, "content": u.text, "timestamp": stamp}
            if self.activation and u.domains:
                msg["domains"] = list(u.domains)
            for editor, session in parts:  # add_together, with each domain's ingest timed alone
                carried = carried_for(editor, parts) if self.carry else []
                start = time.perf_counter()
                editor.add(session, msg, carried=carried)
                self.ingest_ms.append((time.perf_counter() - start) * 1000)
            self.messages += 1
            meter.add(u.role, u.text)
            if u.frames is not None:
                self._score(d, t, u, meter)

    def predicted(self, domain: str, session: str) -> dict[str, Predicted]:
        """The editor's values of the fields gold can speak about, as strings to compare."""
        editor = self.editors[domain]
        state = editor.state(session)
        out = {}
        for name in self.ds.scored_fields[domain]:
            fs = state.fields.get(name)
            if fs is None or fs.value is None:
                continue
            items = tuple(str(v) for v in fs.value) if isinstance(fs.value, list) else ()
            value = scored_value(fs.value, self.ds.currency, self.ds.no_preference)
            out[name] = Predicted(value, fs.provenance.text if fs.provenance else None, items)
        return out

    def _score(self, d: Dialogue, t: int, u: Utterance, meter: HistoryMeter) -> None:
        preds = {name: self.predicted(name, d.id) for name in d.domains}
        frames: dict[str, dict[str, Gold]] = dict(u.frames or {})
        if self.ds.frames_from_predictions:
            for name, p in preds.items():
                if p:
                    frames.setdefault(name, {})
        joint = 1.0
        for name, gold in frames.items():
            joint *= self.scores[name].add(gold, preds[name])
        self.turn_joint.append(joint)

        # One envelope for the turn's frame domains: each turn and summary line once, one budget.
        # Its coverage is read off the text the model reads: XML entities unescaped ("Chili's Grill
        # &amp; Bar" holds "Chili's Grill & Bar"), as the windows' plain text is.
        tokens, texts = meter.sizes(), meter.texts()
        tokens["editor"], texts["editor"] = 0, ""
        if frames and self.envelope:
            start = time.perf_counter()
            ctx = render_together([(self.editors[name], d.id) for name in frames], GENERAL_ACTION)
            self.render_ms.append((time.perf_counter() - start) * 1000)
            tokens["editor"], texts["editor"] = ctx.tokens, norm(unescape(ctx.xml))
        for name in frames if not self.envelope else ():
            start = time.perf_counter()
            alone = self.editors[name].render(d.id, GENERAL_ACTION)
            self.render_ms.append((time.perf_counter() - start) * 1000)
            tokens["editor"] += alone.tokens
            texts["editor"] += norm(unescape(alone.xml))
        tokens["window_equal_tokens"], texts["window_equal_tokens"] = meter.equal_window(tokens["editor"])
        values = [g for gold in frames.values() for g in gold.values() if g.surface]
        covered = {k: sum(contained(text, g) for g in values) for k, text in texts.items()}
        self.rows.append(TurnRow(t, tokens, len(values), covered))
