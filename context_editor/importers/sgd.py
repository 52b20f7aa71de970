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

import functools
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..domain.kinds import served_label, value_kind
from ..errors import Errors
from .carry import declare_carries
from ..resources import data_path
from .common import NerRef, model_ref, read_json, snake, track_action, words, write_domains

# Words of a boolean slot name that say nothing about what the user wants ("has_wifi" -> wifi).
_FLAG_FILLER = {"has", "is", "allowed", "options", "flag", "good", "for", "available"}
_FALSE_CUES = ("no {}", "without {}")
# Slots whose name says a count of things; the rule pack has one rule per kind of thing.
_COUNT_KINDS = (("room", "slot.count.rooms"), ("bath", "slot.count.baths"), ("bed", "slot.count.beds"),
                ("bag", "slot.count.bags"), ("day", "slot.count.days"), ("stay_length", "slot.count.days"))


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
        rated = re.search(r"rating|star", f"{slot['name']} {slot['description']}", re.IGNORECASE)
        rule = "slot.year" if min(nums) > 1900 else "slot.score" if rated else _count_rule(slot["name"])
        return SlotPlan("int", [rule], constraints={"ge": min(nums), "le": max(nums)})
    if set(values) == {"True", "False"}:
        return SlotPlan("enum", values=_flag_values(slot["name"]))
    return SlotPlan("enum", values={v: [v, *_value_synonyms(v)] for v in values})


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


# The generic English model's labels for a kind, used when no trained model is named.
_GENERIC_NER = {"PERSON": ["ner.PERSON"], "VENUE": ["ner.ORG", "ner.FAC"], "TITLE": ["ner.WORK_OF_ART"], "PLACE": ["ner.GPE"]}


def _rules(kind: str, label: str, slot: dict[str, Any], others: list[str]) -> SlotPlan:
    """The type and rule family of a kind of value (`domain.kinds`)."""
    name, desc = slot["name"], slot["description"]
    if kind == "DATE":
        return SlotPlan("date", [_date_rule(name, others)])
    if kind == "TIME":
        return SlotPlan("time", ["slot.time"])
    if kind == "MONEY":
        return SlotPlan("money", ["slot.money"])
    if kind == "COUNT":
        return SlotPlan("int", [_count_rule(name)], constraints={"gt": 0})
    if kind in ("PERSON", "VENUE", "TITLE"):
        return SlotPlan("text", ["slot.name"])
    if kind == "RATING":
        return SlotPlan("text", ["slot.score"])
    if kind == "GENRE":
        return SlotPlan("text", _genre_rules(desc + " " + name))
    if label == "PLACE.FROM" or (kind == "PLACE" and re.search(r"^from|origin|pickup", name)):
        return SlotPlan("text", ["slot.place.from"])
    if label == "PLACE.TO":
        return SlotPlan("text", ["slot.place.to"])
    if kind in ("PLACE", "ADDRESS"):
        return SlotPlan("text", ["slot.place.in", "slot.place.to"])
    return SlotPlan("text")


def _free_text(slot: dict[str, Any], siblings: list[tuple[str, str]], model_labels: tuple[str, ...] | None, rules: bool) -> SlotPlan:
    """The type and extractors of a non-categorical slot, from the kind of value its name and
    description say (the same mapping `train ner` labels spans with). With a trained model
    (`ner`), the field takes the model's spans of that kind; without, the generic English
    model's nearest labels; `rules=False` leaves only the model (the benchmark's ablation)."""
    label = value_kind(slot["name"], slot["description"], siblings)
    kind = label.split(".")[0] if label else ""
    plan = _rules(kind, label or "", slot, [n for n, _ in siblings])
    if model_labels is not None:
        served = served_label(label, model_labels)
        refs = [f"ner.{served}"] if served else []
    else:
        refs = list(_GENERIC_NER.get(kind, []))
    if kind == "PLACE" and model_labels is None and label != "PLACE":
        refs = []  # the generic model cannot tell an origin from a destination
    plan.extract = ([*plan.extract] if rules else []) + refs
    return plan


def _ask(description: str) -> str:
    """The question for a missing slot, from its description ("Date of the event" -> "What is the date of the event?")."""
    d = re.sub(r"^(?:the|a|an)\s+", "", description.strip().rstrip("."), flags=re.IGNORECASE)
    for lead in ("Boolean flag indicating whether ", "Boolean flag indicating if ", "Boolean flag whether ", "Whether or not ", "Whether "):
        if d.startswith(lead):
            return f"Please tell me whether {d[len(lead):]}."
    return f"What is the {d[0].lower()}{d[1:]}?"


def service_domain(service: dict[str, Any], ner: NerRef | None = None, rules: bool = True,
                   generic_ner: bool = True) -> dict[str, Any]:
    """The domain document of one SGD service; `ner` names a trained model (None: the generic
    English model's labels, or no NER at all without `generic_ner`)."""
    slots = service["slots"]
    names = [s["name"] for s in slots]
    siblings = [(s["name"], s["description"]) for s in slots]
    inputs = {n for it in service["intents"] for n in [*it["required_slots"], *it["optional_slots"]]}
    fields: dict[str, dict[str, Any]] = {}
    for slot in slots:
        model_labels = ner.labels if ner else None if generic_ner else ()
        plan = _categorical(slot) if slot["is_categorical"] else _free_text(slot, siblings, model_labels, rules)
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
    doc: dict[str, Any] = {"domain": snake(service["service_name"]), "version": 1, "description": service.get("description", ""),
           "languages": ["en"], "default_currency": "USD", "fields": fields, "machine": machine, "actions": actions}
    return {**doc, "ner": {"model": ner.path}} if ner else doc


def load_schema(path: str | Path) -> list[dict[str, Any]]:
    """The services of an SGD `schema.json` (plain or gzipped), checked for the fields we use."""
    schema = read_json(path)
    if not isinstance(schema, list) or not all(isinstance(s, dict) and {"service_name", "slots", "intents"} <= set(s) for s in schema):
        raise Errors.BAD_DATASET(problem=f"{path} is not an SGD schema (a list of services with service_name, slots, intents)",
                           fix="pass schema.json from an SGD split directory, e.g. sgd/dev/schema.json.gz")
    return schema


def import_sgd(schema_path: str | Path, out_dir: str | Path, ner: str | Path | None = None, rules: bool = True,
               generic_ner: bool = True) -> list[Path]:
    """Write one linted domain file per service of `schema_path` into `out_dir`; with `ner`, every
    domain uses that trained model (`--ner DIR`). `rules=False` / `generic_ner=False` leave rules
    or the generic model out (the benchmark's ablation)."""
    docs = {}
    kinds: dict[str, dict[str, str]] = {}  # domain -> field -> kind of value, for the carries between services
    model = model_ref(ner, out_dir) if ner else None
    for service in load_schema(schema_path):
        doc = service_domain(service, model, rules, generic_ner)
        header = (f"Imported from SGD {Path(schema_path).name}, service {service['service_name']}, by `context-editor import sgd`.\n"
                  "Edit freely: synonyms, ask texts and extract rules are a starting point (docs/domain-format.md).")
        docs[doc["domain"]] = (doc, header)
        siblings = [(s["name"], s["description"]) for s in service["slots"]]
        kinds[doc["domain"]] = {s["name"]: kind for s in service["slots"] if not s["is_categorical"]
                                and (kind := value_kind(s["name"], s["description"], siblings))}
    declare_carries({name: doc for name, (doc, _) in docs.items()}, kinds)
    return write_domains(docs, out_dir)


@functools.cache
def _value_words() -> dict[str, list[str]]:
    table = yaml.safe_load(data_path("sgd_value_words.yaml").read_text("utf-8"))
    return {k.lower(): [str(w) for w in ws] for k, ws in table.items()}


def _value_synonyms(value: str) -> list[str]:
    """Everyday words for a category value that the SGD schema names by the category alone ("cheap"
    for "inexpensive", "concert" for "Music"): this importer's own table, written into its output."""
    return [w for w in _value_words().get(value.lower(), []) if w.lower() != value.lower()]
