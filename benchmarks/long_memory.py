"""Long-conversation memory: does the action context still hold what the user said 300 rounds ago?

    python benchmarks/long_memory.py [--rounds 300] [--seeds 3] [--budget 2000]

For each language (zh, en) and seed, one conversation of --rounds user rounds of ordinary trip
talk, with at least 40 facts planted at random rounds:
- 20 in schema fields: each of the 8 user fields of the travel domain's `plan_trip` action said
  two or three times with different values (a later one is a change of mind: at a checkpoint
  only a field's current value is a fact to hold, so a superseded one is not counted);
- 20 outside any field: allergies, mobility needs, IDs, numbers, names, preferences.
At rounds 50, 100, 200 and 300 each context is scored by the share of the facts planted so
far (and current) that it contains:
- editor: `render(session, "plan_trip", budget=--budget)`; a schema fact counts when its field
  holds the expected value, an out-of-field fact when its distinctive value is in the text, or
  for a phone or passport number (personal data every context masks, `inject.pii`) when the
  sentence is there with the number masked: the column "(of them masked)" counts those;
- last 10 rounds: the transcript of the last 10 rounds, verbatim;
- equal tokens: the newest messages of the history that fit in the editor context's tokens;
- full history: every message.
A window counts a fact when the words that stated it are in its text. Tokens are exact (o200k).
Writes benchmarks/out/long_memory.json and prints the markdown table of the README.
"""

from __future__ import annotations

import argparse
import html
import json
import random
import statistics
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from context_editor import ContextEditor  # noqa: E402
from context_editor.inject import pii  # noqa: E402
from context_editor.inject.tokens import count_tokens  # noqa: E402
from long_conversation import POOL as ZH_POOL  # noqa: E402

CHECKPOINTS = (50, 100, 200, 300)
ACTION = "plan_trip"

EN_POOL = [
    ("user", "What's the weather like there this week?"),
    ("assistant", "Mostly sunny, highs around 78°F and lows near 60°F; bring a light jacket for the evenings."),
    ("user", "Which neighbourhood is nicest for walking?"),
    ("assistant", "The old town is compact and pedestrian friendly, with cafés every few blocks."),
    ("user", "Are there good seafood places near the harbour?"),
    ("assistant", "Several; the fish market restaurants are popular, and most open at 11 am."),
    ("user", "Do I need to book museum tickets in advance?"),
    ("assistant", "For the art museum yes, timed tickets sell out on weekends; the history museum is walk-in."),
    ("user", "How far is the hotel area from the airport?"),
    ("assistant", "About 25 minutes by taxi, or 40 minutes by the airport train."),
    ("user", "How much luggage can we check?"),
    ("assistant", "Usually one bag up to 23 kg per person in economy; it depends on the airline."),
    ("user", "Is the island tour worth it?"),
    ("assistant", "Yes, the boat leaves twice a day and the snorkelling is excellent."),
    ("user", "Is it easy to get around by taxi?"),
    ("assistant", "In the centre yes; for day trips a private driver costs roughly 150 to 200 a day."),
    ("user", "Okay, thanks."),
    ("assistant", "You're welcome. Anything else you'd like to know?"),
    ("user", "Does the botanical garden charge admission?"),
    ("assistant", "Adults pay about 18; it is quietest right after opening."),
]


@dataclass(frozen=True)
class Fact:
    round: int
    text: str  # the user message that plants it
    surface: str  # the words a window must contain
    field: str | None = None  # schema fact: the field ...
    value: str | None = None  # ... and the text of its expected value in <state>


# Each schema field with (message, surface, expected state text) per value; two values are planted.
SCHEMA = {
    "en": {
        "origin": [(f"I want to fly from {c}.", f"from {c}", c) for c in ("Boston", "Chicago", "Seattle", "Atlanta")],
        "destination": [(f"The destination is {c}.", f"destination is {c}", c) for c in ("Denver", "Miami", "Phoenix", "Portland")],
        "departure_date": [(f"I'd like to leave on June {d}.", f"June {d}", f"2024-06-{d:02d}") for d in (3, 5, 7, 9)],
        "return_date": [(f"We come back on June {d}.", f"June {d}", f"2024-06-{d:02d}") for d in (21, 24, 26, 28)],
        "trip_days": [(f"The trip is for {n} days.", f"for {n} days", str(n)) for n in (5, 8, 11, 13)],
        "travelers": [(f"There will be {n} travelers.", f"{n} travelers", str(n)) for n in (2, 3, 4, 6)],
        "budget_max": [(f"My budget is under {n} dollars.", f"under {n} dollars", f"{n} USD") for n in (3500, 4200, 5600, 7300)],
        "flight_exclusions": [("No red-eye flights please.", "No red-eye", "red_eye"), ("No layovers please.", "No layovers", "layover")],
    },
    "zh": {
        "origin": [(f"我从{c}出发。", f"从{c}出发", c) for c in ("北京", "广州", "杭州", "南京")],
        "destination": [(f"目的地是{c}。", f"目的地是{c}", c) for c in ("成都", "昆明", "西安", "厦门")],
        "departure_date": [(f"6月{d}日出发。", f"6月{d}日出发", f"2024-06-{d:02d}") for d in (3, 5, 7, 9)],
        "return_date": [(f"6月{d}日回来。", f"6月{d}日回来", f"2024-06-{d:02d}") for d in (21, 24, 26, 28)],
        "trip_days": [(f"这次玩{n}天。", f"玩{n}天", str(n)) for n in (5, 8, 11, 13)],
        "travelers": [(f"一共{n}个人。", f"一共{n}个人", str(n)) for n in (2, 3, 4, 6)],
        "budget_max": [(f"预算{n}元以内。", f"预算{n}元", f"{n} CNY") for n in (3500, 4200, 5600, 7300)],
        "flight_exclusions": [("不要红眼航班。", "不要红眼", "red_eye"), ("不要转机。", "不要转机", "layover")],
    },
}

# Facts no field holds: (message template, value pool). The value is the surface to find.
FREE = {
    "en": [
        ("I'm allergic to {}.", ["peanuts", "shellfish", "penicillin", "sesame"]),
        ("I travel with a {}, so I need step-free access.", ["wheelchair", "walking frame", "guide dog"]),
        ("My frequent flyer number is {}.", ["FF-{:06d}"]),
        ("My passport number is {}.", ["E{:08d}"]),
        ("I only eat {} meals.", ["vegetarian", "halal", "kosher", "gluten-free"]),
        ("My daughter is {}.", ["{} years old"]),
        ("Please call me {}.", ["Dr. Okafor", "Ms. Lindqvist", "Mr. Tanaka", "Professor Reyes"]),
        ("My phone number is {}.", ["+1-555-{:04d}"]),
        ("The hotel must have a {}.", ["rooftop pool", "24-hour gym", "kitchenette", "laundry room"]),
        ("I'm a {} member of the hotel chain.", ["Platinum Elite", "Gold Circle", "Diamond Club"]),
        ("I must be back by {} on the last day for a meeting.", ["4:45 pm", "3:15 pm", "5:30 pm"]),
        ("I never eat {}.", ["mushrooms", "cilantro", "olives", "anchovies"]),
    ],
    "zh": [
        ("我对{}过敏。", ["花生", "海鲜", "青霉素", "芝麻"]),
        ("我出行需要{}，要无障碍通道。", ["轮椅", "助行器", "导盲犬"]),
        ("我的常旅客号是{}。", ["FF-{:06d}"]),
        ("我的护照号是{}。", ["E{:08d}"]),
        ("我只吃{}。", ["素食", "清真餐", "无麸质餐"]),
        ("我女儿今年{}。", ["{}岁"]),
        ("请叫我{}。", ["欧阳老师", "林医生", "司马教授", "诸葛经理"]),
        ("我的手机号是{}。", ["139{:08d}"]),
        ("酒店必须有{}。", ["屋顶泳池", "24小时健身房", "小厨房", "洗衣房"]),
        ("我是这家酒店集团的{}会员。", ["钻石卡", "白金卡", "金卡"]),
        ("最后一天我必须在{}前回来开会。", ["下午4点45分", "下午3点15分", "下午5点半"]),
        ("我从不吃{}。", ["蘑菇", "香菜", "橄榄", "苦瓜"]),
    ],
}


def free_value(pattern: str, rng: random.Random, used: set[str]) -> str:
    while True:
        value = pattern.format(rng.randint(3, 17) if "岁" in pattern or "years" in pattern else rng.randint(0, 99_999_999 if "{:08d}" in pattern else 999_999))
        if value not in used:
            used.add(value)
            return value


def plant(language: str, rounds: int, seed: int) -> list[Fact]:
    rng = random.Random(f"{language}-{seed}")
    slots = rng.sample(range(2, rounds + 1), 40)
    facts: list[Fact] = []
    for i, (field, options) in enumerate(SCHEMA[language].items()):
        # Every field twice, the first four a third time: 20 schema plants.
        for text, surface, value in rng.sample(options, 3 if i < 4 else 2):
            facts.append(Fact(slots.pop(), text, surface, field, value))
    used: set[str] = set()
    templates = FREE[language]
    for i in range(20):
        template, pool = templates[i % len(templates)]
        choices = [p for p in pool if p not in used]
        pattern = rng.choice(choices or pool)
        value = free_value(pattern, rng, used) if "{" in pattern else pattern
        used.add(value)
        facts.append(Fact(slots.pop(), template.format(value), value))
    return sorted(facts, key=lambda f: f.round)


def conversation(language: str, rounds: int, facts: list[Fact]) -> list[dict]:
    pool = ZH_POOL if language == "zh" else EN_POOL
    by_round = {f.round: f for f in facts}
    start = datetime(2024, 5, 1, 9, tzinfo=timezone.utc)
    msgs: list[tuple[str, str]] = []
    for r in range(1, rounds + 1):
        if r in by_round:
            msgs += [("user", by_round[r].text), ("assistant", "好的，记下了。" if language == "zh" else "Got it, noted.")]
        else:
            i = (2 * r) % len(pool)
            msgs += [pool[i], pool[i + 1]]
    return [{"role": role, "content": c, "timestamp": (start + timedelta(minutes=i)).isoformat()}
            for i, (role, c) in enumerate(msgs)]


def transcript(msgs: list[dict]) -> str:
    return "\n".join(f"{m['role']}: {m['content']}" for m in msgs)


def current(facts: list[Fact], upto: int) -> list[Fact]:
    """Facts planted by round `upto` that still hold (a field's latest value; list fields accumulate)."""
    planted = [f for f in facts if f.round <= upto]
    latest = {f.field: f for f in planted if f.field and f.field != "flight_exclusions"}
    return [f for f in planted if f.field is None or f.field == "flight_exclusions" or latest[f.field] is f]


def withheld(fact: Fact) -> str | None:
    """The sentence as every context shows it when its value is personal data (a phone or passport
    number): the product masks it by policy (`inject.pii`), so the context holds the fact that it
    was said, `[phone number]`, never the number. None for a fact whose value may be shown."""
    masked = pii.mask(fact.text, set())
    return masked if masked != fact.text else None


def editor_holds(fact: Fact, root: ET.Element, text: str) -> bool:
    """A schema fact: its field holds the value. Any other fact: its value is in the text, or for a
    personal value the masked sentence is (the line was kept; the policy withholds the value)."""
    if fact.field:
        node = root.find(f"state/field[@name='{fact.field}']")
        return node is not None and fact.value in (node.text or "").split(", ")
    masked = withheld(fact)
    return (masked if masked is not None else fact.surface).lower() in text.lower()


def window_holds(fact: Fact, text: str) -> bool:
    return fact.surface.lower() in text.lower()


def equal_tokens_window(msgs: list[dict], tokens: int) -> str:
    """The newest messages of the history that fit in `tokens`."""
    kept: list[dict] = []
    for m in reversed(msgs):
        if count_tokens(transcript([m, *kept])) > tokens:
            break
        kept.insert(0, m)
    return transcript(kept)


def run(language: str, rounds: int, seed: int, budget: int) -> list[dict]:
    facts = plant(language, rounds, seed)
    conv = conversation(language, rounds, facts)
    editor = ContextEditor("travel", "memory://")
    rows, done = [], 0
    for checkpoint in [c for c in CHECKPOINTS if c <= rounds]:
        upto = next((i for i, m in enumerate(conv) if m["role"] == "user" and
                     sum(1 for x in conv[: i + 1] if x["role"] == "user") > checkpoint), len(conv))
        editor.ingest("s", conv[done:upto])
        done = upto
        history = conv[:upto]
        ctx = editor.render("s", ACTION, budget=budget)
        root = ET.fromstring(ctx.xml)
        text = html.unescape(ctx.xml)
        user_rounds = [i for i, m in enumerate(history) if m["role"] == "user"]
        last10 = transcript(history[user_rounds[-10]:])
        equal = equal_tokens_window(history, ctx.tokens)
        full = transcript(history)
        truth = current(facts, checkpoint)
        schema = [f for f in truth if f.field]
        free = [f for f in truth if not f.field]

        def share(holds, subset) -> float:
            return sum(1 for f in subset if holds(f)) / len(subset) if subset else 1.0

        rows.append({
            "language": language, "seed": seed, "round": checkpoint, "facts": len(truth),
            "schema_facts": len(schema), "free_facts": len(free),
            "editor": {"tokens": ctx.tokens, "share": share(lambda f: editor_holds(f, root, text), truth),
                       "schema": share(lambda f: editor_holds(f, root, text), schema),
                       "free": share(lambda f: editor_holds(f, root, text), free),
                       "missed": [f.text for f in truth if not editor_holds(f, root, text)], "dropped": ctx.dropped,
                       "withheld": sum(1 for f in truth if withheld(f) and editor_holds(f, root, text))},
            "last_10_rounds": {"tokens": count_tokens(last10), "share": share(lambda f: window_holds(f, last10), truth)},
            "equal_tokens": {"tokens": count_tokens(equal), "share": share(lambda f: window_holds(f, equal), truth)},
            "full_history": {"tokens": count_tokens(full), "share": share(lambda f: window_holds(f, full), truth)},
        })
    return rows


def table(rows: list[dict]) -> str:
    out = ["| lang | round | facts held (schema / outside) | editor tokens (% of full) | editor facts (of them masked) | last 10 rounds: tokens / facts"
           " | equal tokens: facts | full history: tokens / facts |", "|---|---|---|---|---|---|---|---|"]
    for language in ("zh", "en"):
        for checkpoint in CHECKPOINTS:
            group = [r for r in rows if r["language"] == language and r["round"] == checkpoint]
            if not group:
                continue

            def med(path: str, key: str) -> float:
                return statistics.median(r[path][key] for r in group)

            def mean(path: str, key: str) -> float:
                return statistics.mean(r[path][key] for r in group)

            full = med("full_history", "tokens")
            out.append(
                f"| {language} | {checkpoint} | {statistics.median(r['facts'] for r in group):.0f} "
                f"({statistics.median(r['schema_facts'] for r in group):.0f} / {statistics.median(r['free_facts'] for r in group):.0f}) "
                f"| {med('editor', 'tokens'):.0f} ({med('editor', 'tokens') / full:.1%}) | **{mean('editor', 'share'):.1%}** ({statistics.median(r['editor']['withheld'] for r in group):.0f}) "
                f"| {med('last_10_rounds', 'tokens'):.0f} / {mean('last_10_rounds', 'share'):.1%} "
                f"| {mean('equal_tokens', 'share'):.1%} | {full:.0f} / {mean('full_history', 'share'):.1%} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--budget", type=int, default=2000, help="the editor context's token budget")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "out" / "long_memory.json"))
    args = ap.parse_args()
    rows = [r for language in ("zh", "en") for seed in range(args.seeds) for r in run(language, args.rounds, seed, args.budget)]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"rounds": args.rounds, "seeds": args.seeds, "budget": args.budget,
                                          "action": ACTION, "rows": rows}, ensure_ascii=False, indent=1), "utf-8")
    print(table(rows))
    for r in rows:
        if r["editor"]["missed"]:
            print(f"{r['language']} seed {r['seed']} round {r['round']}: editor missed {r['editor']['missed']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
