"""Carry-over declarations for imported domains, by kind of value (`domain.kinds`).

A dataset whose dialogues move from service to service (a restaurant, then a hotel "there", then
a cab) carries values between them: a city to a city, a destination to the city one stays in, a
date to a date. Which fields those are is read from the kind of value each field holds, never
from a dataset's slot names, and written into the imported files as `carry:` declarations
(`transform/carry.py`), where a person can read and edit them.
"""

from __future__ import annotations

from typing import Any

# The kind of a receiving field -> the kinds of the fields it takes a value from. A trip's origin
# is not carried (where one leaves from is rarely where the last service was), nor are dates:
# a date moves to the next service only once the assistant proposes it and the user agrees
# ("Are you arriving there on March 1st?" "Yes"), which the offer mechanism reads. Measured on SGD
# train (`benchmarks/sgd_misses.py --every 40`): places alone 0.377 JGA, places and dates 0.358.
CARRIES: dict[str, tuple[str, ...]] = {
    "PLACE": ("PLACE", "PLACE.TO"),
    "PLACE.TO": ("PLACE", "PLACE.TO"),
}


def declare_carries(docs: dict[str, dict[str, Any]], kinds: dict[str, dict[str, str]]) -> None:
    """Add `carry:` to each domain document: for every field the user can fill whose kind
    (`kinds`: domain -> field -> label) receives carries, the other domains' user-fillable
    fields of a giving kind and the same type, in the documents' order."""
    def fillable(doc: dict[str, Any], name: str) -> bool:
        return "tool" not in (doc["fields"][name].get("sources") or ["user"])

    for domain, doc in docs.items():
        carry = {}
        for name, label in kinds.get(domain, {}).items():
            giving = CARRIES.get(label, ())
            if not giving or not fillable(doc, name):
                continue
            ftype = doc["fields"][name]["type"]
            sources = [f"{other}.{field}" for other, fields in kinds.items() if other != domain
                       for field, kind in fields.items()
                       if kind in giving and fillable(docs[other], field) and docs[other]["fields"][field]["type"] == ftype]
            if sources:
                carry[name] = sources
        if carry:
            doc["carry"] = carry
