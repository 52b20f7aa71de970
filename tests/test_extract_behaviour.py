"""Extraction behaviour that golden conversations rely on, one rule at a time, in both languages:
negation scope, enum exclusions, the value nearest a cue, money bounds, proposals and
confirmations, list removal, gazetteer macros, and graceful misses."""

from __future__ import annotations

import pytest

from context_editor import ContextEditor
from context_editor.domain.rulepacks import _macro_text
from context_editor.extract.confirm import confirmation, question_spans
from context_editor.extract.negation import is_negated
from context_editor.transform.fields import CONFIRMED, PROPOSED

TS = "2024-05-01T10:00:00+08:00"  # a Wednesday


def run(domain: str, turns: list[str]) -> ContextEditor:
    """Ingest `turns` ("A: …" is the assistant, anything else the user) into session "s"."""
    editor = ContextEditor(domain, "memory://")
    for t in turns:
        role, text = ("assistant", t[3:]) if t.startswith("A: ") else ("user", t)
        editor.add("s", {"role": role, "content": text, "timestamp": TS})
    return editor


def values(domain: str, *turns: str) -> dict:
    return run(domain, list(turns)).state("s").values()


# ---------------------------------------------------------------- negation

@pytest.mark.parametrize("text, mention, negated", [
    ("不要红色的", "红色", True),
    ("要不要黑色？", "黑色", False),          # an A-not-A question asks, it does not negate
    ("红眼航班也不行", "红眼航班", True),      # a refusal after the mention
    ("skip anything with a stopover", "stopover", True),
    ("no red-eye flights please", "red-eye", True),
    ("黑色，不要白色", "黑色", False),          # the cue is in another clause
    ("要黑色不要白色", "黑色", False),          # 不要 after a mention negates what follows it
    ("I want red, but not blue", "red", False),
])
def test_negation_scope(text, mention, negated):
    start = text.index(mention)
    assert is_negated(text, start, start + len(mention)) is negated


def test_negated_mention_sets_nothing_and_fills_exclusions():
    assert "color" not in values("ecommerce", "我想买卫衣，不要红色")
    assert values("travel", "不要红眼航班，也不要转机")["flight_exclusions"] == ["red_eye", "layover"]
    assert "flight_exclusions" not in values("travel", "有红眼航班吗")  # an affirmed mention excludes nothing


# ---------------------------------------------------------------- enums

def test_canonical_that_is_a_common_word_is_excluded_with_bang():
    assert "cabin_class" not in values("travel", "It's my first trip, a business trip really")
    assert values("travel", "first class please")["cabin_class"] == "first"
    assert values("travel", "要商务舱")["cabin_class"] == "business"


def test_short_latin_values_match_in_their_own_case_only():
    assert "size" not in values("ecommerce", "it's fine, I'm ok")
    assert values("ecommerce", "M please")["size"] == "M"
    assert values("ecommerce", "我穿l码")["size"] == "L"  # the size rule reads any case, then upper-cases


def test_gazetteer_macro_is_a_literal_alternation_longest_first():
    assert _macro_text(["北京", "北京南站", "a.b"]) == r"北京南站|a\.b|北京"


# ---------------------------------------------------------------- values near their cue

def test_each_date_goes_to_the_cue_nearest_it():
    state = values("travel", "下下周一回来下周五出发")  # 下周五 is bound to 出发, not to the 回来 before it
    assert (state["departure_date"], state["return_date"]) == ("2024-05-10", "2024-05-13")


def test_a_clock_time_alone_is_not_a_date():
    assert "departure_date" not in values("travel", "下午2点起飞的那班")


def test_a_date_offset_is_not_a_trip_length():
    state = values("travel", "三天后去三亚玩")
    assert state["departure_date"] == "2024-05-04" and "trip_days" not in state


@pytest.mark.parametrize("text, amount, currency", [
    ("预算五千块", 5000, "CNY"),
    ("预算1.5万以内", 15000, "CNY"),
    ("预算1000到2000", 2000, "CNY"),            # a range: its upper bound is the ceiling
    ("my budget is two thousand dollars", 2000, "USD"),
    ("under $500 please", 500, "USD"),
    ("budget between $1,500 and $2,000", 2000, "USD"),
])
def test_budget_amounts(text, amount, currency):
    assert values("travel", text)["budget_max"] == {"amount": amount, "currency": currency}


@pytest.mark.parametrize("text", ["budget is at least $1000", "订单ORDER-2024-001，5月20日到", "航班MU5101 下午3点"])
def test_lower_bounds_ids_and_dates_are_no_budget(text):
    assert "budget_max" not in values("travel", text)


# ---------------------------------------------------------------- proposals and confirmations

@pytest.mark.parametrize("reply, confirms", [
    ("好的", True), ("对，就这个", True), ("可以啊", True), ("Yes please", True), ("sure, book it", True),
    ("要红色", False), ("不好", False), ("okay-ish", False), ("Right now I'm busy", False), ("嗯……", False),
    ("ok...", False),
])
def test_confirmation_is_a_yes_word_opening_the_reply(reply, confirms):
    assert (confirmation(reply) is not None) is confirms


def test_only_questions_propose():
    text = "推荐这款，现价1999元。要黑色的吗？"
    assert question_spans(text) == [(13, len(text))]


def test_confirmed_proposal_points_at_the_assistant_span():
    editor = run("ecommerce", ["我想买件羽绒服", "A: 这款有黑色和白色，要黑色的吗？", "好的"])
    why = editor.why("s", "color")
    assert why["value"] == "black"
    *offered, confirmed = why["history"]  # every colour offered is logged (a pick could take either)
    assert [h["value"] for h in offered] == ["white", "black"]
    proposed = offered[-1]
    assert (proposed["status"], proposed["reason"]) == ("rejected", PROPOSED)
    assert (confirmed["status"], confirmed["source"], confirmed["reason"]) == ("accepted", "confirmation", CONFIRMED)
    p = why["provenance"]
    assert (p["role"], p["text"], p["message_index"]) == ("assistant", "黑色", 1)


def test_an_unconfirmed_or_stale_proposal_sets_nothing():
    assert "color" not in values("ecommerce", "我想买件羽绒服", "A: 要黑色的吗？", "我再想想")
    assert "color" not in values("ecommerce", "我想买件羽绒服", "A: 要黑色的吗？", "我再看看", "好的")  # next round only
    assert "color" not in values("ecommerce", "我想买件羽绒服", "A: 有黑色现货。", "好的")  # a statement proposes nothing


def test_the_users_own_value_beats_the_confirmed_one():
    assert values("ecommerce", "我想买件羽绒服", "A: 要M码吗？", "好的，不过我要XL")["size"] == "XL"


def test_shall_i_book_then_yes_books_the_flight_and_moves_the_machine():
    editor = run("travel", ["Fly me to Denver next Friday", "A: UA1234 at 8am for $300, shall I book it?", "yes"])
    state = editor.state("s")
    assert state.get("booked_flights") == ["UA1234"] and state.phase == "booked"
    assert editor.why("s", "booked_flights")["history"][-1]["source"] == "confirmation"


def test_assistant_prices_never_become_the_budget():
    state = values("travel", "去三亚", "A: 机票1200元，预算够吗？", "好的")
    assert "budget_max" not in state


# ---------------------------------------------------------------- lists

def test_a_negated_item_leaves_a_list_of_wanted_things():
    editor = run("finance", ["我想配置股票、基金和黄金", "还是不要股票了"])
    assert editor.state("s").get("preferred_asset_class") == ["fund", "gold"]
    assert editor.why("s", "preferred_asset_class")["history"][-1]["source"] == "correction"


def test_dropping_and_adding_in_one_message():
    assert values("finance", "I like stocks", "drop the stocks, bonds instead")["preferred_asset_class"] == ["bond"]


# ---------------------------------------------------------------- unknown phrasing

@pytest.mark.parametrize("domain, text", [
    ("travel", "我外婆想出去走走，你看着办吧"),
    ("travel", "Somewhere warm, whenever works"),
    ("finance", "My grandmother left me something"),
    ("ecommerce", "那个东西还有吗"),
])
def test_unknown_phrasing_degrades_gracefully(domain, text):
    editor = run(domain, [text])
    assert editor.state("s").values() == {}  # nothing invented
    for field in ("budget_max",) if domain != "finance" else ("investment_amount",):
        why = editor.why("s", field)
        assert why["value"] is None and why["history"] == []
        assert why["note"].startswith("no candidate")
