"""Schema importers: SGD services and CrossWOZ domains become domain files that lint and extract.

The synthetic-schema tests run everywhere; the tests on the published files read them from
../shared/data (relative to the repository) and skip, saying so, where that is absent.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import pytest
import yaml

from context_editor import ContextEditor
from context_editor.bench.cli import register
from context_editor.domain import lint_domain, load_domain
from context_editor.importers import DatasetError, import_crosswoz, import_sgd, read_json

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SGD_SCHEMA = DATA / "sgd" / "dev" / "schema.json.gz"
CROSSWOZ_DB = DATA / "crosswoz" / "database"
NOW = "2019-03-01T09:00:00"

SERVICE = {
    "service_name": "Restaurants_9",
    "description": "Find and reserve restaurants",
    "slots": [
        {"name": "restaurant_name", "description": "Name of the restaurant", "is_categorical": False, "possible_values": []},
        {"name": "date", "description": "Date of the reservation", "is_categorical": False, "possible_values": []},
        {"name": "time", "description": "Time of the reservation", "is_categorical": False, "possible_values": []},
        {"name": "number_of_seats", "description": "Number of seats to reserve", "is_categorical": True,
         "possible_values": ["1", "2", "3", "4", "5", "6"]},
        {"name": "price_range", "description": "Price range", "is_categorical": True,
         "possible_values": ["cheap", "moderate", "pricey"]},
        {"name": "has_seating_outdoors", "description": "Whether the restaurant has outdoor seating available",
         "is_categorical": True, "possible_values": ["True", "False"]},
        {"name": "city", "description": "City where the restaurant is located", "is_categorical": False, "possible_values": []},
        {"name": "phone_number", "description": "Phone number of the restaurant", "is_categorical": False, "possible_values": []},
    ],
    "intents": [
        {"name": "FindRestaurants", "description": "Find restaurants by city", "is_transactional": False,
         "required_slots": ["city"], "optional_slots": {"price_range": "dontcare", "has_seating_outdoors": "dontcare"},
         "result_slots": ["restaurant_name", "city", "phone_number"]},
        {"name": "ReserveRestaurant", "description": "Reserve a table", "is_transactional": True,
         "required_slots": ["restaurant_name", "time", "city"], "optional_slots": {"date": "2019-03-01", "number_of_seats": "2"},
         "result_slots": ["restaurant_name", "date", "time", "number_of_seats", "city"]},
    ],
}


@pytest.fixture
def restaurants(tmp_path) -> Path:
    schema = tmp_path / "schema.json.gz"
    with gzip.open(schema, "wt", encoding="utf-8") as fh:
        json.dump([SERVICE], fh)
    [path] = import_sgd(schema, tmp_path / "domains")
    return path


def test_sgd_service_becomes_a_linted_editable_domain(restaurants):
    assert restaurants.name == "restaurants_9.yaml"
    assert [x for x in lint_domain(restaurants)[1] if x.is_error] == []
    text = restaurants.read_text("utf-8")
    assert text.startswith("# Imported from SGD") and "&id" not in text  # a person edits it: no YAML anchors
    doc = yaml.safe_load(text)
    f = doc["fields"]
    assert f["price_range"]["type"] == "enum" and f["price_range"]["values"]["pricey"] == ["pricey"]
    # a value the importer's sgd_value_words.yaml knows gets everyday words for it ("inexpensive" for cheap)
    assert f["price_range"]["values"]["cheap"][:2] == ["cheap", "inexpensive"]
    assert "reasonably priced" in f["price_range"]["values"]["moderate"]
    assert f["number_of_seats"]["type"] == "int" and f["number_of_seats"]["constraints"] == {"ge": 1, "le": 6}
    assert "outdoor seating" in f["has_seating_outdoors"]["values"]["True"]
    assert "no outdoor seating" in f["has_seating_outdoors"]["values"]["False"]
    assert f["date"]["type"] == "date" and f["date"]["extract"] == ["slot.date.any"]
    assert f["city"]["ask"] == {"en": "What is the city where the restaurant is located?"}
    assert f["phone_number"]["sources"] == ["tool"] and "extract" not in f["phone_number"]  # a result, not an input
    assert "sources" not in f["restaurant_name"]  # offered by search, but the user accepts it (no assistant source)
    assert "sources" not in f["price_range"]  # what the user wants is theirs alone
    assert doc["machine"]["states"] == ["idle", "find_restaurants", "reserve_restaurant"]
    assert doc["actions"]["reserve_restaurant"]["required"] == ["restaurant_name", "time", "city"]
    assert set(doc["actions"]["track"]["fields"]) == set(f)


def test_imported_sgd_domain_extracts_by_slot_type(restaurants):
    editor = ContextEditor(load_domain(restaurants), "memory://")
    state = editor.ingest("s", [
        {"role": "user", "content": "I want to reserve a restaurant for 2 people at half past 11 in the morning."},
        {"role": "assistant", "content": "Which city? How about Sino? They have a table for 4 people."},
        {"role": "user", "content": "Please find restaurants in San Jose. Something cheap, with outdoor seating, on the 3rd of March."},
    ], now=NOW)
    assert state.get("number_of_seats") == 2  # the assistant's "4 people" only proposes
    assert state.get("restaurant_name") is None  # offered, but the reply does not accept it
    assert state.get("time") == "11:30"  # a time of day, normalised by the time parser
    assert state.get("city") == "San Jose"
    assert state.get("price_range") == "cheap" and state.get("has_seating_outdoors") == "True"
    assert state.get("date") == "2019-03-03"
    assert state.phase == "find_restaurants"  # the latest intent said
    # The track action is minimal: three short turns are a smaller context than the state they made.
    xml = editor.render("s", "track").xml
    assert "<state" not in xml and "\nuser: Please find restaurants in San Jose." in xml  # the number the order tells is left out
    state = editor.ingest("s", [{"role": "assistant", "content": "I found 3. How about Sino in San Jose?"},
                                {"role": "user", "content": "Sure, that works."}], now=NOW)
    assert state.get("restaurant_name") == "Sino"  # accepted: the user's value, source confirmation
    assert editor.why("s", "restaurant_name")["history"][-1]["source"] == "confirmation"
    # Still short: the user's turns verbatim, of the state only what no shown turn said, of the
    # assistant's turns a value no one else says (the count found) and the clause the accepted
    # name was read from, in place of its state line (the words hold all of the name); each value once.
    xml = editor.render("s", "track").xml
    assert "\nuser: Sure, that works." in xml and "\nuser: Please find" in xml
    assert "restaurant_name:" not in xml and "city:" not in xml and "\nassistant: I found 3. How about Sino in San Jose?\n" in xml


@pytest.mark.skipif(not SGD_SCHEMA.exists(), reason=f"SGD data not found at {SGD_SCHEMA}")
def test_every_published_sgd_service_imports_and_lints(tmp_path):
    paths = import_sgd(SGD_SCHEMA, tmp_path)
    assert len(paths) == 17
    for p in paths:
        assert [x for x in lint_domain(p)[1] if x.is_error] == [], p


@pytest.mark.skipif(not CROSSWOZ_DB.exists(), reason=f"CrossWOZ database not found at {CROSSWOZ_DB}")
def test_crosswoz_domains_use_the_database_as_gazetteer(tmp_path):
    paths = {p.stem: p for p in import_crosswoz(CROSSWOZ_DB, tmp_path)}
    assert sorted(paths) == ["attraction", "hotel", "metro", "restaurant", "taxi"]
    for p in paths.values():
        assert [x for x in lint_domain(p)[1] if x.is_error] == [], p
    hotel = yaml.safe_load(paths["hotel"].read_text("utf-8"))["fields"]
    assert hotel["hotel_type"]["gazetteer"] == "./gazetteers/hotel_type.json"  # the same mechanism as any domain's
    assert hotel["address"] == {**hotel["address"], "sources": ["tool"], "tool_keys": ["地址"]}
    domain = load_domain(paths["hotel"])
    assert domain.fields["hotel_type"].values["经济型"] == ["经济"]
    assert "早餐服务" in domain.fields["facilities"].items["values"]
    editor = ContextEditor(domain, "memory://")
    state = editor.ingest("s", [{"role": "user", "content": "帮我推荐一个评分4.5分以上，提供早餐服务和吹风机的经济型酒店，价格在200-300元。"}], now=NOW)
    assert state.get("rating") == "4.5分以上" and state.get("hotel_type") == "经济型" and state.get("price") == "200-300元"
    assert state.get("facilities") == ["早餐服务", "吹风机"]


def test_read_json_reports_missing_and_malformed_files(tmp_path):
    with pytest.raises(DatasetError, match="no such file") as err:
        read_json(tmp_path / "nope.json")
    assert err.value.fix
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", "utf-8")
    with pytest.raises(DatasetError, match="not readable JSON"):
        read_json(bad)


def test_import_command(tmp_path, capsys):
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps([SERVICE]), "utf-8")
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["import", "sgd", str(schema), "--out", str(tmp_path / "out")])
    assert args.func(args) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "out" / "restaurants_9.yaml")
