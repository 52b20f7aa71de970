"""Schema-Guided Dialogue (SGD) `schema.json` -> one domain file per service.

The mapping, chosen so that a person can read and improve the result:
- every slot becomes a field named like the slot;
- a categorical slot becomes an enum whose values are the schema's `possible_values` (each its
  own synonym); numeric categories (1..9 seats, years) become `int` fields bounded by the
  possible values instead, because a bare digit as a synonym would fire on every number said;
  True/False flags become enums whose synonyms are the words of the slot name ("has_wifi" ->
  "wifi", "no wifi"), since nobody says "True";
- a non-categorical slot gets its extraction from its *type*, inferred from its name and
  description (dates, times, places, counts, money, person and venue names, genres), which
  selects generic rule packs (`rules/*/slots.yaml`) and NER labels; values are never taken
  from dialogues;
- slots that no intent accepts as input are results the service returns: they may only be set
  by tool results;
- slots the service *offers* — returned by a search intent and required by a transactional one
  (the restaurant, the event, the pickup date) — are the user's like every other input: the user
  often chooses them by accepting an offer ("How about Sino?" "Sure."), and the editor's offer
  mechanism (extract/confirm.py) turns that acceptance into the value; the assistant never sets
  them itself;
- time slots are `time` fields (normalised to HH:MM);
- each slot's description becomes its `ask` text;
- intents become an `intent` enum (the intent name in words as synonym), machine states entered
  when the intent is said, and one action per intent whose required fields are the intent's
  required slots; plus `track`, the general action with every field.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Errors
from .common import read_json, snake, track_action, words, write_domains

# Words of a boolean slot name that say nothing about what the user wants ("has_wifi" -> wifi).
_FLAG_FILLER = {"has", "is", "allowed", "options", "flag", "good", "for", "available"}
_FALSE_CUES = ("no {}", "without {}")
# Slots whose name says a count of things; the rule pack has one rule per kind of thing.
_COUNT_KINDS = (("room", "slot.count.rooms"), ("bath", "slot.count.baths"), ("bed", "slot.count.beds"),
                ("bag", "slot.count.bags"), ("day", "slot.count.days"), ("stay_length", "slot.count.days"))
_PLACE = re.compile(r"city|location|area|destination|origin|address|place$")
_PERSON = re.compile(r"director|actor|starring|artist|recipient|therapist|doctor|stylist|dentist")
_VENUE = re.compile(r"restaurant|hotel|place_name|property|attraction")
_WORK = re.compile(r"movie|song|album|title|event_name|show")


@dataclass
class SlotPlan:
    """How one SGD slot becomes a field: its type, extractors and any enum values or bounds."""

    type: str
    extract: list[str] = field(default_factory=list)
    values: dict[str, list[str]] = field(default_factory=dict)
    constraints: dict[str, Any] = field(default_factory=dict)


def _flag_values(slot: str) -> dict[str, list[str]]:
    """True/False synonyms from the slot's own words: pets_allowed -> pets / no pets."""
    core = [w for w in slot.split("_") if w not in _FLAG_FILLER] or slot.split("_")
    forms = [{w, w[:-1]} if w.endswith("s") and len(w) > 4 else {w} for w in core]  # outdoors -> outdoor too
    orders = [forms, forms[::-1]] if len(forms) == 2 else [forms]
    phrases = sorted({" ".join(combo) for order in orders for combo in itertools.product(*order)})
    return {"True": phrases, "False": sorted(cue.format(p) for p in phrases for cue in _FALSE_CUES)}


def _categorical(slot: dict[str, Any]) -> SlotPlan:
    values = [str(v) for v in slot["possible_values"]]
    if values and all(v.isdigit() for v in values):
        nums = [int(v) for v in values]
        rule = "slot.year" if min(nums) > 1900 else _count_rule(slot["name"])
        return SlotPlan("int", [rule], constraints={"ge": min(nums), "le": max(nums)})
    if set(values) == {"True", "False"}:
        return SlotPlan("enum", values=_flag_values(slot["name"]))
    return SlotPlan("enum", values={v: [v] for v in values})


def _count_rule(name: str) -> str:
    return next((rule for key, rule in _COUNT_KINDS if key in name), "slot.count.people")


def _date_rule(name: str, others: list[str]) -> str:
    """Which date rule: an end date, a start date (when the service has another date), any date."""
    if re.search(r"return|dropoff|check_out|end", name):
        return "slot.date.end"
    if sum("date" in o for o in others) > 1:
        return "slot.date.start"
    return "slot.date.any"


def _genre_rules(description: str) -> list[str]:
    d = description.lower()
    picks = [rule for key, rule in (("movie", "slot.genre.film"), ("film", "slot.genre.film"), ("song", "slot.genre.music"),
                                    ("music", "slot.genre.music"), ("sport", "slot.genre.sport"), ("food", "slot.cuisine"))
             if key in d]
    return list(dict.fromkeys(picks))


def _free_text(slot: dict[str, Any], others: list[str]) -> SlotPlan:
    """The type of a non-categorical slot, read from its name and description."""
    name, desc = slot["name"], slot["description"].lower()
    if "date" in name:
        return SlotPlan("date", [_date_rule(name, others)])
    if "time" in name and "number of" not in desc:
        return SlotPlan("time", ["slot.time"])
    if re.search(r"amount|price|fare|rent|balance|cost", name):
        return SlotPlan("money", ["slot.money"])
    if re.search(r"number_of|stay_length|count", name) or desc.startswith("number of"):
        return SlotPlan("int", [_count_rule(name)], constraints={"gt": 0})
    if _PERSON.search(name):
        return SlotPlan("text", ["slot.name", "ner.PERSON"])
    if _VENUE.search(name):
        return SlotPlan("text", ["slot.name", "ner.ORG", "ner.FAC"])
    if _WORK.search(name):
        return SlotPlan("text", ["slot.name", "ner.WORK_OF_ART"])
    if name in ("genre", "subcategory", "category") or "genre" in desc:
        return SlotPlan("text", _genre_rules(slot["description"] + " " + name))
    if re.search(r"^from|origin|pickup", name) and _PLACE.search(name):
        return SlotPlan("text", ["slot.place.from"])
    if re.search(r"^to_|destination", name) and any(re.search(r"^from|origin", o) for o in others):
        return SlotPlan("text", ["slot.place.to"])
    if _PLACE.search(name):
        return SlotPlan("text", ["slot.place.in", "slot.place.to", "ner.GPE"])
    return SlotPlan("text")


def _ask(description: str) -> str:
    """The question for a missing slot, from its description ("Date of the event" -> "What is the date of the event?")."""
    d = re.sub(r"^(?:the|a|an)\s+", "", description.strip().rstrip("."), flags=re.IGNORECASE)
    for lead in ("Boolean flag indicating whether ", "Boolean flag indicating if ", "Boolean flag whether ", "Whether or not ", "Whether "):
        if d.startswith(lead):
            return f"Please tell me whether {d[len(lead):]}."
    return f"What is the {d[0].lower()}{d[1:]}?"


def service_domain(service: dict[str, Any]) -> dict[str, Any]:
    """The domain document of one SGD service."""
    slots = service["slots"]
    names = [s["name"] for s in slots]
    inputs = {n for it in service["intents"] for n in [*it["required_slots"], *it["optional_slots"]]}
    fields: dict[str, dict[str, Any]] = {}
    for slot in slots:
        plan = _categorical(slot) if slot["is_categorical"] else _free_text(slot, names)
        f: dict[str, Any] = {"type": plan.type, "description": slot["description"]}
        if plan.values:
            f["values"] = plan.values
        if plan.constraints:
            f["constraints"] = plan.constraints
        if slot["name"] in inputs:
            f["ask"] = {"en": _ask(slot["description"])}
            if plan.extract:
                f["extract"] = plan.extract
        else:
            f["sources"] = ["tool"]  # a result of the service, never something the user states
        fields[slot["name"]] = f
    intent_field = "intent" if "intent" not in fields else "user_intent"
    intents = service["intents"]
    fields[intent_field] = {
        "type": "enum", "class": "transient", "sources": ["user"], "description": "What the user wants the service to do.",
        "values": {it["name"]: sorted({words(it["name"]), it["description"].lower()}) for it in intents},
        "ask": {"en": "What would you like to do?"}}
    machine = {"initial": "idle", "states": ["idle", *(snake(it["name"]) for it in intents)],
               "transitions": [{"trigger": snake(it["name"]), "source": "*", "dest": snake(it["name"]),
                                "when": {intent_field: it["name"]}} for it in intents]}
    actions = {"track": track_action(list(fields), f"Everything tracked for {service['service_name']}.")}
    for it in intents:
        used = [n for n in names if n in it["required_slots"] or n in it["optional_slots"]]
        actions[snake(it["name"])] = {"description": it["description"], "fields": used or [intent_field],
                                      "required": list(it["required_slots"]), "recent_rounds": 2}
    return {"domain": snake(service["service_name"]), "version": 1, "description": service.get("description", ""),
            "languages": ["en"], "default_currency": "USD", "fields": fields, "machine": machine, "actions": actions}


def load_schema(path: str | Path) -> list[dict[str, Any]]:
    """The services of an SGD `schema.json` (plain or gzipped), checked for the fields we use."""
    schema = read_json(path)
    if not isinstance(schema, list) or not all(isinstance(s, dict) and {"service_name", "slots", "intents"} <= set(s) for s in schema):
        raise Errors.BAD_DATASET(problem=f"{path} is not an SGD schema (a list of services with service_name, slots, intents)",
                           fix="pass schema.json from an SGD split directory, e.g. sgd/dev/schema.json.gz")
    return schema


def import_sgd(schema_path: str | Path, out_dir: str | Path) -> list[Path]:
    """Write one linted domain file per service of `schema_path` into `out_dir`."""
    docs = {}
    for service in load_schema(schema_path):
        doc = service_domain(service)
        header = (f"Imported from SGD {Path(schema_path).name}, service {service['service_name']}, by `context-editor import sgd`.\n"
                  "Edit freely: synonyms, ask texts and extract rules are a starting point (docs/domain-format.md).")
        docs[doc["domain"]] = (doc, header)
    return write_domains(docs, out_dir)
