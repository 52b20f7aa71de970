"""CrossWOZ `database/` -> five domain files (attraction, restaurant, hotel, metro, taxi).

CrossWOZ publishes no machine-readable schema: its slots are the queryable attributes that
`database/database.md` marks with `*`. They are listed once in `DOMAINS` below, with the ASCII
field name each gets (field names are lower_snake_case) and where its values come from:
- `gazetteer`: enum values read from the database files — entity names for `名称` and the
  `周边…` (nearby) slots, and the attribute vocabularies (hotel types, facilities, dishes,
  visit durations). They are written as gazetteer files beside the domains
  (`gazetteers/<name>.json`, the same mechanism any domain uses) and named by `gazetteer:`.
  The database is the catalogue a real deployment would own; nothing is read from the dialogues;
- `rules`: generic slot-type rule families from `rules/zh/slots.yaml`. All five domains listen
  to the same conversation, so a family is chosen by what its cue says the value is about: a
  ticket price (门票), a price per person (人均), a room price (价格), the rating of an
  attraction, a restaurant or a hotel (the place named in the same sentence), a trip's start
  and end;
- the `周边…` (nearby) slots hold entity names, found only where `slot.place.near` finds a
  landmark ("天安门广场周边的酒店": `enum_match: rules`, so a place named elsewhere is no landmark);
  tool results (the database's `周边…` keys) set them too;
- `tool`: attributes a user asks about but does not constrain (address, phone, …) are tool-only,
  keyed by their Chinese database key so a database record fills them.

CrossWOZ's state is the user's search constraints (`sys_state_init`), so the domains declare:
- `名称` takes only a name the user brings up (`mentions: new`) and is no search constraint (not a
  field of the `search` action, so naming a place neither starts a new search nor is relaxed): a
  name the user repeats from the assistant's list, or from earlier, is mostly a pick or a
  landmark the wizard does not put in the state. Even-numbered val dialogues: of user-said names
  not named before in the dialogue, 58 entered the state and 14 did not; of names the assistant
  had just named, 52 entered and 194 did not; of names named earlier, 3 and 117. Session 5 made
  names tool-only (+0.020 per turn against reading every name); `mentions: new` instead: per-turn
  JGA 0.274 -> 0.304 on the even half, 0.310 -> 0.339 on the held-out odd half;
- `dialogue: {offers: false}`: a recommendation the user goes along with is a result, not a
  constraint (+0.008);
- `dialogue: {subject: …}`: a message that names another kind of thing is not read (+0.033: the
  breakfast of a hotel is no dish, a taxi ride is no metro ride);
- `dialogue: {new_search: search}`: "我想找一家评分4.5分以上的酒店" later in the dialogue replaces the
  hotel's earlier constraints (+0.010); lists (dishes, facilities) hold the latest search's items;
- `dialogue: {relax: search}`: CrossWOZ's wizard drops (or widens) a constraint when the entity it
  offers does not meet it ("抱歉，…推荐您去…，人均消费是119元" after "人均消费50-100元"), and the gold state
  follows: in the even-numbered val dialogues, of the constraints whose value the wizard's reply
  states differently, 42 were cleared, 44 changed (to a range the wizard chose) and 17 kept after
  a no-match reply, and most kept ones were met by the value stated. Clearing an unmet one:
  per-turn JGA 0.259 -> 0.274 on the even half, 0.286 -> 0.310 on the held-out odd half. The
  price-per-person rule reads a single amount too ("人均消费68元"), so the stated value is found.
The benchmark reads the same table to map gold slot names to fields (`gold_slots`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..domain.kinds import served_label, value_kind
from ..errors import Errors
from ..lang import lexicon
from .common import NerRef, model_ref, read_json, track_action, write_domains

_BRANCH = re.compile(r"[（(][^（）()]*[)）]$")  # "汉庭酒店(北京柳芳店)" -> branch "(北京柳芳店)"


@dataclass(frozen=True)
class Slot:
    """One queryable CrossWOZ slot: its field, how it is extracted, and its ask text."""

    zh: str
    field: str
    ask: str
    gazetteer: str | None = None  # a key of `_vocabularies`
    rules: tuple[str, ...] = ()
    is_list: bool = False
    tool_only: bool = False
    tool_key: bool = False  # a tool result's key of the slot's name fills it too
    new_only: bool = False  # only a value the conversation has not named before (`mentions: new`)


@dataclass(frozen=True)
class CrossWozDomain:
    zh: str
    name: str
    subject: str  # the kind of thing it is about (`domain.kinds.THINGS`)
    db_file: str | None
    description: str
    slots: tuple[Slot, ...]
    results: tuple[tuple[str, str], ...] = ()  # (database key, field) set only by tool results


def _nearby(kind_zh: str, field: str, names: str, place: str) -> Slot:
    """A landmark the user searches near ("天安门广场周边的酒店"): one of the database's `names`,
    said before 周边/附近 and the kind of `place` sought; a tool result's `周边…` key fills it too."""
    return Slot(f"周边{kind_zh}", field, f"您想在哪个{kind_zh}附近？", gazetteer=names, rules=(f"slot.place.near.{place}",), tool_key=True)


def _nearby_slots(place: str) -> tuple[Slot, ...]:
    return (_nearby("景点", "nearby_attraction", "attraction", place), _nearby("餐馆", "nearby_restaurant", "restaurant", place),
            _nearby("酒店", "nearby_hotel", "hotel", place))


def _rating(place: str) -> Slot:
    return Slot("评分", "rating", "您对评分有什么要求？", rules=(f"slot.rating.{place}",))


_TRIP = (Slot("出发地", "origin", "您从哪里出发？", rules=("slot.place.from",)),
         Slot("目的地", "destination", "您要去哪里？", rules=("slot.place.to",)))
_CONTACT = (("地址", "address"), ("电话", "phone"), ("地铁", "metro_station"))

DOMAINS: tuple[CrossWozDomain, ...] = (
    CrossWozDomain("景点", "attraction", "ATTRACTION", "attraction_db.json", "北京的景点：推荐、门票、游玩时间、评分、周边。", (
        Slot("名称", "name", "您想去哪个景点？", gazetteer="attraction", new_only=True),
        Slot("门票", "ticket_price", "您对门票价格有什么要求？", rules=("slot.price.ticket",)),
        Slot("游玩时间", "visit_duration", "您打算游玩多长时间？", gazetteer="visit_duration"),
        _rating("attraction"), *_nearby_slots("attraction")), results=_CONTACT),
    CrossWozDomain("餐馆", "restaurant", "RESTAURANT", "restaurant_db.json", "北京的餐馆：推荐菜、人均消费、评分、周边。", (
        Slot("名称", "name", "您想去哪家餐馆？", gazetteer="restaurant", new_only=True),
        Slot("推荐菜", "dishes", "您想吃什么菜？", gazetteer="dish", is_list=True),
        Slot("人均消费", "price_per_person", "您的人均消费预算是多少？", rules=("slot.price.per_person",)),
        _rating("restaurant"), *_nearby_slots("restaurant")), results=(*_CONTACT, ("营业时间", "opening_hours"))),
    CrossWozDomain("酒店", "hotel", "HOTEL", "hotel_db.json", "北京的酒店：类型、设施、价格、评分、周边。", (
        Slot("名称", "name", "您想住哪家酒店？", gazetteer="hotel", new_only=True),
        Slot("酒店类型", "hotel_type", "您想住什么类型的酒店？", gazetteer="hotel_type"),
        Slot("酒店设施", "facilities", "您需要酒店提供哪些设施？", gazetteer="facility", is_list=True),
        Slot("价格", "price", "您对酒店价格有什么要求？", rules=("slot.price.room",)),
        _rating("hotel"), *_nearby_slots("hotel")), results=_CONTACT),
    CrossWozDomain("地铁", "metro", "METRO", None, "地铁出行：从出发地到目的地。", _TRIP),
    CrossWozDomain("出租", "taxi", "TAXI", None, "打车出行：从出发地到目的地。", _TRIP, results=(("车型", "car_type"), ("车牌", "plate"))),
)


def gold_slots(domain_zh: str) -> dict[str, str]:
    """CrossWOZ slot name -> field name, for one domain (used to score against gold state)."""
    spec = next(d for d in DOMAINS if d.zh == domain_zh)
    return {s.zh: s.field for s in spec.slots}


def _records(database_dir: Path, name: str) -> list[dict[str, Any]]:
    if not (database_dir / name).is_file():
        raise Errors.BAD_DATASET(problem=f"{database_dir} has no {name}",
                           fix="pass CrossWOZ's `database/` directory (attraction_db.json, restaurant_db.json, hotel_db.json)")
    rows = read_json(database_dir / name)
    if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == 2 and isinstance(r[1], dict) for r in rows):
        raise Errors.BAD_DATASET(problem=f"{database_dir / name} is not a CrossWOZ database file (a list of [name, record] pairs)",
                           fix="pass the CrossWOZ `database/` directory as published")
    return [r[1] for r in rows]


def _names(records: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Entity name -> the other ways it is written: other brackets, and without its branch when unique."""
    names = sorted({r["名称"] for r in records if r.get("名称")})
    base_count: dict[str, int] = {}
    for n in names:
        base = _BRANCH.sub("", n)
        base_count[base] = base_count.get(base, 0) + 1
    out = {}
    for n in names:
        variants = {n.replace("（", "(").replace("）", ")"), n.replace("(", "（").replace(")", "）")}
        base = _BRANCH.sub("", n)
        if base != n and base_count[base] == 1 and len(base) >= 3:
            variants.add(base)
        out[n] = sorted(variants - {n})
    return out


def _vocabulary(records: list[dict[str, Any]], key: str, strip: str = "") -> dict[str, list[str]]:
    """The distinct values of an attribute (strings or lists of strings) as canonical values; a
    negation word the database lists as a value (a restaurant's 推荐菜 "没有") is no value."""
    values = set()
    negations = set(lexicon().words("negation/before"))
    for r in records:
        v = r.get(key)
        for item in v if isinstance(v, list) else [v]:
            if isinstance(item, str) and len(item.strip()) >= 2 and item.strip() not in negations:
                values.add(item.strip())
    out = {}
    for v in sorted(values):
        variants = {v.replace(" ", "")}
        if strip and v.endswith(strip) and len(v) > len(strip) + 1:
            variants.add(v[: -len(strip)])  # 经济型 -> 经济
        out[v] = sorted(variants - {v})
    return out


def _vocabularies(database_dir: Path) -> dict[str, dict[str, list[str]]]:
    attractions = _records(database_dir, "attraction_db.json")
    restaurants = _records(database_dir, "restaurant_db.json")
    hotels = _records(database_dir, "hotel_db.json")
    return {
        "attraction": _names(attractions), "restaurant": _names(restaurants), "hotel": _names(hotels),
        "visit_duration": _vocabulary(attractions, "游玩时间"), "dish": _vocabulary(restaurants, "推荐菜"),
        "hotel_type": _vocabulary(hotels, "酒店类型", strip="型"), "facility": _vocabulary(hotels, "酒店设施"),
    }


GAZETTEER_DIR = "gazetteers"


def gazetteer_path(name: str) -> str:
    """Where a vocabulary is written, relative to the domain files."""
    return f"./{GAZETTEER_DIR}/{name}.json"


def _field(slot: Slot, ner_ref: str | None = None, rules: bool = True) -> dict[str, Any]:
    f: dict[str, Any] = {"type": "text", "description": f"CrossWOZ 槽位 {slot.zh}", "ask": {"zh": slot.ask}}
    if slot.tool_only:
        return {**f, "sources": ["tool"], "tool_keys": [slot.zh]}
    if slot.gazetteer:
        f["type"] = "list" if slot.is_list else "enum"
        if slot.is_list:
            f["items"] = {"type": "enum", "gazetteer": gazetteer_path(slot.gazetteer)}
            f["policy"] = "latest"  # the items of the latest search ("想吃芒果慕斯" after "樟茶鸭和担担面")
        else:
            f["gazetteer"] = gazetteer_path(slot.gazetteer)
    if slot.new_only:
        f["mentions"] = "new"  # a name repeated from the assistant's list is a pick, a landmark: no constraint
        f["tool_keys"] = [slot.zh]
    if slot.tool_key:
        f["tool_keys"] = [slot.zh]
        f["enum_match"] = "rules"  # a place named anywhere is no landmark; one before 周边 is
    extract = [*(slot.rules if rules else ()), *([ner_ref] if ner_ref else [])]
    if extract:
        f["extract"] = extract
    return f


def _ner_ref(spec: CrossWozDomain, slot: Slot, ner: NerRef | None) -> str | None:
    """The model label a slot opts into: the kind of value of its name, about its domain (the
    domain's name is the slot's description, as `train ner --format crosswoz` labels it)."""
    if ner is None or slot.tool_only or slot.new_only:
        return None
    label = served_label(value_kind(slot.zh, spec.zh, [(s.zh, spec.zh) for s in spec.slots]), ner.labels)
    return f"ner.{label}" if label else None


def domain_document(spec: CrossWozDomain, ner: NerRef | None = None, rules: bool = True) -> dict[str, Any]:
    """The domain document of one CrossWOZ domain (its gazetteers are files beside it); `ner`
    names a trained model, `rules=False` leaves the rule packs out (the benchmark's ablation;
    gazetteers are the fields' types and stay)."""
    fields = {s.field: _field(s, _ner_ref(spec, s, ner), rules) for s in spec.slots}
    for key, name in spec.results:
        fields[name] = {"type": "text", "description": f"数据库字段 {key}（查询结果）", "sources": ["tool"], "tool_keys": [key]}
    constraints = [s.field for s in spec.slots if not s.new_only]  # a picked name is no search constraint
    doc = {"domain": spec.name, "version": 1, "description": spec.description, "languages": ["zh"], "default_currency": "CNY",
            "fields": fields, "dialogue": {"offers": False, "subject": spec.subject, "new_search": "search", "relax": "search"},
            "actions": {"track": track_action(list(fields), f"{spec.zh}：跟踪的全部字段。"),
                        "search": {"description": f"按用户的条件查询{spec.zh}。", "fields": constraints, "recent_rounds": 1}}}
    return {**doc, "ner": {"model": ner.path}} if ner else doc


def import_crosswoz(database_dir: str | Path, out_dir: str | Path, ner: str | Path | None = None, rules: bool = True,
                    generic_ner: bool = True) -> list[Path]:
    """Write the five CrossWOZ domains, with gazetteers from `database_dir`, into `out_dir`; with
    `ner`, every domain uses that trained model. (`generic_ner` is accepted for symmetry with
    `import_sgd`: the generic model is English, CrossWOZ domains never use it.)"""
    db = Path(database_dir)
    if not db.is_dir():
        raise Errors.BAD_DATASET(problem=f"no such directory: {db}", fix="pass CrossWOZ's `database/` directory (it holds attraction_db.json, …)")
    vocab = _vocabularies(db)
    gazetteers = Path(out_dir) / GAZETTEER_DIR
    gazetteers.mkdir(parents=True, exist_ok=True)
    for name, values in vocab.items():
        (gazetteers / f"{name}.json").write_text(json.dumps(values, ensure_ascii=False, indent=1), encoding="utf-8")
    model = model_ref(ner, out_dir) if ner else None
    docs = {}
    for spec in DOMAINS:
        header = (f"Imported from CrossWOZ {db.name}/ (domain {spec.zh}) by `context-editor import crosswoz`.\n"
                  "Enum values are the database's entity names and attribute values, in gazetteers/*.json; edit freely\n"
                  "(docs/domain-format.md).")
        docs[spec.name] = (domain_document(spec, model, rules), header)
    return write_domains(docs, out_dir)
