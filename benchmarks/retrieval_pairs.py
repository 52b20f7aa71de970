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
answer's place cost the others). A phone or passport number, which every context masks (personal
data), counts when its sentence is there with the number masked. Also: render latency with retrieval on against off (wall p50, the same
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
from long_memory import ACTION, FREE, conversation, plant, withheld  # noqa: E402

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
# The same questions in other words: no word (en) or character bigram (zh) in common with the
# answer, so only dense recall (`--dense`) can match them.
PARAPHRASES = {
    "en": ["Which foods or medicines could make me ill?", "How do I get around, and which entrances suit me?",
           "Which airline loyalty code should go on the booking?", "Which travel document ID did I give?",
           "What kind of food suits my diet?", "What age is the child coming along?", "How should you address me?",
           "How can you reach me by mobile?", "Which amenity is essential where we stay?",
           "What loyalty tier do I hold with the lodging brand?",
           "What time is my deadline to return at the end of the trip?", "Which ingredients do I refuse?"],
    "zh": ["哪些东西会让我身体不适？", "我行动方面有什么特殊情况？", "航空公司会员卡号给过你吗？", "出国证件上的编码多少？",
           "饮食上有什么讲究？", "孩子几岁了？", "怎么称呼我？", "怎么打电话联系到我？", "住的地方一定要有什么设施？",
           "我在那个住宿品牌是什么等级？", "行程结束那天几点要赶回去？", "哪些食材我不碰？"],
}
REPLY = {"en": "Let me check.", "zh": "我查一下。"}
assert all(len(QUESTIONS[lang]) == len(PARAPHRASES[lang]) == len(FREE[lang]) for lang in QUESTIONS)


def question_for(language: str, text: str, questions: dict[str, list[str]] = QUESTIONS) -> str:
    prefixes = [t.split("{}")[0] for t, _ in FREE[language]]
    i = next(i for i, p in enumerate(prefixes) if text.startswith(p) and (p or i == 0))
    return questions[language][i]


def holds(fact: object, text: str) -> bool:
    """The fact's value is in the context, or for a phone or passport number (personal data every
    context masks) its sentence with the number masked, as long_memory scores it."""
    masked = withheld(fact)  # type: ignore[arg-type]
    return (masked if masked is not None else fact.surface).lower() in text  # type: ignore[attr-defined]


def run(language: str, rounds: int, seed: int, budgets: list[int], paraphrase: bool = False,
        embedder: object | None = None) -> dict:
    facts = [f for f in plant(language, rounds, seed) if f.field is None]
    conv = conversation(language, rounds, facts=plant(language, rounds, seed))
    store = open_store("memory://")
    on = ContextEditor("travel", store, retrieval=True)
    off = ContextEditor("travel", store)
    editors = [("off", off), ("on", on)]
    if embedder is not None:
        editors.append(("dense", ContextEditor("travel", store, embedder=embedder)))  # type: ignore[arg-type]
    on.ingest("s", conv)
    names = [n for n, _ in editors]
    hits = {b: {n: 0 for n in names} for b in budgets}
    held = {b: {n: 0.0 for n in names} for b in budgets}  # share of all 20 facts in the context, summed over questions
    times: dict[str, list[float]] = {n: [] for n in names}
    retrieved_shown = 0
    for fact in facts:
        on.ingest("s", [{"role": "user", "content": question_for(language, fact.text, PARAPHRASES if paraphrase else QUESTIONS)},
                        {"role": "assistant", "content": REPLY[language]}])
        for budget in budgets:
            for name, editor in editors:
                start = time.perf_counter()
                ctx = editor.render("s", ACTION, budget=budget)
                times[name].append((time.perf_counter() - start) * 1000)
                text = html.unescape(ctx.xml).lower()
                hits[budget][name] += holds(fact, text)
                held[budget][name] += sum(holds(f, text) for f in facts) / len(facts)
                retrieved_shown += name != "off" and 'reason="retrieved"' in ctx.xml
    return {"language": language, "seed": seed, "pairs": len(facts), "hits": hits, "held": held, "render_ms": times,
            "renders_with_retrieved": retrieved_shown}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--budgets", default="500,700,1000")
    ap.add_argument("--paraphrase", action="store_true",
                    help="ask in other words (no shared word or bigram with the answer) instead of the direct questions")
    ap.add_argument("--dense", action="store_true",
                    help="add a third editor: lexical + dense recall with the MiniLM embedder (the [embed] extra)")
    ap.add_argument("--out", default=None, help="default benchmarks/out/retrieval_pairs[_paraphrase][_dense].json")
    args = ap.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    embedder = None
    if args.dense:
        from context_editor.memory.minilm import MiniLMEmbedder

        embedder = MiniLMEmbedder()
    runs = [run(lang, args.rounds, seed, budgets, args.paraphrase, embedder) for lang in ("zh", "en")
            for seed in range(args.seeds)]
    out = Path(args.out or ROOT / "benchmarks" / "out" /
               f"retrieval_pairs{'_paraphrase' if args.paraphrase else ''}{'_dense' if args.dense else ''}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rounds": args.rounds, "seeds": args.seeds, "paraphrase": args.paraphrase,
                               "runs": runs}, indent=2, ensure_ascii=False))
    names = list(runs[0]["render_ms"])
    label = {"off": "retrieval off", "on": "lexical", "dense": "lexical + dense"}
    print("| lang | budget | pairs | answer in context: " + " | ".join(label[n] for n in names)
          + " | all 20 facts held: " + " | ".join(label[n] for n in names) + " |")
    print("|---" * (3 + 2 * len(names)) + "|")
    for lang in ("zh", "en"):
        mine = [r for r in runs if r["language"] == lang]
        pairs = sum(r["pairs"] for r in mine)
        for b in budgets:
            answer = [sum(r["hits"][b][n] for r in mine) / pairs for n in names]
            kept = [sum(r["held"][b][n] for r in mine) / pairs for n in names]
            print(f"| {lang} | {b} | {pairs} | " + " | ".join(f"{x:.1%}" for x in answer) + " | "
                  + " | ".join(f"{x:.1%}" for x in kept) + " |")
    for name in names:
        print(f"render p50 at {args.rounds * 2}+ messages, retrieval {name}: "
              f"{statistics.median(t for r in runs for t in r['render_ms'][name]):.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
