"""Kinds of value: what a slot holds, read from its name and description.

One mapping serves two users, so they can never disagree:
- the importers choose a field's rule family and NER label from it (`importers/sgd.py`,
  `importers/crosswoz.py`);
- `context-editor train ner` labels a dataset's slot spans with it, so a model learns *kinds*
  (DATE, PLACE, TITLE, …), not one dataset's slot names, and serves services it never saw.

A kind may carry a role when the slot's name says it and the schema has the counterpart:
`PLACE.FROM` / `PLACE.TO` only in a schema with both an origin and a destination slot,
`DATE.START` / `DATE.END` only with both a start and an end date; a venue, rating or price
names what it belongs to when the description says (`VENUE.HOTEL`, `RATING.RESTAURANT`).
That subject is a field's, not a model's: a model is trained on the plain kind (`train_label`;
the words of a hotel's rating and a restaurant's look alike, so the subjects were not learnt:
held-out F1 0–0.36), and at run time a span of such a kind takes the subject the message names
(`with_subject`: "这家酒店评分多少" -> `RATING.HOTEL`). Every domain of a conversation reads every
message, so a span without a subject would fill the hotel's, the restaurant's and the
attraction's rating at once; one whose message names no subject (or several) fills none.
Elsewhere the plain kind is used, and a field that opts into `ner.PLACE` takes `PLACE` and every `PLACE.*` span (the same
prefix rule as rule ids).

The cues are generic English and Chinese words for the kind of a value; nothing here names a
dataset's services or slots. A slot whose kind is not recognised gets no label (its spans are
left unlabelled in training, and its field gets no NER).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# (kind, cue in the slot name, cue in the description), first match wins: order matters
# (`stay_length` is a count, not a place; `show_time` is a time, not a title).
_KINDS: tuple[tuple[str, str, str | None], ...] = (
    ("PHONE", r"phone|电话", None),
    ("DURATION", r"duration|游玩时间|时长", None),
    ("DATE", r"date|日期", None),
    ("TIME", r"(?<![a-z])time(?!s)|时间", None),
    ("MONEY", r"amount|price|fare|rent|balance|cost|价格|门票|消费|费用", None),
    ("COUNT", r"number_of|(?<![a-z])count|stay_length|人数|数量", None),
    ("RATING", r"rating|评分", None),
    ("ADDRESS", r"address|地址", None),
    ("PERSON", r"director|directed|actor|starring|artist|recipient|therapist|doctor|stylist|dentist|contact_name|姓名",
     r"^name of (?:the )?(?:person|actor|artist|director)"),
    ("TITLE", r"movie|song|album|title|event_name|show|track|playlist", None),
    ("DISH", r"菜|dish", None),
    ("AMENITY", r"设施|facilit|amenit", None),
    ("GENRE", r"genre|category|cuisine|type|类型", r"genre|cuisine"),
    ("VENUE", r"restaurant|hotel|place_name|property|attraction|theat(?:er|re)|venue|名称|餐馆|酒店|景点", None),
    ("PRODUCT", r"car_name|model|product|brand|商品|品牌", None),
    ("PLACE", r"city|location|area|destination|origin|where|airport|station|place|^from|^to_|出发地|目的地|地点|城市", None),
    ("TITLE", r"(?!)", r"^(?:name|title) (?:of|to use for|for) "),
)
_FROM = r"^from|origin|pickup|leaving|departure|出发"
_TO = r"^to_|destination|where_to|arriv|目的"
_START = r"start|check_in|pickup|leaving|departure|出发|入住"
_END = r"return|dropoff|check_out|end|离店|退房|返回"
_NEAR = r"周边|附近|nearby|near_"
_ROLES = {"PLACE": ((_FROM, "FROM"), (_TO, "TO")), "DATE": ((_START, "START"), (_END, "END"))}
# What a venue, a rating or a price belongs to, when the description says (one conversation may
# speak of a hotel's and a restaurant's at once).
_SUBJECT_KINDS = ("VENUE", "RATING", "MONEY")
_SUBJECTS = (("HOTEL", r"hotel|酒店|宾馆"), ("RESTAURANT", r"restaurant|餐馆|餐厅|饭店"), ("ATTRACTION", r"attraction|景点|景区"))
# The kinds of thing a conversation can be about, for a domain's `dialogue: {subject: …}`: the
# subjects above and the rides of a trip.
THINGS = (*_SUBJECTS, ("TAXI", r"\btaxi|\bcab\b|出租|打车|打的"), ("METRO", r"\bsubway|\bmetro\b|地铁"))


def base_kind(name: str, description: str = "") -> str | None:
    """The kind of a slot, without role: 'DATE', 'PLACE', 'TITLE', … or None."""
    n, d = name.lower(), description.lower().strip()
    if d.startswith("number of") and "airport" not in d:  # "Number of days for the transfer"
        return "COUNT"
    return next((kind for kind, name_cue, desc_cue in _KINDS if re.search(name_cue, n) or (desc_cue and re.search(desc_cue, d))), None)


def _role(kind: str, name: str) -> str | None:
    return next((role for cue, role in _ROLES.get(kind, ()) if re.search(cue, name.lower())), None)


def value_kind(name: str, description: str = "", siblings: Sequence[tuple[str, str]] = ()) -> str | None:
    """The NER label of a slot: its kind, with a role when the schema has both roles.

    `siblings` are the (name, description) of the other slots of the same schema (service or
    domain), which decide whether an origin is told apart from a destination.
    """
    kind = base_kind(name, description)
    if kind == "VENUE" and re.search(_NEAR, name.lower()):
        return "VENUE.NEAR"  # a landmark: "天安门广场周边的酒店" (the hotel's nearby place, not a venue sought)
    if kind in _SUBJECT_KINDS:
        subject = next((s for s, cue in _SUBJECTS if re.search(cue, f"{name} {description}".lower())), None)
        return f"{kind}.{subject}" if subject else kind
    role = _role(kind, name) if kind else None
    if kind is None or role is None:
        return kind
    roles = {_role(kind, n) for n, d in siblings if base_kind(n, d) == kind}
    needed = {r for _, r in _ROLES[kind]}
    return f"{kind}.{role}" if needed <= roles | {role} else kind


def train_label(label: str | None) -> str | None:
    """The label a model learns for a slot of `label`: without the subject (`VENUE.HOTEL` -> `VENUE`)."""
    kind, _, subject = (label or "").partition(".")
    return kind if label and kind in _SUBJECT_KINDS and subject in {s for s, _ in _SUBJECTS} else label


def with_subject(label: str, text: str) -> str:
    """A model span's label with the subject its message names (`RATING` -> `RATING.HOTEL` in
    "the hotel's rating"); unchanged when the message names no subject or more than one."""
    if label not in _SUBJECT_KINDS:
        return label
    named = {s for s, cue in _SUBJECTS if re.search(cue, text.lower())}
    return f"{label}.{named.pop()}" if len(named) == 1 else label


def things_named(text: str) -> set[str]:
    """The kinds of thing (`THINGS`) a message names: "找一家有早餐服务的酒店" -> {"HOTEL"}."""
    low = text.lower()
    return {thing for thing, cue in THINGS if re.search(cue, low)}


def modifies_a_thing(text: str) -> bool:
    """Whether words of `text` modify a kind of thing it names ("有会议室的酒店吗", "300-400元的高档型酒店":
    a search for one)."""
    low = text.lower()
    return any(re.search(r"的[^，,。？?！!；;]{0,8}?(?:" + cue + ")", low) for _, cue in THINGS)


def accepts(ref_label: str, span_label: str) -> bool:
    """Whether a field that opted into `ner.<ref_label>` takes a span labelled `span_label`:
    the same label, or a role of it (`PLACE` takes `PLACE.TO`)."""
    return span_label == ref_label or span_label.startswith(ref_label + ".")


def served_label(label: str | None, model_labels: Sequence[str]) -> str | None:
    """The label a field opts into to take `label` spans from a model with `model_labels`: the
    label itself when the model has it, or learnt its plain kind (a subject, `RATING.HOTEL`, is
    added at run time from the message: `with_subject`); else its kind without the role when the
    model never learned that role; None if the model has neither."""
    while label:
        if any(accepts(label, x) for x in model_labels):
            return label
        kind, _, subject = label.partition(".")
        if kind in _SUBJECT_KINDS and kind in model_labels and subject in {s for s, _ in _SUBJECTS}:
            return label
        label = label.rpartition(".")[0]
    return None
