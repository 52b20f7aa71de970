"""A conversation that searches, and searches again, for several kinds of thing (zh and en):
`dialogue: {subject: …}` (a message that names other kinds of thing is not read for values) and
`dialogue: {new_search: <action>}` (a new search replaces the earlier constraints it does not
restate), and `policy: latest` on a list. Each is replayed identically from the edit log."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from context_editor import ContextEditor
from context_editor import audit
from context_editor.domain import lint_domain
from context_editor.domain.kinds import things_named
from context_editor.store import SQLiteStore

EATERY = Path(__file__).resolve().parent / "domains" / "eatery.yaml"
TS = "2024-06-15T10:00:00+00:00"


def talk(*turns: str, domain: Path = EATERY, store: str = "memory://") -> tuple[ContextEditor, dict]:
    editor = ContextEditor(domain, store=store)
    for t in turns:
        role, text = ("assistant", t[3:]) if t.startswith("A: ") else ("user", t)
        editor.add("s", {"role": role, "content": text, "timestamp": TS})
    return editor, editor.state("s").values()


def without_dialogue(tmp_path: Path) -> Path:
    """The same domain with neither mechanism (and the list accumulating, the default)."""
    text = EATERY.read_text("utf-8").replace("dialogue: {subject: RESTAURANT, new_search: search}\n", "")
    off = tmp_path / "eatery.yaml"
    off.write_text(text.replace("    policy: latest\n", ""), "utf-8")
    return off


@pytest.mark.parametrize("text, things", [
    ("帮我找一家有早餐服务的酒店", {"HOTEL"}), ("从故宫打车到酒店", {"TAXI", "HOTEL"}), ("坐地铁去", {"METRO"}),
    ("Find me a hotel with breakfast", {"HOTEL"}), ("a cab to the restaurant", {"TAXI", "RESTAURANT"}),
    ("那家的评分是多少？", set()), ("the Taxonomy museum", set())])
def test_things_a_message_names(text, things):
    assert things_named(text) == things


@pytest.mark.parametrize("turns, expected", [
    (["我想找一家有早餐服务的酒店"], {}),                      # breakfast of a hotel is no dish
    (["Find me a hotel that serves breakfast"], {}),
    (["想吃包子，帮我找家餐馆"], {"dishes": ["包子"]}),         # names the restaurant: read
    (["想吃包子"], {"dishes": ["包子"]}),                      # names nothing: every domain reads it
    (["I want dumplings, and a hotel near the restaurant"], {"dishes": ["包子"]}),  # names both: read
])
def test_a_message_about_another_kind_of_thing_is_not_read(turns, expected):
    assert talk(*turns)[1] == expected


def test_a_new_search_replaces_what_it_does_not_restate():
    _, got = talk("帮我找一家朝阳的川菜餐馆", "A: 推荐您去蜀香园。", "这家几点开门？", "A: 11点。", "再帮我找一家粤菜餐馆")
    assert got == {"cuisine": "粤菜"}
    _, got = talk("Find me a Sichuan place in Chaoyang", "A: How about Shu Xiang?", "Find me another one, Cantonese this time")
    assert got == {"cuisine": "粤菜"}


@pytest.mark.parametrize("turns, expected", [
    # no search cue: a constraint added to the same search
    (["帮我找一家朝阳的川菜餐馆", "A: 推荐您去蜀香园。", "海淀的也行"], {"cuisine": "川菜", "area": "海淀"}),
    # a search cue with no constraint of this search is someone else's search (or a question)
    (["帮我找一家朝阳的川菜餐馆", "A: 推荐您去蜀香园。", "它周边有什么景点？"], {"cuisine": "川菜", "area": "朝阳"}),
    (["Find a Sichuan place in Chaoyang", "A: How about Shu Xiang?", "Can you find me a taxi there?"],
     {"cuisine": "川菜", "area": "朝阳"}),
    # a negated mention starts no search
    (["帮我找一家朝阳的川菜餐馆", "A: 推荐您去蜀香园。", "有没有不是粤菜的？"], {"cuisine": "川菜", "area": "朝阳"}),
])
def test_trap_what_is_not_a_new_search(turns, expected):
    assert talk(*turns)[1] == expected


def test_a_list_with_policy_latest_holds_the_latest_items():
    assert talk("想吃烤鸭和包子的餐馆", "A: 推荐全聚德。", "我想吃早餐，帮我推荐")[1] == {"dishes": ["早餐"]}
    assert talk("I'd like roast duck", "A: Try Quanjude.", "dumplings would be nice")[1] == {"dishes": ["包子"]}


def test_without_the_declarations_nothing_changes(tmp_path):
    off = without_dialogue(tmp_path)
    assert talk("我想找一家有早餐服务的酒店", domain=off)[1] == {"dishes": ["早餐"]}
    _, got = talk("帮我找一家朝阳的川菜餐馆", "A: 推荐您去蜀香园。", "再帮我找一家粤菜餐馆，想吃烤鸭", domain=off)
    assert got == {"cuisine": "粤菜", "area": "朝阳", "dishes": ["烤鸭"]}
    assert talk("想吃烤鸭", "A: 好的。", "包子也行", domain=off)[1] == {"dishes": ["烤鸭", "包子"]}


def test_a_new_search_is_in_the_log_and_replays_identically(tmp_path):
    db = f"sqlite:///{tmp_path / 's.db'}"
    editor, got = talk("帮我找一家朝阳的川菜餐馆", "A: 推荐您去蜀香园。", "我想找一家有早餐服务的酒店", "再帮我找一家粤菜餐馆", store=db)
    assert got == {"cuisine": "粤菜"}
    cleared = [e for e in editor.store.edits("s") if e.reason == "NEW_SEARCH"]
    assert [(e.op, e.field, e.before) for e in cleared] == [("clear", "area", "朝阳")]
    assert cleared[0].provenance is not None and cleared[0].provenance.text == "找"
    assert audit.replay(SQLiteStore(tmp_path / "s.db"), "s").identical


def test_lint_names_a_new_search_of_no_action(tmp_path):
    bad = tmp_path / "eatery.yaml"
    bad.write_text(EATERY.read_text("utf-8").replace("new_search: search", "new_search: serch"), "utf-8")
    problems = lint_domain(bad)[1]
    assert any("new_search: serch" in p.message and p.severity == "error" for p in problems)
    bad.write_text(EATERY.read_text("utf-8").replace("new_search: search", "new_search: search, relax: serch"), "utf-8")
    assert any("relax: serch" in p.message and p.severity == "error" for p in lint_domain(bad)[1])
    assert not [p for p in lint_domain(EATERY)[1] if p.severity == "error"]


@pytest.mark.parametrize("text, expected", [
    ("在故宫附近帮我找个好吃的餐馆", {"landmark": "故宫"}), ("Find me a restaurant near the Temple of Heaven", {"landmark": "天坛"}),
    ("故宫的门票多少钱？", {}), ("I just came back from the Forbidden City", {}),  # named, but no landmark
    ("故宫周边有哪些餐馆？", {}),  # asks what is there: no search
])
def test_an_enum_matched_only_by_its_rules_is_a_landmark_not_a_mention(text, expected):
    assert talk(text)[1] == expected


def test_a_rating_said_after_its_place_belongs_to_that_place_only():
    from context_editor.domain import domain_from_source  # noqa: PLC0415

    doc = {"domain": "r", "version": 1, "languages": ["zh"], "fields": {"rating": {"type": "text", "extract": ["slot.rating.restaurant"]}},
           "actions": {"a": {"fields": ["rating"]}}}
    editor = ContextEditor(domain_from_source(doc), "memory://")
    for i, text in enumerate(["哪家餐馆是人均消费在150-500元的，评分是4.5分以上的？", "在餐馆附近找一家评分5分的酒店"]):
        editor.add(f"s{i}", {"role": "user", "content": text, "timestamp": TS})
    assert editor.state("s0").get("rating") == "4.5分以上"
    assert editor.state("s1").get("rating") is None  # the hotel's rating, said after the restaurant


@pytest.mark.parametrize("turns", [
    ["A: 推荐您去全聚德。", "这家店有烤鸭吗？"], ["A: 推荐您去全聚德。", "好的，那里有包子吗？"],
    ["A: I recommend Quanjude.", "Do they have roast duck?"], ["A: I recommend Quanjude.", "Does it serve dumplings?"],
])
def test_a_question_about_the_thing_offered_is_no_wish_even_without_offers(turns, tmp_path):
    """A domain that reads no offers (`offers: false`: a recommendation is a result, not a value the
    user takes) still hears a question about the recommended thing as a question, not a wish."""
    off = tmp_path / "eatery.yaml"
    off.write_text(EATERY.read_text("utf-8").replace("new_search: search}", "new_search: search, offers: false}"), "utf-8")
    assert talk(*turns, domain=off)[1] == {}
    assert talk("想吃烤鸭", domain=off)[1] == {"dishes": ["烤鸭"]}


def _relaxing(tmp_path: Path, relax: bool = True) -> Path:
    """A search with a price per person (the zh rule pack's, and an inline English one) and a cuisine."""
    price = {"type": "text", "extract": ["slot.price.per_person",
                                         {"pattern": r"(?P<value>(?:under|at least|over)\s+\$\d+|\$\d+\s*(?:-|to)\s*\$?\d+|\$\d+)",
                                          "parse": "text"}]}
    doc = {"domain": "r", "version": 1, "languages": ["zh", "en"],
           "fields": {"price": price, "cuisine": EATERY_FIELDS["cuisine"]},
           "actions": {"search": {"fields": ["price", "cuisine"]}}}
    path = tmp_path / f"relax-{relax}.yaml"
    path.write_text(yaml.safe_dump({**doc, "dialogue": {"relax": "search"}} if relax else doc, allow_unicode=True), "utf-8")
    return path


EATERY_FIELDS = {"cuisine": {"type": "enum", "values": {"川菜": ["Sichuan"], "粤菜": ["Cantonese"]}}}


@pytest.mark.parametrize("turns, expected", [
    # the offer is outside the constraint: the search relaxed it
    (["帮我找一家人均消费50-100元的川菜馆", "A: 抱歉，没有完全符合的，推荐您去黄门老灶，人均消费是119元。"], {"cuisine": "川菜"}),
    (["Find me a Sichuan place under $50", "A: Sorry, nothing matches. Shu Xiang is $65."], {"cuisine": "川菜"}),
    # the offer meets it: nothing relaxed
    (["帮我找一家人均消费50-100元的川菜馆", "A: 推荐您去聚宝源，人均消费89元。"], {"cuisine": "川菜", "price": "50-100元"}),
    (["Find me a Sichuan place under $50", "A: Shu Xiang is $45."], {"cuisine": "川菜", "price": "under $50"}),
    # no value of the constraint stated: nothing relaxed
    (["帮我找一家人均消费50-100元的川菜馆", "A: 推荐您去聚宝源。"], {"cuisine": "川菜", "price": "50-100元"}),
    # an enum is relaxed by another of its values
    (["Find me a Sichuan place under $50", "A: No Sichuan place is that cheap; the closest is a Cantonese one at $45."],
     {"price": "under $50"}),
])
def test_an_offer_outside_a_constraint_relaxes_it(turns, expected, tmp_path):
    assert talk(*turns, domain=_relaxing(tmp_path))[1] == expected


def test_a_relaxed_constraint_is_in_the_log_replays_identically_and_is_off_unless_declared(tmp_path):
    turns = ["帮我找一家人均消费50-100元的川菜馆", "A: 抱歉，推荐您去黄门老灶，人均消费是119元。", "它几点开门？"]
    for relax, store in ((True, f"sqlite:///{tmp_path / 's.db'}"), (False, "memory://")):
        editor, _ = talk(*turns, domain=_relaxing(tmp_path, relax), store=store)
        relaxed = [e for e in editor.store.edits("s") if e.reason == "RELAXED_BY_ASSISTANT"]
        if relax:
            assert [(e.op, e.field, e.before) for e in relaxed] == [("clear", "price", "50-100元")]
            assert relaxed[0].provenance is not None and relaxed[0].provenance.text == "119元"
            assert audit.replay(SQLiteStore(tmp_path / "s.db"), "s").identical
        else:
            assert relaxed == [] and editor.state("s").get("price") == "50-100元"


@pytest.mark.parametrize("text, expected", [
    ("50-100元", (50, 100)), ("4.5分以上", (4.5, float("inf"))), ("100元以下", (float("-inf"), 100)), ("5分", (5, 5)),
    ("3小时 - 4小时", (3, 4)), ("under $50", (float("-inf"), 50)), ("at least 4 stars", (4, float("inf"))),
    ("between 3 and 5", (3, 5)), ("免费", None), ("free", None),
])
def test_the_interval_a_constraint_covers(text, expected):
    from context_editor.extract.numbers.bounds import interval  # noqa: PLC0415

    assert interval(text) == expected


NAMES = Path(__file__).resolve().parent / "domains" / "diner.yaml"


@pytest.mark.parametrize("turns, expected", [
    (["我要去全聚德吃饭"], {"name": "全聚德"}),                                   # brought up by the user
    (["I'd like to eat at Quanjude"], {"name": "全聚德"}),
    (["帮我找家川菜馆", "A: 推荐您去全聚德或者东来顺。", "就去全聚德吧"], {"cuisine": "川菜"}),  # a pick from the list
    (["Find me a Sichuan place", "A: I found Quanjude and Donglaishun.", "Quanjude, please"], {"cuisine": "川菜"}),
    (["我要去全聚德吃饭", "A: 好的。", "全聚德几点开门？"], {"name": "全聚德"}),           # said again: still that one
    (["我要去全聚德吃饭", "A: 全聚德周边有东来顺。", "那去东来顺吧"], {"name": "全聚德"}),   # the assistant named it
    (["在故宫附近帮我找个好吃的餐馆"], {"landmark": "故宫"}),                           # a landmark, not a name
    (["Find me a Sichuan restaurant near the Forbidden City"], {"cuisine": "川菜", "landmark": "故宫"}),
])
def test_a_name_counts_only_when_the_user_brings_it_up(turns, expected):
    assert talk(*turns, domain=NAMES)[1] == expected


def test_a_name_named_before_is_in_the_log_and_replays_identically(tmp_path):
    db = f"sqlite:///{tmp_path / 's.db'}"
    editor, got = talk("帮我找家川菜馆", "A: 推荐您去全聚德或者东来顺。", "就去全聚德吧", domain=NAMES, store=db)
    edits = [(e.op, e.field, e.after, e.reason) for e in editor.store.edits("s") if e.field == "name"]
    assert edits == [("reject", "name", "全聚德", "MENTIONED_IN_CONVERSATION"), ("reject", "name", "东来顺", "MENTIONED_IN_CONVERSATION"),
                     ("reject", "name", "全聚德", "NAMED_BEFORE")]
    assert audit.replay(SQLiteStore(tmp_path / "s.db"), "s").identical


@pytest.mark.parametrize("turns, expected", [
    (["我要去全聚德烤鸭店吃饭"], {"name": "全聚德烤鸭店"}),            # no roast duck asked for
    (["I'd like to eat at Pizza Hut"], {"name": "Pizza Hut"}),
    (["想吃烤鸭"], {"dishes": ["烤鸭"]}), (["I'd like pizza"], {"dishes": ["pizza"]}),
])
def test_a_word_inside_a_longer_name_is_part_of_the_name(turns, expected, tmp_path):
    doc = tmp_path / "diner.yaml"
    text = NAMES.read_text("utf-8").replace("    values: {全聚德: [Quanjude],", "    values: {全聚德烤鸭店: [], Pizza Hut: [], 全聚德: [Quanjude],")
    dishes = "  dishes: {type: list, items: {type: enum, values: {烤鸭: [roast duck], pizza: []}}}\n"
    doc.write_text(text.replace("  cuisine:\n", dishes + "  cuisine:\n"), "utf-8")
    assert talk(*turns, domain=doc)[1] == expected


@pytest.mark.parametrize("turns, expected", [
    # a yes/no question with no search word asks about the place on the table
    (["A: 推荐您去全聚德。", "餐馆有烤鸭吗？"], {}), (["A: 推荐您去全聚德。", "餐馆是否提供包子？"], {}),
    (["A: I recommend Quanjude.", "Do they have roast duck?"], {}),
    (["A: 推荐您去全聚德。", "我想吃包子，餐馆有烤鸭吗？"], {"dishes": ["包子"]}),  # only the clause that asks
    (["A: 推荐您去全聚德。", "有烤鸭吗？"], {"dishes": ["烤鸭"]}),  # names no place: a wish ("have you got it?")
    # searches phrased as questions stay searches
    (["有卖烤鸭的餐馆吗？"], {"dishes": ["烤鸭"]}), (["A: 附近有三家。", "有做烤鸭的吗？"], {"dishes": ["烤鸭"]}),
    (["A: 附近有三家。", "哪家有烤鸭？"], {"dishes": ["烤鸭"]}), (["帮我找家有烤鸭的餐馆好吗？"], {"dishes": ["烤鸭"]}),
    (["Are there any places with roast duck?"], {"dishes": ["烤鸭"]}),
])
def test_a_yes_no_question_asks_about_the_thing_on_the_table(turns, expected, tmp_path):
    off = tmp_path / "eatery.yaml"
    off.write_text(EATERY.read_text("utf-8").replace("new_search: search}", "new_search: search, offers: false}"), "utf-8")
    assert talk(*turns, domain=off)[1] == expected


# Between a price's cue word and its value Chinese puts adverbs as well as a copula ("门票也是免费的":
# also; "还是": still; "都": all): the rule pack's price families read through them.
PRICES = {"ticket_price": "slot.price.ticket", "price_per_person": "slot.price.per_person", "price": "slot.price.room"}


@pytest.mark.parametrize("text, field, value", [
    ("帮我找个门票也是免费的公园。", "ticket_price", "免费"), ("那边的门票还是免费的吗？", "ticket_price", "免费"),
    ("票价都在20-50元就行。", "ticket_price", "20-50元"), ("人均消费还是100元以下吧。", "price_per_person", "100元以下"),
    ("价格也在200-300元的酒店有吗？", "price", "200-300元"),
])
def test_a_price_is_read_through_the_adverbs_before_its_copula(text, field, value, tmp_path):
    doc = {"domain": "trip", "version": 1, "languages": ["zh"],
           "fields": {name: {"type": "text", "extract": [rule]} for name, rule in PRICES.items()},
           "actions": {"search": {"fields": list(PRICES)}}}
    path = tmp_path / "trip.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), "utf-8")
    assert talk(text, domain=path)[1] == {field: value}
