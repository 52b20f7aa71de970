"""Text that XML 1.0 can carry, whatever a user or tool wrote.

Escaping `<`, `&` and quotes is Jinja's autoescape; this removes what escaping cannot fix:
control characters and lone surrogates, which are illegal in XML even as entities. They are
replaced by a visible `\\uXXXX` so nothing disappears silently.
"""

from __future__ import annotations

import re

_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: str) -> str:
    return _ILLEGAL.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)
