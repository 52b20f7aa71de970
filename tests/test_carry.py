"""Carry-over between the domains of one conversation (issue 10 item 3) and which domains a
message speaks for (item 2's `domains` metadata).

tests/domains/hotel.yaml declares `carry: {city: [restaurant.city]}`: the city the user gave the
restaurant is the hotel's until they name one for the hotel. The traps: the user overrides the
carried value (and it then stays theirs when the restaurant moves), a value a field refuses is not
carried, a domain a message does not speak for reads nothing from it, and a replay of the hotel's
session comes out byte for byte the same although the restaurant's session is not replayed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from context_editor import ContextEditor, add_together
from context_editor.audit import replay
from context_editor.cli import main
from context_editor.domain import lint_domain
from context_editor.errors import ContextEditorError
from context_editor.pipeline import rerun
from context_editor.store import open_store

DOMAINS = Path(__file__).parent / "domains"
R, H = ["restaurant"], ["hotel"]
TALK = {
    "en": {"dinner": ("I'd like a table for 4 in Boston at 7pm.", "Boston"),
           "booked": "Booked Sino for 4 at 19:00. Anything else?",
           "hotel": "I also need a hotel room, under $200 a night.",
           "override": ("Actually, make the hotel in Cambridge.", "Cambridge"),
           "same": ("Yes, a hotel in Boston.", "Boston"),
           "move": ("Let's have dinner in Denver instead.", "Denver"),
           "more": "Does it have a gym?"},
    "zh": {"dinner": ("我想在上海找家餐厅，四个人，晚上7点。", "上海"),
           "booked": "已为您订好鼎泰丰，4位，19:00。还需要什么？",
           "hotel": "再帮我订一间酒店，每晚500元以内。",
           "override": ("酒店还是订在杭州吧。", "杭州"),
           "same": ("对，酒店就订在上海吧。", "上海"),
           "move": ("我们改在北京吃饭吧。", "北京"),
           "more": "酒店有健身房吗？"},
}


def pair(store: str = "memory://") -> tuple[ContextEditor, ContextEditor]:
    return ContextEditor(DOMAINS / "restaurant.yaml", store), ContextEditor(DOMAINS / "hotel.yaml", store)


def say(parts, talk, minute: int = 0) -> None:
    for i, (role, text, domains) in enumerate(talk):
        add_together(parts, {"role": role, "content": text, "domains": domains,
                             "timestamp": f"2024-05-01T19:{minute + i:02d}:00+00:00"})


def opening(language: str) -> list[tuple[str, str, list[str]]]:
    t = TALK[language]
    return [("user", t["dinner"][0], R), ("assistant", t["booked"], R), ("user", t["hotel"], H)]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_restaurant_city_is_carried_to_the_hotel_with_its_provenance(language):
    restaurant, hotel = pair()
    parts = [(restaurant, "c"), (hotel, "c")]
    say(parts, opening(language))
    city = TALK[language]["dinner"][1]
    assert restaurant.state("c").get("city") == hotel.state("c").get("city") == city
    fs = hotel.state("c").fields["city"]
    assert fs.source == "carry" and fs.set_round == 2  # carried when the hotel came up, not before
    p = fs.provenance
    assert (p.text, p.round, p.role, p.message_index, p.message_id) == (city, 1, "user", -1, "c#0")
    assert p.extractor == "carry:restaurant.city"
    (entry,) = hotel.why("c", "city")["history"]
    assert entry["source"] == "carry" and entry["reason"] == "CARRIED_FROM restaurant.city"


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_city_the_user_gives_the_hotel_outranks_the_carried_one_and_stays(language):
    t = TALK[language]
    restaurant, hotel = pair()
    parts = [(restaurant, "c"), (hotel, "c")]
    say(parts, opening(language) + [("user", t["override"][0], H), ("user", t["move"][0], R), ("user", t["more"], H)])
    assert hotel.state("c").get("city") == t["override"][1]
    assert hotel.state("c").fields["city"].source == "correction"
    assert restaurant.state("c").get("city") == t["move"][1]  # the restaurant moved; the hotel is the user's
    assert [h["source"] for h in hotel.why("c", "city")["history"]] == ["carry", "correction"]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_carried_value_follows_its_source_until_the_user_says_it(language):
    t = TALK[language]
    restaurant, hotel = pair()
    parts = [(restaurant, "c"), (hotel, "c")]
    say(parts, opening(language) + [("user", t["move"][0], R), ("user", t["more"], H)])
    fs = hotel.state("c").fields["city"]
    assert (fs.value, fs.source, fs.provenance.message_id) == (t["move"][1], "carry", "c#3")
    # Saying the carried value makes it the user's: the restaurant moving again no longer moves it.
    restaurant, hotel = pair()
    parts = [(restaurant, "c"), (hotel, "c")]
    say(parts, opening(language) + [("user", t["same"][0], H), ("user", t["move"][0], R), ("user", t["more"], H)])
    fs = hotel.state("c").fields["city"]
    assert (fs.value, fs.source) == (t["same"][1], "initial")


def test_a_value_said_for_the_hotel_itself_needs_no_carry():
    restaurant, hotel = pair()
    parts = [(restaurant, "c"), (hotel, "c")]
    say(parts, [("user", "Dinner in Boston for 2.", R), ("user", "And a hotel in Cambridge.", H)])
    assert hotel.state("c").get("city") == "Cambridge"
    assert not [e for e in hotel.store.edits("c") if e.source == "carry"]


def test_an_untagged_message_is_read_by_every_domain_a_tagged_one_by_its_own():
    restaurant, hotel = pair()
    say([(restaurant, "c"), (hotel, "c")], [("user", "A table in Boston.", None), ("user", "Dinner in Denver.", R)])
    assert restaurant.state("c").get("city") == "Denver"
    assert hotel.state("c").get("city") == "Boston"  # read from the untagged message, not carried
    assert hotel.state("c").fields["city"].source == "initial"
    assert [m.content for m in hotel.store.messages("c")] == ["A table in Boston.", "Dinner in Denver."]  # kept


def test_replay_of_a_session_with_carried_values_is_identical(tmp_path):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    restaurant, hotel = pair(url)
    t = TALK["en"]
    say([(restaurant, "c-restaurant"), (hotel, "c-hotel")],
        opening("en") + [("user", t["move"][0], R), ("user", t["more"], H), ("user", t["override"][0], H)])
    store = open_store(url)
    assert [e.source for e in store.edits("c-hotel") if e.field == "city"] == ["carry", "carry", "correction"]
    report = replay(store, "c-hotel")
    assert report.identical and report.recorded == report.replayed
    # The carried value names the restaurant's session, which `why` on the command line explains.
    assert main(["why", "city", "--session", "c-hotel", "--store", url]) == 0


def test_why_on_the_command_line_explains_a_carried_value(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    restaurant, hotel = pair(url)
    say([(restaurant, "c-restaurant"), (hotel, "c-hotel")], opening("en"))
    capsys.readouterr()
    assert main(["why", "city", "--session", "c-hotel", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "session message c-restaurant#0" in out and "carry:restaurant.city" in out
    assert "[CARRIED_FROM restaurant.city]" in out


def _domains(tmp_path: Path, hotel_extra: str) -> tuple[Path, Path]:
    shutil.copy(DOMAINS / "restaurant.yaml", tmp_path / "restaurant.yaml")
    text = (DOMAINS / "hotel.yaml").read_text("utf-8").split("carry:")[0]
    (tmp_path / "hotel.yaml").write_text(text + hotel_extra, "utf-8")
    return tmp_path / "restaurant.yaml", tmp_path / "hotel.yaml"


def test_a_carried_value_neither_locks_a_first_field_nor_enters_a_field_that_refuses_it(tmp_path):
    r_path, h_path = _domains(tmp_path, "carry:\n  city: [restaurant.city]\n  name: [restaurant.name]\n")
    text = h_path.read_text("utf-8").replace("    type: text\n", "    type: text\n    policy: first\n", 1)
    h_path.write_text(text, "utf-8")
    assert not [p for p in lint_domain(h_path)[1] if p.is_error]
    restaurant, hotel = ContextEditor(r_path, "memory://"), ContextEditor(h_path, "memory://")
    say([(restaurant, "c"), (hotel, "c")], [("user", "A table at Sino in Boston.", R), ("user", "A hotel please.", H),
                                            ("user", "The hotel should be in Cambridge.", H)])
    assert restaurant.state("c").get("name") == "Sino"
    assert hotel.state("c").get("name") is None  # Sino is no hotel: the enum refuses it, nothing is carried
    assert hotel.state("c").get("city") == "Cambridge"  # `first` locks the user's values, not a carried one


@pytest.mark.parametrize("carry, line, words", [
    ("carry:\n  city: [bistro.city]\n", 2, "no domain 'bistro'"),
    ("carry:\n  city: [restaurant.town]\n", 2, "has no field 'town'"),
    ("carry:\n  city: [hotel.name]\n", 2, "names this domain itself"),
    ("carry:\n  city: [restaurant.party_size]\n", 2, "is a int, field 'city' a text"),
    ("carry:\n  town: [restaurant.city]\n", 2, "unknown field 'town'"),
])
def test_lint_names_a_bad_carry_with_its_line_and_a_fix(tmp_path, capsys, carry, line, words):
    _, h_path = _domains(tmp_path, carry)
    start = h_path.read_text("utf-8").count("\n") - carry.count("\n")
    problems = [p for p in lint_domain(h_path)[1] if p.is_error]
    assert any(words in p.message and p.line == start + line and p.fix for p in problems), problems
    assert main(["lint", str(h_path)]) == 1
    out = capsys.readouterr()
    assert words in out.out + out.err and "fix:" in out.out + out.err


def test_bad_parts_and_bad_metadata_are_refused_before_anything_is_stored():
    restaurant, hotel = pair()
    with pytest.raises(ContextEditorError, match="CE303"):
        add_together([], {"role": "user", "content": "hi"})
    with pytest.raises(ContextEditorError, match="CE304"):
        add_together([(hotel, "a"), (hotel, "b")], {"role": "user", "content": "hi"})
    with pytest.raises(ContextEditorError, match="CE200"):
        add_together([(restaurant, "c"), (hotel, "c")], {"role": "user", "content": "hi", "domains": "hotel"})
    assert restaurant.store.session("c") is None and hotel.store.session("c") is None


HOTELS = {
    "service_name": "Hotels_9", "description": "Find and book hotels",
    "slots": [
        {"name": "location", "description": "City or locality where the hotel is located", "is_categorical": False, "possible_values": []},
        {"name": "check_in_date", "description": "Date of check in", "is_categorical": False, "possible_values": []},
        {"name": "hotel_name", "description": "Name of the hotel", "is_categorical": False, "possible_values": []},
        {"name": "street_address", "description": "Address of the hotel", "is_categorical": False, "possible_values": []},
    ],
    "intents": [{"name": "SearchHotel", "description": "Find a hotel", "is_transactional": False,
                 "required_slots": ["location"], "optional_slots": {"check_in_date": "dontcare"},
                 "result_slots": ["location", "hotel_name", "street_address"]}],
}


def test_the_sgd_importer_declares_carries_by_kind_of_value_and_they_work(tmp_path):
    """A city goes to a city; a date is not carried (it moves once the assistant proposes it), nor
    into or out of a result the service returns (an address)."""
    import gzip
    import json

    import yaml

    from context_editor.importers import import_sgd
    from tests.test_importers import SERVICE

    schema = tmp_path / "schema.json.gz"
    with gzip.open(schema, "wt", encoding="utf-8") as fh:
        json.dump([SERVICE, HOTELS], fh)
    paths = {p.stem: p for p in import_sgd(schema, tmp_path / "domains")}
    docs = {name: yaml.safe_load(p.read_text("utf-8")) for name, p in paths.items()}
    assert docs["hotels_9"]["carry"] == {"location": ["restaurants_9.city"]}
    assert docs["restaurants_9"]["carry"] == {"city": ["hotels_9.location"]}
    restaurant, hotel = (ContextEditor(paths[n], "memory://") for n in ("restaurants_9", "hotels_9"))
    say([(restaurant, "d"), (hotel, "d")], [("user", "Find me a restaurant in San Jose for the 3rd.", ["restaurants_9"]),
                                            ("assistant", "How about Sino?", ["restaurants_9"]),
                                            ("user", "Sounds good. I also need a hotel there.", ["hotels_9"])])
    assert hotel.state("d").get("location") == "San Jose" and hotel.state("d").fields["location"].source == "carry"
    assert hotel.state("d").get("check_in_date") is None
    assert restaurant.state("d").fields["city"].source != "carry"  # a value of its own is never carried over


def test_re_deriving_a_session_keeps_the_values_other_domains_carried_into_it(tmp_path):
    """`backfill` re-runs a session's messages under a domain version; a carried value is not in
    those messages, so the re-run is given the recorded carries (as replay is) or it would clear it."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    restaurant, hotel = pair(url)
    say([(restaurant, "c-restaurant"), (hotel, "c-hotel")], opening("en") + [("user", "The Hilton, please.", H)])
    store = open_store(url)
    carried = hotel.state("c-hotel").get("city")
    assert hotel.state("c-hotel").get("name") == "Hilton"
    assert carried == "Boston" and rerun(hotel.domain, "c-hotel", store.messages("c-hotel")).get("city") is None
    assert rerun(hotel.domain, "c-hotel", store.messages("c-hotel"), recorded=store.edits("c-hotel")).get("city") == carried
    # The same domain: nothing to change (before, the carried city showed up as a value v1 would lose).
    v2 = tmp_path / "hotel.yaml"
    v1 = (DOMAINS / "hotel.yaml").read_text("utf-8")
    name = v1[v1.index("  name:"):v1.index("  city:")]
    v2.write_text(v1.replace("version: 1", "version: 2").replace(name, "").replace("[name, city", "[city"), "utf-8")
    shutil.copy(DOMAINS / "restaurant.yaml", tmp_path)  # the carry's source domain, beside the file
    assert main(["backfill", "--store", url, "--domain", str(DOMAINS / "hotel.yaml"), "--out", str(tmp_path / "same")]) == 0
    assert (tmp_path / "same" / "diff.jsonl").read_text("utf-8") == ""
    # A version without `name` re-derives the session (`--apply`): the carried city stays, and it
    # replays identically.
    assert main(["backfill", "--store", url, "--domain", str(v2), "--out", str(tmp_path / "v2"), "--apply"]) == 0
    assert [e.reason for e in store.edits("c-hotel") if e.op == "upgrade"] == ["DOMAIN_REDERIVE"]
    state = ContextEditor(v2, url).state("c-hotel")
    assert state.get("city") == carried
    assert replay(store, "c-hotel").identical
