"""Personal data in rendered text: found by checksum-backed detectors and masked.

The rendered context never holds a detected value (in recent turns, history, digest or tool
JSON) unless the action shows a field holding exactly that value: an action that asks for the
card number sees it, every other action sees `[card number]`. Detectors, for text in Chinese
and English:
- e-mail addresses;
- card numbers: 13-19 digits, optionally grouped by spaces or dashes, passing the Luhn check;
- Chinese resident identity numbers: 18 characters whose ISO 7064 MOD 11-2 check character is
  right (and whose birth date is a date);
- phone numbers: Chinese mobile numbers (1[3-9] and nine digits, optionally +86), and
  international numbers written with a + and 8-15 digits;
- passport numbers after a passport cue (护照 / passport), letter(s) and 7-8 digits.

A field can also declare how every context shows its value (`pii:` in the domain file, see
`protect`): wherever it would appear, in `<state>` or in a message, it is starred, replaced by a
pseudonym, or left out.
"""

from __future__ import annotations

import hashlib
import re
from datetime import date
from functools import lru_cache

EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8}(?![\w-])")
CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
RESIDENT_ID = re.compile(r"(?<![0-9A-Za-z])[1-9]\d{16}[\dXx](?![0-9A-Za-z])")
PHONE = re.compile(r"(?<![\d+])(?:(?:\+?86[ -]?)?1[3-9]\d(?:[ -]?\d{4}){2}|\+\d{1,3}[ -]?\d{2,4}(?:[ -]?\d{2,4}){1,3})(?![\d])")
PASSPORT = re.compile(r"(?:护照(?:号码?|号)?|passport(?:\s+(?:no\.?|number|#))?)\s*(?:是|为|:|：|is)?\s*(?P<value>[A-Z]{1,2}\d{7,8})(?![0-9A-Za-z])",
                      re.IGNORECASE)
_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def resident_id_ok(text: str) -> bool:
    """GB 11643: the 18th character is the MOD 11-2 check of the first 17; characters 7-14 are a birth date."""
    check = "10X98765432"[sum(int(c) * w for c, w in zip(text[:17], _ID_WEIGHTS)) % 11]
    try:
        date(int(text[6:10]), int(text[10:12]), int(text[12:14]))
    except ValueError:
        return False
    return text[17].upper() == check


def detect(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each personal value in `text`, left to right, not overlapping."""
    return list(_detected(text))


@lru_cache(maxsize=16384)  # a render masks every summary line again whenever the state moves: the texts repeat
def _detected(text: str) -> tuple[tuple[int, int, str], ...]:
    found: list[tuple[int, int, str]] = []
    found += [(m.start(), m.end(), "e-mail") for m in EMAIL.finditer(text)]
    found += [(m.start(), m.end(), "resident id") for m in RESIDENT_ID.finditer(text) if resident_id_ok(m.group())]
    found += [(m.start(), m.end(), "card number") for m in CARD.finditer(text)
              if luhn_ok(re.sub(r"\D", "", m.group()))]
    found += [(m.start("value"), m.end("value"), "passport number") for m in PASSPORT.finditer(text)]
    found += [(m.start(), m.end(), "phone number") for m in PHONE.finditer(text)]
    kept: list[tuple[int, int, str]] = []
    for span in sorted(found, key=lambda s: (s[0], s[0] - s[1])):
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return tuple(kept)


def mask(text: str, allowed: set[str]) -> str:
    """`text` with every detected personal value replaced by its kind, except values in `allowed`
    (the values of the fields the action shows, compared without spaces and dashes)."""
    spans = _detected(text)
    if not spans:
        return text
    out, last = [], 0
    for start, end, kind in spans:
        value = text[start:end]
        if re.sub(r"[\s-]", "", value) in allowed:
            continue
        out += [text[last:start], f"[{kind}]"]
        last = end
    out.append(text[last:])
    return "".join(out)


POLICIES = ("mask", "hash", "drop")
MASK_KEEP = 4  # characters a masked value keeps at its end ("************1111"), when it is long enough


def protect(policy: str, value: str, field: str) -> str:
    """`value` as a context may show it under the field's `pii` policy.

    mask: every character but the last four starred (values shorter than 8 are starred whole);
    hash: `sha256:` and 12 hex digits of the value's SHA-256, the same for equal values, so the
    model can tell "the same card" without seeing it (a pseudonym, not anonymity: a short value can
    be found by trying them all); drop: `[field withheld]` (the field itself is not rendered).
    """
    if policy == "hash":
        return "sha256:" + hashlib.sha256(value.encode("utf-8")).hexdigest()[:12]
    if policy == "mask":
        keep = MASK_KEEP if len(value) >= 2 * MASK_KEEP else 0
        return "*" * (len(value) - keep) + value[len(value) - keep:]
    return f"[{field} withheld]"
