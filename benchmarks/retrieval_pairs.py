"""Retrieval measured with question/answer pairs: does the context hold the answer to what the
user just asked, with retrieval on and off, at equal budget?

    python benchmarks/retrieval_pairs.py [--rounds 300] [--seeds 2] [--budgets 500,700,1000]

The conversations and facts are those of benchmarks/long_memory.py: per language (zh, en) and
seed, 300 rounds with 40 planted facts. The pairs are its 20 facts outside any schema field
(allergy, mobility aid, IDs, phone number, names, diet, deadlines …): the question is a user turn
asking for the fact without its value ("What am I allergic to?", "我对什么过敏？"), the answer
is the planted message. After the whole conversation, each question is added as the latest user
turn (with a short assistant reply, as in a live session) and `plan_trip` is rendered with
retrieval off and on, from the same store, at the same budget. A pair counts when the answer's
value is in the context; beside it, the share of all 20 facts the same contexts hold (what the
answer's place cost the others). Also: render latency with retrieval on against off (wall p50, the same
renders). Writes benchmarks/out/retrieval_pairs.json and prints the README table.
"""

from __future__ import annotations

import argparse
import html
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from context_editor import ContextEditor  # noqa: E402
from context_editor.store import open_store  # noqa: E402
from long_memory import ACTION, FREE, conversation, plant  # noqa: E402

# One question per FREE template (same order), asking for the value without saying it.
QUESTIONS = {
    "en": ["What am I allergic to?", "What do I travel with, and what access do I need?", "What is my frequent flyer number?",
           "What is my passport number?", "What meals do I eat?", "How old is my daughter?", "What should you call me?",
           "What is my phone number?", "What must the hotel have?", "What member am I of the hotel chain?",
           "By when must I be back on the last day?", "What do I never eat?"],
    "zh": ["我对什么过敏？", "我出行需要什么？", "我的常旅客号是多少？", "我的护照号是多少？", "我只吃什么？", "我女儿今年多大？",
           "你该叫我什么？", "我的手机号是多少？", "酒店必须有什么？", "我是这家酒店集团的什么会员？", "最后一天我必须几点前回来？",
           "我从不吃什么？"],
}
REPLY = {"en": "Let me check.", "zh": "我查一下。"}
assert all(len(QUESTIONS[lang]) == len(FREE[lang]) for lang in QUESTIONS)


def question_for(language: str, text: str) -> str:
    prefixes = [t.split("{}")[0] for t, _ in FREE[language]]
    i = next(i for i, p in enumerate(prefixes) if text.startswith(p) and (p or i == 0))
    return QUESTIONS[language][i]


def run(language: str, rounds: int, seed: int, budgets: list[int]) -> dict:
    facts = [f for f in plant(language, rounds, seed) if f.field is None]
    conv = conversation(language, rounds, facts=plant(language, rounds, seed))
    store = open_store("memory://")
    on = ContextEditor("travel", store, retrieval=True)
    off = ContextEditor("travel", store)
    on.ingest("s", conv)
    hits = {b: {"on": 0, "off": 0} for b in budgets}
    held = {b: {"on": 0.0, "off": 0.0} for b in budgets}  # share of all 20 facts in the context, summed over questions
    times: dict[str, list[float]] = {"on": [], "off": []}
    retrieved_shown = 0
    for fact in facts:
        on.ingest("s", [{"role": "user", "content": question_for(language, fact.text)},
                        {"role": "assistant", "content": REPLY[language]}])
        for budget in budgets:
            for name, editor in (("off", off), ("on", on)):
                start = time.perf_counter()
                ctx = editor.render("s", ACTION, budget=budget)
                times[name].append((time.perf_counter() - start) * 1000)
                text = html.unescape(ctx.xml).lower()
                hits[budget][name] += fact.surface.lower() in text
                held[budget][name] += sum(f.surface.lower() in text for f in facts) / len(facts)
                retrieved_shown += name == "on" and 'reason="retrieved"' in ctx.xml
    return {"language": language, "seed": seed, "pairs": len(facts), "hits": hits, "held": held, "render_ms": times,
            "renders_with_retrieved": retrieved_shown}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--budgets", default="500,700,1000")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "out" / "retrieval_pairs.json"))
    args = ap.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    runs = [run(lang, args.rounds, seed, budgets) for lang in ("zh", "en") for seed in range(args.seeds)]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"rounds": args.rounds, "seeds": args.seeds, "runs": runs}, indent=2, ensure_ascii=False))
    print("| lang | budget | pairs | answer in context: retrieval off | retrieval on | all 20 facts held: off | on |")
    print("|---|---|---|---|---|---|---|")
    for lang in ("zh", "en"):
        mine = [r for r in runs if r["language"] == lang]
        pairs = sum(r["pairs"] for r in mine)
        for b in budgets:
            off = sum(r["hits"][b]["off"] for r in mine) / pairs
            on = sum(r["hits"][b]["on"] for r in mine) / pairs
            held_off = sum(r["held"][b]["off"] for r in mine) / pairs
            held_on = sum(r["held"][b]["on"] for r in mine) / pairs
            print(f"| {lang} | {b} | {pairs} | {off:.1%} | **{on:.1%}** | {held_off:.1%} | {held_on:.1%} |")
    for name in ("off", "on"):
        print(f"render p50 at {args.rounds * 2}+ messages, retrieval {name}: "
              f"{statistics.median(t for r in runs for t in r['render_ms'][name]):.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
