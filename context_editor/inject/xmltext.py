"""Text that XML 1.0 can carry, whatever a user or tool wrote.

Escaping is Jinja's autoescape (which also escapes quotes, as attributes need); `xml_safe`
removes what escaping cannot fix: control characters and lone surrogates, which are illegal in
XML even as entities. They are replaced by a visible `\\uXXXX` so nothing disappears silently.
Text nodes need only `<`, `>` and `&` escaped: the `text` filter (`text_node`) leaves quotes as
they are, so a tool's JSON is not doubled in tokens by `&#34;`.

A render after a new message writes almost the same texts as the one before (the same turns,
values, summary lines), a few times over when the budget is searched: each function keeps its
answer per text (plain `str` only; a subclass may carry more than its characters).
"""

from __future__ import annotations

import re
from typing import Callable, TypeVar

from markupsafe import Markup, escape

T = TypeVar("T")
_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")
KEPT = 1 << 14  # texts each function remembers (cleared when full, and by `forget`)
_safe: dict[str, str] = {}
_nodes: dict[str, Markup] = {}
_escaped: dict[str, Markup] = {}


def _visible(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group(0)):04x}"


def _kept(memo: dict[str, T], text: str, make: Callable[[str], T]) -> T:
    done = memo.get(text)
    if done is None:
        if len(memo) >= KEPT:
            memo.clear()
        done = memo[text] = make(text)
    return done


def xml_safe(text: str) -> str:
    if type(text) is not str:
        return _ILLEGAL.sub(_visible, text)
    return _kept(_safe, text, lambda t: _ILLEGAL.sub(_visible, t))


def _node(text: str) -> Markup:
    return Markup(xml_safe(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))


def text_node(value: object) -> Markup:
    """`value` as XML element content: safe characters, and only `&`, `<`, `>` escaped."""
    text = str(value)
    return _node(text) if type(text) is not str else _kept(_nodes, text, _node)


def escaped(text: str) -> Markup:
    """A plain string as Jinja's autoescape writes it after `xml_safe` (attributes, names)."""
    return _kept(_escaped, text, lambda t: escape(xml_safe(t)))


def forget() -> None:
    """Drop the remembered texts (after an erasure)."""
    _safe.clear()
    _nodes.clear()
    _escaped.clear()
