"""Text that XML 1.0 can carry, whatever a user or tool wrote.

Escaping is Jinja's autoescape (which also escapes quotes, as attributes need); `xml_safe`
removes what escaping cannot fix: control characters and lone surrogates, which are illegal in
XML even as entities. They are replaced by a visible `\\uXXXX` so nothing disappears silently.
Text nodes need only `<`, `>` and `&` escaped: the `text` filter (`text_node`) leaves quotes as
they are, so a tool's JSON is not doubled in tokens by `&#34;`.
"""

from __future__ import annotations

import re

from markupsafe import Markup

_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: str) -> str:
    return _ILLEGAL.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def text_node(value: object) -> Markup:
    """`value` as XML element content: safe characters, and only `&`, `<`, `>` escaped."""
    text = xml_safe(str(value))
    return Markup(text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))
