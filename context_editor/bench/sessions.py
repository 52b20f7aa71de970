"""Stored sessions to run jobs over (backfill tests and benchmarks/backfill.py).

- `travel_conversations`: generated travel conversations in English and Chinese, each a random
  mix of what travellers say (route, party size, budget, cabin, seat), so a changed domain has
  something to change in some sessions and not in others;
- `sample_conversations`: the bundled domains' sample conversations;
- `sgd_travel_conversations`: SGD dialogues of travel-like services, fed to the travel domain;
- `fill`: ingest (domain, session, messages) into a store.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..pipeline import ContextEditor
from ..resources import domains_dir
from ..store import open_store

Conversation = tuple[str, str, list[dict[str, Any]]]  # (domain, session id, messages)
CITIES = [("Boston", "波士顿"), ("Denver", "丹佛"), ("Seattle", "西雅图"), ("Chicago", "芝加哥"), ("Miami", "迈阿密"),
          ("Shanghai", "上海"), ("Sanya", "三亚"), ("Beijing", "北京"), ("Chengdu", "成都"), ("Xiamen", "厦门")]
CABINS_EN = ["Economy class please.", "Economy class at first... no, premium plus.", "Business class.",
             "Cheap seats are fine.", ""]
CABINS_ZH = ["经济舱就行。", "商务舱。", ""]
SEATS_EN = ["An aisle seat please.", "A seat by the window.", "Window seat.", ""]
SEATS_ZH = ["要靠过道的座位。", "要靠窗。", "要靠走廊的座位。", ""]
BUDGETS = [3000, 8000, 15000, 50000]


def travel_conversations(n: int, seed: int = 0, prefix: str = "gen") -> Iterator[Conversation]:
    """`n` generated travel conversations (about a third in Chinese), the same for the same seed."""
    rng = random.Random(seed)
    start = datetime(2024, 5, 1, 10, 0)
    for i in range(n):
        (o_en, o_zh), (d_en, d_zh) = rng.sample(CITIES, 2)
        day = start + timedelta(days=rng.randrange(60))
        depart = day + timedelta(days=rng.randrange(3, 40))
        people, budget = rng.randint(1, 9), rng.choice(BUDGETS)
        if rng.random() < 0.33:
            turns = [f"你好，我{depart.month}月{depart.day}日想从{o_zh}飞{d_zh}" + ("，不要红眼航班" if rng.random() < 0.5 else ""),
                     "好的，请问几位出行？", f"我们{people}个人，预算{budget}元以内", "需要什么舱位和座位？",
                     rng.choice(CABINS_ZH) + rng.choice(SEATS_ZH)]
        else:
            turns = [f"I want to fly from {o_en} to {d_en} on {depart:%B} {depart.day}"
                     + (", no red-eye flights please." if rng.random() < 0.5 else "."),
                     "How many people are travelling, and what is your budget?",
                     f"We are {people} people. Our budget is under ${budget:,}.", "Any cabin or seat preference?",
                     " ".join(t for t in (rng.choice(CABINS_EN), rng.choice(SEATS_EN)) if t) or "No preference."]
        messages = [{"role": "user" if k % 2 == 0 else "assistant", "content": text or "没有要求。",
                     "timestamp": (day + timedelta(minutes=k)).isoformat()} for k, text in enumerate(turns)]
        yield "travel", f"{prefix}-{i:06d}", messages


def sample_conversations() -> Iterator[Conversation]:
    """The bundled sample conversation of each bundled domain (domains/samples/<domain>_*.jsonl)."""
    for path in sorted((domains_dir() / "samples").glob("*.jsonl")):
        domain = path.stem.split("_", 1)[0]
        messages = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
        yield domain, f"sample-{path.stem}", messages


TRAVEL_LIKE = ("Flights", "Buses", "Hotels", "RentalCars", "Travel")  # SGD services a trip is planned with


def sgd_travel_conversations(data_dir: str | Path, limit: int | None = None,
                             services: tuple[str, ...] = TRAVEL_LIKE) -> Iterator[Conversation]:
    """SGD dialogues that use one of `services` (e.g. Flights_1 for "Flights"), in file order, as
    travel conversations (user and system turns; SGD's dialogues carry no clock, so turns are a
    minute apart from 2019-03-01)."""
    count = 0
    for path in sorted(Path(data_dir).glob("dialogues_*.json*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            dialogues = json.load(f)
        for d in dialogues:
            if not any(s.split("_")[0] in services for s in d["services"]):
                continue
            start = datetime(2019, 3, 1, 9, 0)
            messages = [{"role": "user" if t["speaker"] == "USER" else "assistant", "content": t["utterance"],
                         "timestamp": (start + timedelta(minutes=k)).isoformat()} for k, t in enumerate(d["turns"])]
            yield "travel", f"sgd-{d['dialogue_id']}", messages
            count += 1
            if limit is not None and count >= limit:
                return


def fill(store: Any, conversations: Iterable[Conversation], domains: dict[str, Any] | None = None) -> int:
    """Ingest every conversation into `store` (a URL or a Store) under its domain (a name of a
    bundled domain, or a file given in `domains`); how many were ingested."""
    store = open_store(store) if isinstance(store, str) else store
    editors: dict[str, ContextEditor] = {}
    n = 0
    for domain, session, messages in conversations:
        if domain not in editors:
            editors[domain] = ContextEditor((domains or {}).get(domain, domain), store, cache_sessions=8)
        editors[domain].ingest(session, messages)
        n += 1
    return n
