"""Inject: state -> the minimal XML context one action needs, within an exact token budget.

What goes in is decided by the action view (its fields, required fields, recent rounds) and
assembled in the articles' order (system, goal, subtask, state, summary zone, history, recent
turns); what stays when the budget is tight is decided by priority (TIERS, below): required and
critical fields and missing asks always; the latest user message last of all. Whatever is
dropped is dropped whole and named in <truncated_context>; a value is never cut. The `tokens` attribute is the
exact count of the whole output, itself included.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field, replace
from html import unescape
from pathlib import Path
from typing import Any, Callable
from xml.etree import ElementTree

from markupsafe import Markup, escape
from jinja2 import ChoiceLoader, Environment, nodes, DictLoader, FileSystemLoader, StrictUndefined, Template, TemplateError, \
    TemplateNotFound
from jinja2.sandbox import SandboxedEnvironment

from ..domain import ActionSpec, Domain, FieldSpec
from ..domain.versions import PerVersion
from ..errors import Errors
from ..lang import detect_language
from ..model import Message, State, is_no_preference
from ..resources import templates_dir
from . import compact, history, minimal, pii
from .compact import STAGE_ROUNDS
from .budget import Window, resolve_budget
from .diskcache import template_bytecode
from .tokens import SegmentCounter, cuts, max_token_bytes, segment_counter, tokenizer_for
from . import xmltext
from .xmltext import escaped, text_node, xml_safe

log = logging.getLogger(__name__)
CRITICAL_COMPRESSION_FAILURE = "CRITICAL_COMPRESSION_FAILURE"
_TOKENS_SLOT = "TOKENS-SLOT-7F3A"  # placeholder for the `tokens` attribute, filled after counting
TEMPLATES_DIR = templates_dir()
DEFAULT_TEMPLATE = "default.xml.j2"
MINIMAL_TEMPLATE = "minimal.xml.j2"  # an action with `minimal: true` (one domain or several)
NO_PREFERENCE_TEXT = "any"  # a field the user has no preference about ("any date will do")


def format_value(value: Any) -> str:
    """A value as the model reads it: money as "2000 CNY", lists comma-separated, no preference as "any"."""
    if is_no_preference(value):
        return NO_PREFERENCE_TEXT
    if isinstance(value, dict) and "amount" in value:
        amount = value["amount"]
        amount = int(amount) if isinstance(amount, float) and amount.is_integer() else amount
        return f"{amount} {value.get('currency', '')}".strip()
    if isinstance(value, list):
        return ", ".join(format_value(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class RenderedContext:
    action: str
    xml: str
    tokens: int
    budget: int
    fields: list[str]
    missing: list[str]
    dropped: list[str] = field(default_factory=list)
    source_tokens: int = 0  # tokens of the raw messages the context was compacted from
    estimated: bool = False  # counted by an estimate (a model without a published tokenizer), not exactly
    retrieved: list[int] = field(default_factory=list)  # messages shown because search brought them back
    alerts: list[dict[str, Any]] = field(default_factory=list)  # about the render, for the caller (not in the XML)

    @property
    def compaction_ratio(self) -> float:
        """Context tokens / tokens of the raw window it stands for (the first post-compaction check;
        the second, survival of every critical field, is enforced when rendering)."""
        return self.tokens / self.source_tokens if self.source_tokens else 1.0


def lost_fields(xml: str, expected: dict[str, str]) -> list[str]:
    """The protected fields (name -> rendered value) the context has no `<field name=…>` element
    for, holding that value. A substring test is not enough: "no layovers" in a recent turn must
    not pass for a dropped `flight_exclusions: layover`. A context that is not XML loses them all."""
    try:
        # A parser reads a raw carriage return as a line feed (and "\r\n" as one); the character
        # reference keeps it as written. Jinja writes every line end of a template as "\n", so a
        # "\r" in the output comes from a value, inside text or an attribute value.
        root = ElementTree.fromstring(xml.replace("\r", "&#13;"))
    except ElementTree.ParseError:
        return list(expected)
    shown = {(el.get("name"), (el.text or "").strip()) for el in root.iter("field")}
    # In an envelope of several domains a field is named by its group: <state domain="hotel">.
    shown |= {(f"{group.get('domain')}.{el.get('name')}", (el.text or "").strip())
              for group in root.iter("state") if group.get("domain") for el in group.iter("field")}
    # An action with `state_lines` shows a field as the line "name: value (rN source)" (set in
    # round N), its value on one line; compared with its whitespace runs made one space (the
    # template writes a value's line feeds as spaces).
    lines = [(d, n, " ".join(text.split())) for d, n, text in state_lines(root)]
    on_line = {(n, text) for _, n, text in lines} | {(f"{d}.{n}", text) for d, n, text in lines if d}
    return [n for n, text in expected.items()
            if (n, xml_safe(text).strip()) not in shown and (n, " ".join(xml_safe(text).split())) not in on_line]


# The bundled templates that show each field they are given as `<field name="…">text</field>` in
# their <state> (SHA-256 of the source as the loader reads it, first 16 hex digits: default.xml.j2
# and place_order.xml.j2, which extends it). Their output is well-formed XML whatever the values
# (every `{{ }}` is escaped, and stripped of what XML cannot hold), and a protected field is never
# left out of `fields`: so parsing it finds every protected field with its text, unless the
# parser changes that text. `_shows_fields` says when it cannot; then the output is parsed. An
# edited template has another hash and is parsed at every render until it is checked and pinned
# here (tests/test_render.py holds the property on random values).
FIELD_ELEMENT_TEMPLATES = frozenset({"b293c6534993e88f", "37ca0230f3106478"})
# The bundled templates (the same two) whose every droppable item is lines of its own, made from
# the item alone, and whose other lines do not depend on which items are given, only on whether
# an element that holds items holds any (`_wrappers`): a render given fewer items, and nothing
# else changed, is the full render without those items' lines and the elements they empty
# (`_without`). tests/test_render_without.py holds the property on the golden conversations.
ITEM_LINE_TEMPLATES = frozenset({"b293c6534993e88f", "37ca0230f3106478"})
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_]+")


def _shows_fields(plan: _Plan, expected: dict[str, str]) -> bool:
    """Whether `lost_fields` of this plan's output is certainly empty, without parsing it: a pinned
    template showing fields as elements (not as lines, not an envelope of several domains), field
    names an attribute holds as they are, and no carriage return in a value (XML reads it as a
    line feed)."""
    return not plan.spec.state_lines and not plan.sections and _pinned(plan.template) \
        and all(_PLAIN_NAME.fullmatch(n) and "\r" not in text for n, text in expected.items())


def _pinned(template: Template, pins: frozenset[str] = FIELD_ELEMENT_TEMPLATES) -> bool:
    """Whether a template and every template it extends are in `pins`."""
    cached: dict[frozenset[str], bool] = template.__dict__.setdefault("_ce_pinned", {})
    if pins not in cached:
        cached[pins] = template.name is not None and _pinned_chain(template.environment, template.name, pins)
    return cached[pins]


def _pinned_chain(env: Environment, name: str, pins: frozenset[str] = FIELD_ELEMENT_TEMPLATES, depth: int = 0) -> bool:
    source, parents = _source(env, name)
    return depth <= 8 and parents is not None and \
        hashlib.sha256(source.encode()).hexdigest()[:16] in pins and \
        all(_pinned_chain(env, parent, pins, depth + 1) for parent in parents)


# One field of a `state_lines` state (templates/default.xml.j2): "name: value (r3 initial)"; of a
# `minimal` one (templates/minimal.xml.j2): "name: value", after the line "# domain" of its
# domain in an envelope of several.
STATE_LINE = re.compile(r"^[ \t]*([^\s:]+): (.*?)(?: \(r\d+ [a-z_]+\))?[ \t]*$", re.M)
GROUP_LINE = re.compile(r"^[ \t]*# (\S+)[ \t]*$")


def state_lines(root: ElementTree.Element) -> list[tuple[str | None, str, str]]:
    """(domain or None, field, value) of every state line of a rendered context (the root element)."""
    out = []
    for group in root.iter("state"):
        domain = group.get("domain")
        for raw in (group.text or "").split("\n"):  # only "\n" ends a line of XML text (not U+2028, U+0085, "\r" kept)
            head = GROUP_LINE.match(raw)
            if head:
                domain = head.group(1)
            elif m := STATE_LINE.match(raw):
                out.append((domain, m.group(1), m.group(2).strip()))
    return out


def _finalize(value: Any) -> Any:
    if type(value) is str:  # as autoescape would write it (it leaves Markup as it is)
        return escaped(value)
    if type(value) is int:  # a round, a budget: digits, nothing to escape
        return Markup(value)
    if isinstance(value, Markup):  # already made safe by the `text` filter
        return value
    if isinstance(value, _Tag):  # its mark (nothing to escape there) before the text as autoescape writes it
        return value.marked(escaped(str(value)))
    return xml_safe(value) if isinstance(value, str) else value


class _Template(Template):
    """Templates whose output is escaped as autoescape does, once: `_finalize` hands every text
    over escaped already (as a Markup, kept per text), which markupsafe's `escape` would copy into
    a new Markup at every output (a quarter of a template pass). A Markup passes as it is; any
    other value is escaped by markupsafe. The same text either way."""

    @classmethod
    def from_code(cls, environment: Environment, code: Any, globals: Any, uptodate: Any = None) -> Template:
        template = super().from_code(environment, code, globals, uptodate)
        template.root_render_func.__globals__["escape"] = _escape_once  # the name the compiled output calls
        return template


def _escape_once(value: Any) -> Markup:
    return value if type(value) is Markup else escape(value)


def _text(value: Any) -> Markup:
    """The `text` filter, passing an item's mark on."""
    return value.marked(text_node(str(value))) if isinstance(value, _Tag) else text_node(value)


# Tiers in the order they give way to the budget. Within a tier the oldest (or, for history,
# the lowest scored) goes first (the search works on summed item counts: `Renderer._fit` says
# which cut it chooses). The latest user message outlives every optional field, and
# facts of the summary zone give way only after the optional fields. Open values the assistant
# or a tool said ("replies") give way before those the user said.
TIERS = ("entities", "notes", "replies", "history", "values", "recent", "alerts", "optional", "facts", "latest")


MEMO = 64  # states whose render views a renderer keeps (a few sessions, every action)
MAX_CORRECTIONS = 4  # estimate corrections before the plain bisection takes over
_MARK = re.compile("\x00(\\d+)\x01")  # an item's mark in a probe render: NUL, owner number, SOH
_LINE_START = re.compile("\n[ \t]*")  # where a mark goes again in a text of several lines
_MARK_PATTERN = cuts("\x00\\d+\x01")  # the mark without its group (re.split would return groups)


class _Tag(str):
    """A string of one droppable item. Rendered, it carries an invisible mark in front (removed
    before counting), so a probe can tell which output pieces each item produced."""

    owner: int

    @classmethod
    def of(cls, value: str, owner: int) -> _Tag:
        tagged = cls(value)
        tagged.owner = owner
        return tagged

    @property
    def mark(self) -> str:
        return f"\x00{self.owner}\x01"

    def marked(self, out: Markup) -> Markup:
        """`out` (this text as written) with the mark in front, and again after the indent of each
        line it goes on to: every output piece of a text of several lines is then counted as the
        item's (unmarked, its later lines counted as fixed: the estimate of an echoed context kept
        hundreds of tokens that no cut could drop). Marks are looked past where the cuts fall."""
        mark = self.mark
        if "\n" in out:  # (str + Markup would escape the mark again)
            return Markup(mark + _LINE_START.sub(lambda m: m.group(0) + mark, out))
        return Markup("".join((mark, out)))


def _markable(template: Template) -> bool:
    """Marks can be taken out of the output afterwards unless the template post-processes output
    it captured (filter, call and set blocks, macros): such templates are rendered unmarked."""
    cached: bool | None = getattr(template, "_ce_markable", None)
    if cached is None:
        cached = template.name is None or not _post_processes(template.environment, template.name)
        template._ce_markable = cached  # type: ignore[attr-defined]
    return cached


def _reads(template: Template, name: str) -> bool:
    """Whether the template (or a template it extends) may read the context variable `name`: False
    only for a template of plain statements (and its parents) that never names it, so a render
    can leave out what such a template would not show (the bundled minimal template shows no
    `summary` groups: its lines are `lines`)."""
    if not hasattr(template, "_ce_reads"):
        template._ce_reads = None if template.name is None else _names(template.environment, template.name)  # type: ignore[attr-defined]
    words: frozenset[str] | None = template._ce_reads  # type: ignore[attr-defined]
    return words is None or name in words


_CODE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)  # expressions and statements (comments are {# #})
_NAME = re.compile(r"[A-Za-z_]\w*")


def _names(env: Environment, name: str, depth: int = 0) -> frozenset[str] | None:
    """Every word in the code of a plain template and its parents; None for any other template."""
    source, parents = _source(env, name)
    if depth > 8 or parents is None:
        return None
    words = frozenset(w for code in _CODE.findall(source) for w in _NAME.findall(code))
    for parent in parents:
        more = _names(env, parent, depth + 1)
        if more is None:
            return None
        words |= more
    return words


_TAG_NAME = re.compile(r"\{%[-+]?\s*(\w+)")  # every statement's first word (and maybe text that looks like one)
_EXTENDS = re.compile(r"""\{%[-+]?\s*extends\s+(["'])([^"'{}%]+)\1\s*[-+]?%\}""")
_PLAIN_TAGS = {"if", "elif", "else", "endif", "for", "endfor", "block", "endblock", "extends"}


def _source(env: Environment, name: str) -> tuple[str, list[str] | None]:
    """A template's source, and its parents if it holds only plain statements and literal
    parents (the bundled templates), else None."""
    assert env.loader is not None
    source = env.loader.get_source(env, name)[0]
    names = _TAG_NAME.findall(source)
    parents = [m.group(2) for m in _EXTENDS.finditer(source)]
    return source, parents if set(names) <= _PLAIN_TAGS and names.count("extends") == len(parents) else None


def _post_processes(env: Environment, name: str, depth: int = 0) -> bool:
    source, plain = _source(env, name)
    if depth <= 8 and plain is not None:
        # Only plain statements and literal parents: no need to parse it (parsing costs ~15 ms
        # per template in a fresh process). Anything else is parsed below.
        return any(_post_processes(env, parent, depth + 1) for parent in plain)
    tree = env.parse(source)
    if depth > 8 or any(True for _ in tree.find_all((nodes.FilterBlock, nodes.CallBlock, nodes.AssignBlock, nodes.Macro))):
        return True
    parents = []
    for node in tree.find_all((nodes.Extends, nodes.Include)):
        target = getattr(node, "template", None)
        if not (isinstance(target, nodes.Const) and isinstance(target.value, str)):
            return True  # a computed parent: cannot tell
        parents.append(target.value)
    return any(_post_processes(env, parent, depth + 1) for parent in parents)


def _settle(draft: str, count: Callable[[str], int]) -> tuple[str, int]:
    """The `tokens` attribute's fixed point: the first filling of `draft` whose count equals the
    number it claims."""

    def fill(n: int, pad: int = 0) -> str:
        return draft.replace(_TOKENS_SLOT, str(n), 1).replace("<context ", "<context " + " " * pad, 1)

    claimed = count(fill(0))
    for _ in range(4):
        actual = count(fill(claimed))
        if actual == claimed:
            return fill(claimed), actual
        claimed = actual
    # The count can oscillate across a digit boundary: pad the tag until claim and count meet
    # (both only grow, so this ends).
    for pad in range(1, 256):
        xml = fill(claimed, pad)
        actual = count(xml)
        if actual == claimed:
            return xml, actual
        claimed = max(claimed, actual)
    raise Errors.TOKENS_UNSETTLED()


@dataclass
class _Probe:
    """One rendered candidate: its XML, exact tokens and drops, and for a marked render the base
    count of each item's output pieces ((tier, position) -> tokens) and of all its pieces."""

    xml: str
    tokens: int
    dropped: list[str]
    costs: dict[tuple[str, int], int]
    base: int
    # a marked render's pieces in order: (text, the item it belongs to or None if fixed, base count)
    pieces: list[tuple[str, tuple[str, int] | None, int]] = field(default_factory=list)


class _Costs:
    """The search's view of a full render: a candidate's count as the sum of the counts of the
    pieces it keeps (everything not an item's counts as fixed), less the elements a cut empties
    (`_wrappers`: the template leaves an element out with its last item)."""

    def __init__(self, plan: _Plan, full: _Probe, counter: SegmentCounter):
        self.counter, self.sizes = counter, plan.sizes()
        self.items = full.costs  # (tier, position) -> its pieces' count
        self.fixed = full.base - sum(self.items.values())
        self.prefix: dict[str, list[int]] = {}
        self.rank: dict[tuple[str, int], int] = {}  # an item's place in its tier's order of giving way, last first
        rank = self.rank
        for tier in TIERS:
            positions = sorted({p for t, p in self.items if t == tier}, reverse=tier in _NEWEST_FIRST)
            acc = [0]
            for r, p in enumerate(positions):
                acc.append(acc[-1] + self.items[(tier, p)])
                rank[(tier, p)] = r
            self.prefix[tier] = acc
        # Each element that empties: its own count, and per tier the rank of its first item to go
        # last (it empties once every tier keeps fewer items than that).
        self.groups: list[tuple[int, list[tuple[str, int]]]] = []
        self.wrappers = _wrappers(full.pieces)
        for cost, members, _ in self.wrappers:
            first: dict[str, int] = {}
            for key in members:
                first[key[0]] = min(first.get(key[0], rank[key]), rank[key])
            self.groups.append((cost, list(first.items())))
        self.plan = plan
        self.whole = {(t, p) for t, p, _ in _cut(plan, self.sizes).zone}  # the summary lines of the whole render
        self.around = _template_costs(plan.template, counter)

    def _cost(self, tier: str, k: int) -> int:
        acc = self.prefix[tier]
        return acc[min(k, len(acc) - 1)]

    def _sum(self, kept: dict[str, int]) -> int:
        total = self.fixed + sum(self._cost(t, kept[t]) for t in TIERS)
        for cost, first in self.groups:
            if all(kept[t] <= r for t, r in first):
                total -= cost
        return total

    def estimate(self, kept: dict[str, int]) -> int:
        return self.counter.total(self._sum(kept))

    def guess(self, kept: dict[str, int]) -> int:
        """The estimate with what the cut brings in that no item of the whole render counts (from
        the plan alone, no render): the summary lines the whole render hid behind their turns,
        which come back when their turn goes (pushing an older line of their tier out), and the
        template's note of what was dropped (<truncated_context>)."""
        cut = _cut(self.plan, kept)
        total = self._sum(kept) - sum(self._cost(t, kept[t]) for t in ZONE_TIERS)
        piece, (noted, lines, line, first) = self.counter.piece, self.around
        old = new = 0
        for tier, position, z in cut.zone:  # (a line of the whole render not an item's piece was joined to another's)
            if (tier, position) in self.whole:
                old, total = old + 1, total + self.items.get((tier, position), 0)
            else:
                new, total = new + 1, total + line + piece(z.text)
        if new and not old:  # the lines back are all the summary shows: its wrapper with them
            total += first - line
        if cut.dropped:
            total += noted + piece(", ".join(cut.dropped))
            if cut.lost:
                total += lines + piece(" ".join(f"m{i}" for i in cut.lost))
        return self.counter.total(total)

    def search(self, limit: int) -> dict[str, int]:
        """The tier-by-tier bisection of `_bisect`, on estimates (they only grow with what is kept)."""
        kept = dict(self.sizes)
        for tier in TIERS:
            if self.estimate(kept) <= limit:
                break
            lo, hi = 0, kept[tier]
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if self.estimate({**kept, tier: mid}) <= limit:
                    lo = mid
                else:
                    hi = mid - 1
            kept[tier] = lo
        return kept


def _template_vars(*, action: str, domain: str, round: int, budget: int, tokens: Any, tokens_estimated: bool,
                   phase: str | None, system: str | None, goal: Any, subtask: Any, fields: list[dict[str, Any]],
                   states: list[dict[str, Any]], state_lines: bool, missing: list[dict[str, Any]],
                   alerts: list[dict[str, Any]], dropped: str, lost: str, entities: list[Any],
                   summary: list[dict[str, Any]], history: list[dict[str, Any]], turns: list[dict[str, Any]],
                   lines: list[dict[str, Any]] | None, domain_shown: bool) -> dict[str, Any]:
    """The variables a template is rendered with: the one list of them, for a render
    (`Renderer._build`) and for the measure of what a template writes around a cut's texts
    (`_template_costs`). `lines` (a minimal action's turns and summary lines as text lines) and
    `domain_shown` are given only with `lines`."""
    out = {"action": action, "domain": domain, "round": round, "budget": budget, "tokens": tokens,
           "tokens_estimated": tokens_estimated, "phase": phase, "system": system, "goal": goal, "subtask": subtask,
           "fields": fields, "states": states, "state_lines": state_lines, "missing": missing, "alerts": alerts,
           "dropped": dropped, "lost": lost, "entities": entities, "summary": summary, "history": history, "turns": turns}
    if lines is not None:
        out["lines"], out["domain_shown"] = lines, domain_shown
    return out


_NOTED = ("2 recent turns, 1 field", "m1 m2")  # a <truncated_context> as a cut writes it (dropped, lines)
_SAID = "It costs 5 dollars."  # a summary line's text


def _template_costs(template: Template, counter: SegmentCounter) -> tuple[int, int, int, int]:
    """What the template writes around a cut's texts, beyond the texts themselves: its note of
    what was dropped, the lines of the summary it names there, a summary line (source and
    speaker) and the first one (with the summary's wrapper). Measured once per template and
    tokenizer on renders of an empty context (so the same in every render); zeros for a template
    that cannot render one."""
    memo: dict[str, tuple[int, int, int, int]] = template.__dict__.setdefault("_ce_costs", {})
    key = counter.tokenizer.name
    if key not in memo:
        line = {"round": 1, "sources": "m1", "src": "m1", "times": None, "role": "user", "reason": None,
                "text": _SAID, "parts": [{"sep": "", "text": _SAID}]}

        def empty(dropped: str = "", lost: str = "", said: int = 0) -> dict[str, Any]:
            return _template_vars(
                action="a", domain="d", round=1, budget=100, tokens=0, tokens_estimated=False, phase=None, system=None,
                goal=None, subtask=None, fields=[], states=[], state_lines=False, missing=[], alerts=[], dropped=dropped,
                lost=lost, entities=[], summary=[{"level": "stage", "rounds": "1-2", "lines": [line] * said}] if said else [],
                history=[], turns=[], lines=[line] * said, domain_shown=True)

        # Made outside the `try`: a context the builder refuses is this code's fault, and fails loudly.
        contexts = [empty(), empty(said=1), empty(said=2), empty(_NOTED[0]), empty(*_NOTED)]
        try:
            empty_n, one, two, noted, both = (sum(map(counter.piece, counter.pieces(template.render(**c)))) for c in contexts)
            piece = counter.piece
            memo[key] = (noted - empty_n - piece(_NOTED[0]), both - noted - piece(_NOTED[1]), two - one - piece(_SAID),
                         one - empty_n - piece(_SAID))
        except (TemplateError, LookupError, TypeError, ValueError, AttributeError):  # a template that needs a real context
            memo[key] = (0, 0, 0, 0)
    return memo[key]


_OPENER = re.compile(r"[ \t]*<([A-Za-z_][\w.:-]*)(?:\s[^<>]*)?(?<!/)>\n?")  # a line that only opens an element
_CLOSER = re.compile(r"[ \t]*</([A-Za-z_][\w.:-]*)>\n?")  # a line that only closes one


def _wrappers(pieces: list[tuple[str, tuple[str, int] | None, int]]
              ) -> list[tuple[int, set[tuple[str, int]], tuple[int, int]]]:
    """The elements of a marked render that hold only droppable items (or such elements): the
    count of their opening and closing lines, their items, and where those two lines are among
    the pieces. A template writes such a wrapper only around something (`{% if turns
    %}<recent_turns>…`), so a cut that drops all its items drops it too; an element that holds any
    fixed line never empties."""
    stack: list[tuple[str, int, set[tuple[str, int]], list[bool], int]] = []  # name, count, items, [only items], at
    out: list[tuple[int, set[tuple[str, int]], tuple[int, int]]] = []
    for i, (text, owner, n) in enumerate(pieces):
        if owner is not None:
            for g in stack:
                g[2].add(owner)
        elif opened := _OPENER.fullmatch(text):
            stack.append((opened.group(1), n, set(), [True], i))
        elif (closed := _CLOSER.fullmatch(text)) and stack and stack[-1][0] == closed.group(1):
            _, opening, members, only_items, at = stack.pop()
            if only_items[0] and members:
                out.append((opening + n, members, (at, i)))
            elif stack:
                stack[-1][3][0] = False
        else:
            for g in stack:
                g[3][0] = False
    return out


_NEWEST_FIRST = {"recent", "alerts", "notes", "replies", "values", "facts"}  # tiers that keep their last items


@dataclass
class _Plan:
    """Everything one render needs that does not depend on what the budget keeps."""

    action: str
    spec: ActionSpec
    budget: int
    limit: int
    template: Template
    names: list[str]
    protected: list[str]
    optional: list[str]
    missing: list[dict[str, Any]]
    alerts: list[dict[str, Any]]  # the state's alerts, oldest first (droppable)
    fixed_alerts: list[dict[str, Any]]  # the render's own (scorer fallback, template fallback): always shown
    anchors: dict[str, dict[str, Any]]
    seen: dict[int, dict[str, Any]]  # message index -> the turn as the model may see it
    recent: list[list[Message]]  # recent units, oldest first, the latest user unit excluded
    latest: list[list[Message]]  # the unit of the latest user message (0 or 1 unit)
    ranked: list[history.Unit]
    entities: list[compact.Entity]
    zone: dict[str, list[compact.ZoneLine]]  # tier -> lines, oldest first
    window_from: int
    oversized: int
    wanted_back: frozenset[int] = frozenset()  # messages a search brought back (their summary lines are kept first)
    # Several domains in one envelope: domain -> (its renderer, its state); field names are then "domain.field".
    sections: dict[str, tuple[Renderer, State]] = field(default_factory=dict)
    label: str = ""  # the envelope's domain attribute when it is not the renderer's domain
    # A minimal action whose loaded window is the whole conversation: its units, for the other
    # candidate of `_cheaper` (the conversation as the user said it).
    dialogue: list[list[Message]] = field(default_factory=list)
    said: list[compact.ZoneLine] = field(default_factory=list)  # its assistant sentences (minimal.said_lines)
    spans: tuple[str, ...] = ()  # the value-like spans of its user turns and of `said` (lowercased)
    unread: tuple[str, ...] = ()  # its user sentences with words no rule read (minimal.unread_user)
    # A minimal render's lines made so far (`_flat_lines`); not copied by `replace`.
    lines_memo: dict[tuple[Any, ...], tuple[int, dict[str, Any]]] = field(default_factory=dict, init=False, repr=False)
    # Each field as the template shows it (`Renderer._field_of`), made once for all candidates; not copied by `replace`.
    fields_memo: dict[str, dict[str, Any]] = field(default_factory=dict, init=False, repr=False)
    # What each candidate of the budget search shows (`_cut`), made once per candidate; not copied by `replace`.
    cuts_memo: dict[tuple[int, ...], _Cut] = field(default_factory=dict, init=False, repr=False)

    def sizes(self) -> dict[str, int]:
        return {"entities": len(self.entities), "notes": len(self.zone["notes"]), "replies": len(self.zone["replies"]),
                "history": len(self.ranked),
                "values": len(self.zone["values"]), "recent": len(self.recent), "alerts": len(self.alerts),
                "optional": len(self.optional),
                "facts": len(self.zone["facts"]), "latest": len(self.latest)}


@dataclass
class _View:
    """What an action's render reads off one state of the fields (`Renderer.state_view`): one
    object per view, so every memo keyed by its parts' identity finds them again."""

    vocabulary: set[str]
    hidden: history.Hidden
    absorbed: compact.Absorbed
    hidden_key: Any  # what is hidden, but the per-message spans (added per turn: `Renderer._turn`)
    zone_key: tuple[Any, ...] | None = None  # `compact.view_key`, made when a render first needs it


# (domain version, templates folder) -> its Jinja environment and templates (a few versions kept)
_environments: PerVersion[tuple[str, str, str], tuple[SandboxedEnvironment, dict[str, Template]]] = PerVersion()


def _environment(domain: Domain, templates_dir: Path) -> tuple[SandboxedEnvironment, dict[str, Template]]:
    """The Jinja environment of a domain version's templates and the templates its actions use,
    shared by every renderer of that version in the process (a new editor, say one reopening a
    session, loads no template again). The domain's own templates (stored with its version) come
    first, then the bundled ones; a template is fixed for the environment's life (no stat per render)."""

    def made() -> tuple[SandboxedEnvironment, dict[str, Template]]:
        loader = ChoiceLoader([DictLoader(domain.templates), FileSystemLoader(str(templates_dir))])
        env = SandboxedEnvironment(loader=loader, autoescape=True, bytecode_cache=template_bytecode("renderer"),
                                   undefined=StrictUndefined, finalize=_finalize, keep_trailing_newline=False, auto_reload=False)
        env.filters["text"] = _text
        env.template_class = _Template
        return env, {}

    # `_find_template` looks in TEMPLATES_DIR too
    return _environments.get((domain.version_hash, str(templates_dir), str(TEMPLATES_DIR)), made)


class Renderer:
    """Renders action views of one domain with sandboxed, autoescaping Jinja templates."""

    def __init__(self, domain: Domain, templates_dir: Path = TEMPLATES_DIR, model: str | None = None,
                 scorer: history.Scorer | None = None, system: str | None = None, window: Window | None = None,
                 condense: Callable[[str], str] | None = None):
        """`condense`: how a `class: trace` field's text becomes one line (the pipeline gives the
        checked distillation of context_editor.llm); without it the text is shown as it is."""
        self.domain, self.model, self.scorer, self.system, self.window = domain, model, scorer, system, window
        self.condense = condense
        self.env, self._templates = _environment(domain, templates_dir)
        self._views: dict[tuple[Any, ...], _View] = {}
        self._turns: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._fitted: dict[tuple[Any, ...], bool] = {}  # (session, action, limit, whole dialogue) -> everything fitted last time
        self._field_names: dict[str, tuple[str, ...]] = {}  # action -> `_names`
        # The last plan's view (`hidden`) and its turns: message index -> (message, turn) (`_seen`)
        self._last_seen: tuple[history.Hidden | None, dict[int, tuple[Message, dict[str, Any]]]] = (None, {})

    def forget(self) -> None:
        """Drop what renders remembered of states and messages (after an erasure: a turn is
        remembered by its message's hash, which erasure keeps)."""
        self._views.clear()
        self._turns.clear()
        self._fitted.clear()
        self._last_seen = (None, {})
        history.forget_scores()
        compact.forget_entities()
        xmltext.forget()

    def action(self, name: str) -> ActionSpec:
        if name not in self.domain.actions:
            raise Errors.UNKNOWN_ACTION(action=name, domain=self.domain.name, known=", ".join(sorted(self.domain.actions)))
        return self.domain.actions[name]

    def render(self, state: State, action: str, messages: list[Message], budget: int | str | None = None,
               language: str | None = None, summary: list[compact.SummaryLine] | None = None,
               anchors: dict[str, dict[str, Any]] | None = None, _template: str | None = None,
               _alerts: list[Any] | None = None, retrieved: list[Message] | None = None) -> RenderedContext:
        """`messages`: the session's messages from at least `recent_rounds + history_rounds` rounds back.
        `summary`: the session's summary-zone lines up to the recent window (`context_editor.memory`);
        `anchors`: the task goal and subtask ({"goal": {"text", "round"}, …}); `retrieved`: older
        messages a search matched, best first (`memory.retrieval`), to compete in the history."""
        plan = self._plan(state, action, messages, budget, language, summary or [], anchors or {}, _template, _alerts,
                          retrieved or [])
        return self._result(plan, state, messages,
                            lambda: self.render(state, action, messages, budget, language, summary, anchors, _template,
                                                _alerts, retrieved),
                            lambda lost: self._fallback(plan, state, messages, lost, summary, anchors, retrieved))

    def _result(self, plan: _Plan, state: State, messages: list[Message], again: Callable[[], RenderedContext],
                fallback: Callable[[list[str]], RenderedContext]) -> RenderedContext:
        """Fit the plan to its budget and check the outcome: `again` renders anew (once the piece
        counts proved unreliable), `fallback` takes the fields a template lost."""
        talk = self._talk(plan, state) if plan.dialogue and plan.spec.conversation_form == "always" else None
        fitted = self._fit(talk, state) if talk is not None else None
        if talk is not None and fitted is not None and not fitted[1].dropped:
            # The conversation as the user said it, whole: the state form is not rendered at all.
            plan, (kept, probe) = talk, fitted
        else:
            kept, probe = self._fit(plan, state)
            if plan.dialogue and talk is None:
                plan, kept, probe = self._cheaper(plan, state, kept, probe)
        xml, tokens, dropped = probe.xml, probe.tokens, probe.dropped
        counter = segment_counter(self.model)
        if counter.additive and not counter.proven and counter.tokenizer.count(xml) != tokens:
            # Summed piece counts disagree with the whole: never trust them for this tokenizer again.
            log.warning("token counts of %s do not add up piece by piece; counting whole texts", counter.tokenizer.name)
            counter.additive = False
            return again()
        if tokens > plan.limit:
            raise Errors.OVER_BUDGET(action=plan.action, tokens=tokens, limit=plan.limit, protected=", ".join(plan.protected) or "none",
                                     missing=", ".join(m["name"] for m in plan.missing) or "none", alerts=len(plan.alerts),
                                     needed=tokens + plan.spec.safety_margin)
        fields = self._kept_fields(plan, kept)
        expected = {n: self._field_of(plan, state, n)["text"] for n in plan.protected if self._spec_of(plan, n).pii != "drop"}
        lost = [] if _shows_fields(plan, expected) else lost_fields(xml, expected)
        if lost:
            return fallback(lost)
        visible = [m for m in messages if m.role != "system"]
        source = counter.count_said([(m.role, m.content) for m in visible])
        shown = [m.index for u in plan.ranked[: kept["history"]] if u.reason == "retrieved" for m in u.messages]
        return RenderedContext(plan.action, xml, tokens, plan.budget, fields, [m["name"] for m in plan.missing], dropped, source,
                               tokenizer_for(self.model).estimated, sorted(shown))

    def _cheaper(self, plan: _Plan, state: State, kept: dict[str, int], probe: _Probe) -> tuple[_Plan, dict[str, int], _Probe]:
        """A minimal plan whose whole conversation is loaded, or the conversation as the user said
        it (every user turn verbatim, what the assistant said as the plan shows it, and only the
        state values no shown turn or clause was the source of): whichever counts fewer tokens. The other
        form is taken only whole (nothing dropped) and strictly smaller (`conversation_form: smaller`),
        by more than the user's statements it leaves unread."""
        talk = self._talk(plan, state)
        talk_kept, talk_probe = self._fit(talk, state)
        if talk_probe.dropped:
            return plan, kept, probe
        # The plan competes only while it loses no value-like span of the conversation word for
        # word (a state value shown in its own form, "02:15" for "the afternoon 2:15", does not
        # say the user's words; a sentence dropped as absorbed may hold a value extraction missed).
        text = unescape(probe.xml).lower()
        # ... and it must be smaller by more than the user's sentences with words no rule read that
        # it leaves out (`minimal.unread_user`: "I am in the mood for cambodian food.", the "免费" of
        # "我想去一个免费的评分5分的景点…" once the rating is read): sending them costs the
        # conversation form no more than that.
        lost = [u for u in plan.unread if u.lower() not in text]
        extra = segment_counter(self.model).count_said([("user", u) for u in lost]) if lost else 0
        if talk_probe.tokens >= probe.tokens + extra and all(minimal.says(text, v) for v in plan.spans):
            return plan, kept, probe
        return talk, talk_kept, talk_probe

    def _talk(self, plan: _Plan, state: State) -> _Plan:
        """The conversation as the user said it, of a minimal plan whose whole conversation is
        loaded: every user turn verbatim, what the assistant said as the plan shows it (`said`),
        and only the state values no shown turn or clause was the source of."""
        latest = {m.index for unit in plan.latest for m in unit}
        said = [u for u in plan.dialogue if any(m.role == "user" for m in u) and not latest.intersection(m.index for m in u)]
        recent = sorted(said + plan.recent, key=lambda u: u[0].index)
        shown = {m.index for unit in recent + plan.latest for m in unit}
        # The assistant's clauses a value was read from say it (`minimal.said_lines`).
        clauses: dict[int, list[str]] = {}
        for z in plan.said:
            clauses.setdefault(z.sources[0], []).append(z.text.lower())
        return replace(plan, recent=recent, dialogue=[], said=[], spans=(), unread=(), zone={**plan.zone, "replies": plan.said},
                       optional=[n for n in plan.optional if not self._said(plan, state, n, shown, clauses)])

    def _said(self, plan: _Plan, state: State, name: str, shown: set[int], clauses: dict[int, list[str]]) -> bool:
        """Whether the conversation form shows where a field's value was read: its message is shown
        as a turn, or its span in a clause shown of an assistant's or tool's message."""
        if plan.sections:
            domain, name = name.split(".", 1)
            state = plan.sections[domain][1]
        fs = state.fields[name]
        index = minimal.read_at(fs)  # a carried value: the message its source read it from
        if fs.provenance is None or index < 0:
            return False
        return index in shown or any(fs.provenance.text.lower() in c for c in clauses.get(index, ()))

    def _fallback(self, plan: _Plan, state: State, messages: list[Message], lost: list[str],
                  summary: list[compact.SummaryLine] | None, anchors: dict[str, dict[str, Any]] | None,
                  retrieved: list[Message] | None) -> RenderedContext:
        """The action's template dropped a critical fact: keep the plain default rendering instead."""
        if plan.template.name == DEFAULT_TEMPLATE:
            raise Errors.CRITICAL_LOST(lost=lost)
        alert = {"code": CRITICAL_COMPRESSION_FAILURE, "round": state.round,
                 "message": f"template {plan.template.name} lost protected fields {', '.join(lost)}; default template used"}
        return self.render(state, plan.action, messages, plan.budget, None, summary, anchors,
                           _template=DEFAULT_TEMPLATE, _alerts=[alert], retrieved=retrieved)

    def _plan(self, state: State, action: str, messages: list[Message], budget: int | str | None,
              language: str | None, summary: list[compact.SummaryLine], anchors: dict[str, dict[str, Any]],
              template_name: str | None, extra_alerts: list[Any] | None,
              retrieved: list[Message] | None = None, absorbed_by: compact.Absorbed | None = None,
              offers_by: minimal.Offers | None = None, held_by: compact.Absorbed | None = None,
              taken_by: dict[int, tuple[tuple[int, int], ...]] | None = None,
              domains_by: list[str] | None = None, summaries_by: list[list[compact.SummaryLine]] | None = None,
              carried_by: set[str] | None = None, values_by: frozenset[str] | None = None) -> _Plan:
        """`absorbed_by`: what the states of the other domains of the conversation hold (their
        values count as absorbed in the summary zone too: one envelope states each fact once);
        for a minimal action, `held_by` (what all the states hold as rendered; `taken_by`: where
        their present values were read), `offers_by` (the offers still open in all of them),
        `domains_by` (the envelope's domains), `summaries_by` (the other domains' summary lines:
        their value-like spans count in the conversation form), `carried_by` (the domains
        the envelope's values were carried from: `minimal.carried`) and `values_by` (the words
        the rules of every domain read as values: `minimal.value_words`)."""
        spec = self.action(action)
        resolved = resolve_budget(budget, spec.budget_tokens, self.window)
        limit = resolved - spec.safety_margin
        names = list(self._names(spec))
        present = [n for n in names if state.get(n) is not None and self._shown(n, state)]
        language = language or self._language(messages)
        # Ask for what the action needs and for every critical fact it lost (the seeds' forgetting test).
        wanted = [n for n in names if n in spec.required or self.domain.fields[n].critical]
        missing = [{"name": n, "ask": self._ask(n, language)} for n in wanted if state.get(n) is None]
        # Critical fields are protected like required ones: compaction must never lose them.
        protected = [n for n in present if n in spec.required or self.domain.fields[n].critical]
        recent_from = state.round - spec.recent_rounds
        window_from = compact.window_start(state.round, spec.recent_rounds, spec.history_rounds)
        # A message that cannot fit even alone is dropped whole up front, without tokenising it.
        too_big = max_token_bytes(self.model) * limit
        # Identical tool results are shown once, the latest, across history and recent turns alike.
        visible = history.dedupe_tool_results([m for m in messages if m.role != "system" and len(m.content) <= too_big])
        units = history.chains([m for m in visible if m.round > recent_from])
        latest = _latest_user_unit(units)
        older = [m for m in visible if window_from <= m.round <= recent_from]
        vocabulary, hidden, absorbed, hidden_key = self.state_view(state, spec)
        absorbed = absorbed_by or absorbed
        if spec.minimal:  # absorbed by the state as rendered: its present values
            absorbed = held_by if held_by is not None else minimal.held([state])
        # What the model may see of each message: trimmed tool JSON, out-of-scope spans masked.
        # The summary zone and the entity graph are built from these texts too, so nothing hidden leaks.
        # A hit that repeats a loaded message (or an earlier hit) word for word adds nothing: the
        # question asked again today finds itself asked before.
        said = {m.content for m in messages} if retrieved else set()
        found = []
        for m in retrieved or ():
            if m.role != "system" and len(m.content) <= too_big and m.content not in said:
                said.add(m.content)
                found.append(m)
        seen = self._seen(visible + found, hidden, hidden_key)
        wanted_back = frozenset(m.index for m in found)
        # A minimal context shows older turns only through their open lines (the zone, below).
        ranked = history.select_history(spec, state, older, vocabulary, self.scorer, anchors, found)[: spec.max_history] \
            if not spec.minimal else []
        scorer_alerts: list[dict[str, Any]] = getattr(self.scorer, "drain_alerts", list)()
        # The zone includes the recent rounds' lines: hidden while their turns are shown
        # (`_kept_zone`), they keep a fact of a recent turn the budget drops, or name it.
        own = absorbed_by is None and not spec.minimal  # the view's own absorbed values (else made for this render)
        lines = compact.zone_lines(summary, window_from, vocabulary, absorbed, hidden, minimal=spec.minimal,
                                   view=self.zone_key(state, spec) if own else None)
        tiers: dict[str, list[compact.ZoneLine]] = {tier: [] for tier in ZONE_TIERS}
        for line in lines:
            tiers[_zone_tier(line)].append(line)
        zone = {tier: _retrieved_last(tiers[tier], wanted_back) for tier in ZONE_TIERS}
        recent = [u for u in units if u is not latest]
        entities = compact.entity_graph([seen[m.index]["content"] for m in visible],
                                        [v for n in names if isinstance(v := state.get(n), str)
                                         and self.domain.fields[n].cls != "trace"],
                                        self._relations(state, present)) if not spec.minimal else []
        said_lines: list[compact.ZoneLine] = []
        spans: tuple[str, ...] = ()
        unread: tuple[str, ...] = ()
        if spec.minimal:
            # Each value once (inject/minimal.py): older turns only through their open lines, the
            # message the latest user turn replies to while it is pending.
            replying = minimal.pending(history.chains(visible), [latest] if latest else [])
            offers = offers_by if offers_by is not None else minimal.open_offers(state)
            envelope = set(domains_by) if domains_by else {self.domain.name}
            if minimal.whole(messages):  # the domains the envelope's values were carried from speak for it too
                envelope |= carried_by if carried_by is not None else minimal.carried([(self.domain.carry, state)])
            elsewhere = minimal.foreign(summary, envelope)
            summaries = [summary, *(summaries_by or ())]  # each domain's lines
            zone = minimal.zone(zone, offers, state.round - minimal.REPLY_ROUNDS, elsewhere, user_clauses=spec.user_clauses == "all")
            before = latest[0].index if latest else messages[-1].index + 1 if messages else 0  # the latest user message
            # The user's earlier answers no rule read, with their questions ("What type of film?" "A scary one.").
            answers = minimal.answered(summaries, visible, before, absorbed, hidden, elsewhere)
            if answers:
                zone = {**zone, "facts": sorted([*zone["facts"], *answers], key=lambda z: z.sources)}
            # Shown whole while pending: the user's reply holds a value the state did not read (the
            # question gives it its meaning), or it left open an offer no summary line holds.
            asked = latest is not None and any(minimal.unread(summary, m.index, absorbed) for m in latest if m.role == "user")
            # ... or the reply names nothing ("That would be great."): what it takes is named there.
            asked = asked or latest is not None and minimal.bare(summaries, latest, replying, absorbed)
            lined = {i for z in zone["replies"] for i in z.sources}
            recent = replying if asked or any(m.index in offers and m.index not in lined for u in replying for m in u) else []
            if minimal.whole(messages):
                user_text = "\n".join(seen[m.index]["content"] for m in visible if m.role == "user").lower()
                every = minimal.merged([summary, *summaries_by]) if summaries_by else summary
                read = taken_by if taken_by is not None else minimal.taken([state])
                said_lines = minimal.said_lines(every, user_text, hidden, elsewhere, read)
                spans = minimal.spans_of([z for z in every if z.role == "user"], said_lines, read)
                values = values_by if values_by is not None else minimal.value_words(self.domain)
                unread = minimal.unread_user(every, absorbed, before, elsewhere, vocabulary, values)
        return _Plan(
            action=action, spec=spec, budget=resolved, limit=limit,
            template=self.env.get_template(template_name) if template_name else self._template(spec),
            names=names, protected=protected, optional=[n for n in present if n not in protected], missing=missing,
            alerts=self._alerts(state, spec, names), fixed_alerts=scorer_alerts + (extra_alerts or []), anchors=anchors, seen=seen,
            recent=recent, latest=[latest] if latest else [], ranked=ranked, entities=entities, zone=zone,
            dialogue=history.chains(visible) if spec.minimal and not found and minimal.whole(messages) and len(visible) == sum(
                1 for m in messages if m.role != "system") else [], said=said_lines, spans=spans, unread=unread,
            wanted_back=wanted_back,
            window_from=window_from, oversized=sum(1 for m in messages if m.role != "system" and len(m.content) > too_big))

    def _names(self, spec: ActionSpec) -> tuple[str, ...]:
        """The fields an action's render shows: its own, then the domain's shared ones (fixed
        for the renderer's domain version: made once per action)."""
        known = self._field_names.get(spec.name)
        if known is None:
            known = self._field_names[spec.name] = tuple(dict.fromkeys(
                [*spec.fields, *(n for n, f in self.domain.fields.items() if f.shared)]))
        return known

    def state_view(self, state: State, spec: ActionSpec) -> tuple[set[str], history.Hidden, compact.Absorbed, Any]:
        """What the action's render reads off the state (its vocabulary, what it may not see, what
        the state absorbed), and the key of what is hidden (`_turn`'s memo)."""
        view = self._view(state, spec)
        return view.vocabulary, view.hidden, view.absorbed, view.hidden_key

    def zone_key(self, state: State, spec: ActionSpec) -> tuple[Any, ...]:
        """The summary zone's memo key of the state view (`compact.view_key`), made once per view."""
        view = self._view(state, spec)
        if view.zone_key is None:
            view.zone_key = compact.view_key(view.vocabulary, view.absorbed, view.hidden)
        return view.zone_key

    def _view(self, state: State, spec: ActionSpec) -> _View:
        """The state view, worked out once per state of the fields: the edit chain's head names
        them (all three read only the fields, which only edits change), so a message that brought
        no edit (most do not) renders with the view of the message before."""
        key = (state.session, state.last_seq, state.last_hash, spec.name)
        view = self._views.get(key)
        if view is None:
            if len(self._views) >= MEMO:
                self._views.clear()
            hidden = history.hidden_spans(self.domain, spec, state)
            view = self._views[key] = _View(history.action_vocabulary(self.domain, spec, state), hidden,
                                            compact.covered_spans(state), hidden.fingerprint(spans=False))
        return view

    def _seen(self, messages: list[Message], hidden: history.Hidden, hidden_key: Any) -> dict[int, dict[str, Any]]:
        """Message index -> `_turn`. A message object the last plan showed under the very same
        view (`state_view` hands out one `hidden` per view) is shown as it was then, without making
        its memo key: the pipeline keeps the window's messages between renders, so after a new
        message every other one is such an object."""
        last_hidden, last = self._last_seen
        if last_hidden is not hidden:
            last = {}
        seen: dict[int, dict[str, Any]] = {}
        kept: dict[int, tuple[Message, dict[str, Any]]] = {}
        for m in messages:
            known = last.get(m.index)
            turn = known[1] if known is not None and known[0] is m else self._turn(m, hidden, hidden_key)
            seen[m.index] = turn
            kept[m.index] = (m, turn)
        self._last_seen = (hidden, kept)
        return seen

    def _turn(self, msg: Message, hidden: history.Hidden, hidden_key: Any) -> dict[str, Any]:
        """`history.turn`, remembered by the message's hash and what is hidden from it."""
        if not msg.hash:
            return history.turn(self.domain, msg, hidden)
        key = (msg.hash, msg.index, hidden_key, tuple(hidden.spans.get(msg.index, ())))
        seen = self._turns.get(key)
        if seen is None:
            if len(self._turns) >= MEMO * 64:
                self._turns.clear()
            seen = self._turns[key] = history.turn(self.domain, msg, hidden)
        return seen

    def _alerts(self, state: State, spec: ActionSpec, names: list[str]) -> list[dict[str, Any]]:
        """A field's alert stays until the field gets a valid value; an alert about no field
        (a context loop, say) is news only while its round is among the recent ones."""
        return [{"code": a.code, "round": a.round, "message": a.message} for a in state.alerts
                if a.field in names or (a.field is None and a.round > state.round - max(spec.recent_rounds, 1))]

    def _fit(self, plan: _Plan, state: State) -> tuple[dict[str, int], _Probe]:
        """The most of each tier that fits the budget, tiers giving way in TIERS order, as the
        summed item counts see it; the exact count is done only for the final candidate.

        One render of everything, marked, tells what each item costs; the search runs on those
        summed costs (the estimate, less the wrappers a cut empties). Before its cut is rendered,
        the guess adds what the cut brings in that no item of the whole render counted (from the
        plan alone: the summary lines its dropped turns hid, the template's <truncated_context>
        note); while the guess is over the limit, the search runs again that much lower. The cut is
        then counted exactly: made from the whole render's pieces where that is the same text
        (`_without`: a cut of entities), else rendered. While that is over the limit, the
        estimate's error there is taken off the limit and the search runs again (the offset only
        grows, so the candidates only shrink). Nothing checks one item more, so budget can be left
        unused: the offset measured at one candidate is taken off every cut (the exact count is not
        monotone in what is kept, so a crossing is one of several anyway). Tokenizers whose counts
        do not add up piece by piece (and templates that post-process their own output) take the
        plain bisection.

        The answer is chosen from this render's plan alone, so a warm process renders what a cold
        one does: nothing remembered picks the cut (`_fitted` only chooses whether the whole render
        is marked; the XML is the same either way). `tests/test_render_cold_warm.py` checks it."""
        sizes = plan.sizes()
        counter = segment_counter(self.model)
        if not (counter.additive and _markable(plan.template)):
            return self._bisect(plan, state, sizes, {})
        probes: dict[tuple[int, ...], _Probe] = {}
        # Whether everything fitted the last time this session rendered this action: then this
        # render most likely fits too, and is tried unmarked first (marks cost about a third of a
        # render, and only a search reads them). The XML is the same either way.
        last = (state.session, plan.action, plan.limit, bool(plan.dialogue))
        full = self._build(plan, state, sizes, counter) if self._fitted.get(last) else None
        if full is None or full.tokens > plan.limit:
            full = self._build(plan, state, sizes, counter, marked=True)
        probes[tuple(sizes[t] for t in TIERS)] = full
        if len(self._fitted) >= MEMO * 8:
            self._fitted.clear()
        self._fitted[last] = full.tokens <= plan.limit
        if full.tokens <= plan.limit:
            return sizes, full
        costs = _Costs(plan, full, counter)
        offset = 0
        for _ in range(MAX_CORRECTIONS):
            kept = costs.search(plan.limit - offset)
            for _ in range(MAX_CORRECTIONS):  # what the cut brings in, from the plan: searched below it again
                guess = costs.guess(kept)
                if guess <= plan.limit or not any(kept.values()):
                    break
                offset = max(offset, guess - costs.estimate(kept))
                kept = costs.search(plan.limit - offset)
            probe = self._probe(plan, state, kept, probes, counter, whole=(full, costs))
            if probe.tokens <= plan.limit:
                return kept, probe
            if not any(kept.values()):
                return kept, probe  # nothing optional left: the render reports what is over
            offset = max(offset, probe.tokens - costs.estimate(kept))
        return self._bisect(plan, state, sizes, probes)

    def _bisect(self, plan: _Plan, state: State, sizes: dict[str, int],
                probes: dict[tuple[int, ...], _Probe]) -> tuple[dict[str, int], _Probe]:
        """Tier by tier, the most that fits, by bisection over exact renders."""
        counter = segment_counter(self.model)
        kept = dict(sizes)
        result = self._probe(plan, state, kept, probes, counter)
        for tier in TIERS:
            if result.tokens <= plan.limit:
                break
            lo, hi = 0, kept[tier]  # invariant: keeping hi is too many
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if self._probe(plan, state, {**kept, tier: mid}, probes, counter).tokens <= plan.limit:
                    lo = mid
                else:
                    hi = mid - 1
            kept[tier] = lo
            result = self._probe(plan, state, kept, probes, counter)
        return kept, result

    def _without(self, plan: _Plan, full: _Probe, costs: _Costs, kept: dict[str, int],
                 counter: SegmentCounter) -> _Probe | None:
        """The render of the cut `kept` made from the full marked render without a template pass,
        where that is the same text: a template of ITEM_LINE_TEMPLATES, and a cut that changes
        nothing but which items are given (the same <truncated_context> note and summary lines as
        the full render; in practice a cut of entities). It is the full render's pieces less those
        of the items the cut drops and of the elements that hold only such items; None otherwise."""
        cut, whole = _cut(plan, kept), _cut(plan, costs.sizes)
        if cut.dropped != whole.dropped or cut.lost != whole.lost or {(t, p) for t, p, _ in cut.zone} != costs.whole \
                or not _pinned(plan.template, ITEM_LINE_TEMPLATES):
            return None

        def gone(item: tuple[str, int]) -> bool:
            return costs.rank[item] >= kept[item[0]]

        emptied = {i for _, members, at in costs.wrappers if all(map(gone, members)) for i in at}
        pieces = [text for i, (text, owner, _) in enumerate(full.pieces)
                  if i not in emptied and (owner is None or not gone(owner))]
        xml, tokens, _ = self._fixed_point("".join(pieces), counter, pieces)
        return _Probe(xml, tokens, cut.dropped, {}, 0)

    def _kept_fields(self, plan: _Plan, kept: dict[str, int]) -> list[str]:
        return [n for n in plan.names if n in plan.protected or n in plan.optional[: kept["optional"]]]

    def _probe(self, plan: _Plan, state: State, kept: dict[str, int], probes: dict[tuple[int, ...], _Probe],
               counter: SegmentCounter, marked: bool = False, whole: tuple[_Probe, _Costs] | None = None) -> _Probe:
        """The render keeping the first kept[tier] items of each tier (each candidate rendered once).
        `whole`: the full marked render and its costs, whose pieces are the cut's text where
        `_without` says so (no second template pass)."""
        key = tuple(kept[t] for t in TIERS)
        if key not in probes:
            made = self._without(plan, *whole, kept, counter) if whole is not None else None
            probes[key] = made or self._build(plan, state, kept, counter, marked)
        return probes[key]

    def _build(self, plan: _Plan, state: State, kept: dict[str, int], counter: SegmentCounter,
               marked: bool = False) -> _Probe:
        """Render with the first kept[tier] items of each tier: the XML, its exact tokens, what was
        dropped, and if `marked`, what each item's output pieces cost."""
        marks: list[tuple[str, int]] = []  # owner number -> (tier, position of the item in its tier)

        def tag(value: Any, tier: str, position: int) -> Any:
            if not marked or not isinstance(value, str):
                return value
            marks.append((tier, position))
            return _Tag.of(value, len(marks) - 1)

        def tagged(item: dict[str, Any], tier: str, position: int, text: str = "content") -> dict[str, Any]:
            # Only the item's text carries the mark: a piece (a line) is its first mark's, and an
            # item's every line shows its text (a text of several lines is marked on each).
            return {**item, text: tag(item[text], tier, position)} if marked else item

        cut = _cut(plan, kept)
        hist, turns, zone, lost, dropped = cut.history, cut.turns, cut.zone, cut.lost, cut.dropped
        first_alert = len(plan.alerts) - kept["alerts"]
        optional = set(plan.optional[: kept["optional"]])
        fields = [tagged(self._field_of(plan, state, n), "optional", plan.optional.index(n), "text") if n in optional
                  else self._field_of(plan, state, n) for n in self._kept_fields(plan, kept)
                  if self._spec_of(plan, n).pii != "drop"]
        minimal_lines = _flat_lines(plan, zone, [("history", i, m) for i in hist for m in plan.ranked[i].messages] + turns,
                                    tag, None if marked else plan.lines_memo) if plan.spec.minimal else None
        draft: str = plan.template.render(**_template_vars(
            action=plan.action, domain=plan.label or self.domain.name, round=state.round, budget=plan.budget,
            tokens=_TOKENS_SLOT, tokens_estimated=tokenizer_for(self.model).estimated, phase=state.phase,
            system=self.system, goal=plan.anchors.get("goal"), subtask=plan.anchors.get("subtask"),
            fields=fields, states=_grouped(fields, plan), state_lines=plan.spec.state_lines, missing=plan.missing,
            alerts=[tagged(a, "alerts", first_alert + j, "message") for j, a in enumerate(plan.alerts[first_alert:])]
            + plan.fixed_alerts,
            dropped=", ".join(dropped), lost=" ".join(f"m{i}" for i in lost),
            entities=[replace(e, name=tag(e.name, "entities", j)) if marked else e
                      for j, e in enumerate(plan.entities[: kept["entities"]])],
            summary=_zone_groups(zone, plan.window_from, tag, plan.wanted_back) if _reads(plan.template, "summary") else [],
            history=[tagged({**plan.seen[m.index], "reason": plan.ranked[i].reason, "src": f"m{m.index}"}
                            if plan.ranked[i].reason
                            else plan.seen[m.index], "history", i) for i in hist for m in plan.ranked[i].messages],
            turns=[tagged(plan.seen[m.index], tier, j) for tier, j, m in turns],
            lines=minimal_lines, domain_shown=not plan.sections))
        if not marked:
            xml, tokens, _ = self._fixed_point(draft, counter)
            return _Probe(xml, tokens, dropped, {}, 0)
        costs: dict[tuple[str, int], int] = {}
        clean = []
        counted: list[tuple[str, tuple[str, int] | None, int]] = []
        for piece in counter.pieces(draft, _MARK_PATTERN):
            key = None
            if "\x00" in piece:
                owners = _MARK.findall(piece)
                piece = _MARK.sub("", piece)
                key = marks[int(owners[0])]
                n = counter.piece(piece)
                costs[key] = costs.get(key, 0) + n
            else:
                n = counter.piece(piece)
            counted.append((piece, key, n))
            clean.append(piece)
        xml, tokens, base = self._fixed_point("".join(clean), counter, clean)
        return _Probe(xml, tokens, dropped, costs, base, counted)

    def _shown(self, name: str, state: State) -> bool:
        """Transient fields are instructions: shown only in the round they were given."""
        spec = self.domain.fields[name]
        return spec.cls != "transient" or state.fields[name].set_round == state.round

    def _fixed_point(self, draft: str, counter: SegmentCounter, pieces: list[str] | None = None) -> tuple[str, int, int]:
        """Settle the `tokens` attribute on the exact count of the output containing it: the XML,
        its count, and (an additive counter) its base count, the sum of its pieces' counts.

        With an additive counter only the piece holding the attribute is counted again while the
        number settles: filling it in changes no cut point (digits and spaces inside a line), so
        every other piece keeps its count. `pieces`: the draft's pieces, when the caller has them."""
        if counter.additive:
            pieces = pieces if pieces is not None else counter.pieces(draft)
            at = next((i for i, p in enumerate(pieces) if _TOKENS_SLOT in p), None)
            before = sum(map(len, pieces[:at])) if at is not None else 0
            padded = draft.find("<context ")  # the padding goes there: it must be in the same piece
            if at is not None and (padded < 0 or before <= padded < before + len(pieces[at])):
                rest = sum(counter.piece(p) for i, p in enumerate(pieces) if i != at)
                # Each filling differs only in its number: counted from one skeleton (`SegmentCounter.piece`).
                line, tokens = _settle(pieces[at], lambda text: counter.total(counter.piece(text) + rest))
                return "".join(pieces[:at]) + line + "".join(pieces[at + 1:]), tokens, counter.piece(line) + rest
            xml, tokens = _settle(draft, counter.count)
            return xml, tokens, sum(counter.piece(p) for p in counter.pieces(xml))
        xml, tokens = _settle(draft, counter.count)
        return xml, tokens, 0

    def _template(self, spec: ActionSpec) -> Template:
        """The action's template, looked up once (a template is fixed for a renderer's life)."""
        template = self._templates.get(spec.name)
        if template is None:
            template = self._templates[spec.name] = self._find_template(spec)
        return template

    def _find_template(self, spec: ActionSpec) -> Template:
        own = f"{spec.name}.xml.j2"
        fallback = MINIMAL_TEMPLATE if spec.minimal else DEFAULT_TEMPLATE
        name = spec.template or (own if own in self.domain.templates or (TEMPLATES_DIR / own).exists() else fallback)
        try:
            return self.env.get_template(name)
        except TemplateNotFound:
            return self.env.get_template(DEFAULT_TEMPLATE)

    def _field(self, state: State, name: str) -> dict[str, Any]:
        fs = state.fields[name]
        policy = self.domain.fields[name].pii
        text = format_value(fs.value)
        if self.condense is not None and self.domain.fields[name].cls == "trace":
            text = self.condense(text)
        return {"name": name, "round": fs.set_round, "source": fs.source,
                "text": pii.protect(policy, text, name) if policy else text}

    def _field_of(self, plan: _Plan, state: State, name: str) -> dict[str, Any]:
        """The field as the template shows it; in a several-domain plan "domain.field" is looked up
        in that domain's state and shown by name in its domain's group. Made once per plan (every
        candidate of the budget search shows the same field alike); not to be modified."""
        known = plan.fields_memo.get(name)
        if known is None:
            if not plan.sections:
                known = self._field(state, name)
            else:
                domain, short = name.split(".", 1)
                renderer, own = plan.sections[domain]
                known = {**renderer._field(own, short), "name": short, "domain": domain}
            plan.fields_memo[name] = known
        return known

    def _spec_of(self, plan: _Plan, name: str) -> FieldSpec:
        if not plan.sections:
            return self.domain.fields[name]
        domain, short = name.split(".", 1)
        return plan.sections[domain][0].domain.fields[short]

    def _relations(self, state: State, present: list[str]) -> list[str]:
        """The values of the action's `class: relation` fields: the seeds of the entity graph."""
        values: list[str] = []
        for name in present:
            if self.domain.fields[name].cls == "relation":
                value = state.get(name)
                values.extend(format_value(v) for v in (value if isinstance(value, list) else [value]))
        return values

    def _ask(self, name: str, language: str) -> str:
        ask = self.domain.fields[name].ask
        return ask.get(language) or next(iter(ask.values()), f"Please provide {name}.")

    def _language(self, messages: list[Message]) -> str:
        for m in reversed(messages):
            if m.role == "user":
                return detect_language(m.content)
        return self.domain.languages[0]


def _latest_user_unit(units: list[list[Message]]) -> list[Message] | None:
    for unit in reversed(units):
        if any(m.role == "user" for m in unit):
            return unit
    return None


def _retrieved_last(lines: list[compact.ZoneLine], retrieved: frozenset[int]) -> list[compact.ZoneLine]:
    """A tier's lines in the order they give way, first to last: oldest first, and the lines of
    messages a search brought back for this render last (the latest user turn asked for them)."""
    if not retrieved:
        return lines
    back = [z for z in lines if not retrieved.isdisjoint(z.sources)]
    return [z for z in lines if retrieved.isdisjoint(z.sources)] + back


ZONE_TIERS = ("notes", "replies", "values", "facts")  # the summary zone's tiers, in the order they give way


def _zone_tier(line: compact.ZoneLine) -> str:
    if line.rank == compact.VALUE:
        return "values" if line.role == "user" else "replies"
    return "facts" if line.rank == compact.FACT else "notes"


def _kept_zone(plan: _Plan, kept: dict[str, int], shown: set[int],
               shown_text: str) -> tuple[list[tuple[str, int, compact.ZoneLine]], list[int], int]:
    """The summary lines kept (newest of each tier; with their tier and position in it), leaving
    out what is shown verbatim; and the sources of the facts and open values the budget pushed
    out (named in <truncated_context>)."""
    out: list[tuple[str, int, compact.ZoneLine]] = []
    lost: list[int] = []
    dropped = 0
    said = shown_text.lower()
    # A minimal context reads "said" word for word ("8" is not said by "the 8th": minimal.says).
    says = minimal.says if plan.spec.minimal else str.__contains__
    for tier in ZONE_TIERS:
        # A line is left out when its turn is shown, or its text, or (a value line) every open value of it.
        candidates = [(tier, i, z) for i, z in enumerate(plan.zone[tier])
                      if not (z.sources[0] in shown and shown.issuperset(z.sources)) and z.text not in shown_text
                      and not (z.rank == compact.VALUE and z.open and all(says(said, v) for v in z.open))]
        n = min(kept[tier], len(candidates))
        out.extend(candidates[len(candidates) - n:])
        dropped += len(candidates) - n
        if tier != "notes":  # a merged line is named as its src would be: first and latest source
            lost.extend(i for _, _, z in candidates[: len(candidates) - n]
                        for i in dict.fromkeys((z.sources[0], z.sources[-1])))
    return sorted(out, key=lambda x: (x[2].round, x[2].sources)), sorted(set(lost)), dropped


def _zone_groups(lines: list[tuple[str, int, compact.ZoneLine]], window_from: int,
                 tag: Callable[[Any, str, int], Any], retrieved: frozenset[int] = frozenset()) -> list[dict[str, Any]]:
    """Lines grouped as the template shows them: the rolled-up session summary, then each stage."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for tier, position, z in lines:
        # A sentence said many times names its first and latest source and how often it was said.
        src = z.sources if len(z.sources) <= 2 else (z.sources[0], z.sources[-1])
        line = {"round": z.round, "sources": " ".join(f"m{i}" for i in src),
                "times": len(z.sources) if len(z.sources) > 2 else None, "text": tag(z.text, tier, position), "role": z.role}
        if retrieved and not retrieved.isdisjoint(z.sources):  # (a sentence said all session has thousands)
            line["reason"] = "retrieved"
        groups.setdefault(z.stage, []).append(line)
    out = []
    for stage in sorted(groups):
        first, last = (1, window_from - 1) if stage < 0 else (stage * STAGE_ROUNDS + 1, (stage + 1) * STAGE_ROUNDS)
        out.append({"level": "session" if stage < 0 else "stage", "rounds": f"{first}-{last}", "lines": groups[stage]})
    return out


def _flat_lines(plan: _Plan, zone: list[tuple[str, int, compact.ZoneLine]], turns: list[tuple[str, int, Message]],
                tag: Callable[[Any, str, int], Any], memo: dict[tuple[Any, ...], tuple[int, dict[str, Any]]] | None = None
                ) -> list[dict[str, Any]]:
    """A minimal context's turns and summary lines as one list in the conversation's order, each
    one text line "m7 user: …" (a tool's turn names its tool: "m8 tool:search: …"). `memo`: the
    plan's lines made so far, for unmarked renders (a line is the same in every candidate)."""
    memo = {} if memo is None else memo
    out: list[tuple[int, dict[str, Any]]] = []
    for tier, position, z in zone:
        line = memo.get(("zone", tier, position))
        if line is None:
            src = z.sources if len(z.sources) <= 2 else (z.sources[0], z.sources[-1])
            line = memo[("zone", tier, position)] = (z.sources[0], {
                "src": " ".join(f"m{i}" for i in src), "times": len(z.sources) if len(z.sources) > 2 else None, "role": z.role,
                "reason": "retrieved" if plan.wanted_back and not plan.wanted_back.isdisjoint(z.sources) else None,
                "parts": [{"sep": "", "text": tag(z.text, tier, position)}]})
        out.append(line)
    for tier, position, m in turns:
        line = memo.get(("turn", tier, position, m.index))
        if line is None:
            seen = plan.seen[m.index]
            role = f"{seen['role']}:{seen['name']}" if seen.get("name") else seen["role"]
            line = memo[("turn", tier, position, m.index)] = (m.index, {
                "src": f"m{m.index}", "times": None, "role": role,
                "reason": "retrieved" if m.index in plan.wanted_back else None,
                "parts": [{"sep": "", "text": tag(seen["content"], tier, position)}]})
        out.append(line)
    lines = _joined_lines([d for _, d in sorted(out, key=lambda x: x[0])])
    return _implied_sources(plan, zone, lines) if plan.spec.line_numbers == "gaps" else lines


def _implied_sources(plan: _Plan, zone: list[tuple[str, int, compact.ZoneLine]],
                     lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lines with the number left out where the order tells it (`compact.implied`: the
    message is the first after the previous line's with the line's role): "user: …" as in a
    transcript, "m9 user: …" where a turn of that role is skipped. The number costs two tokens a
    line, and while the whole conversation is sent every user turn follows the one before. Only
    what this render knows is left out: a message between two lines that is not loaded (older
    than the window, a system or oversized one) keeps the next line's number, so `why` finds
    every line from the session's messages. The lines given are not changed."""
    roles = {i: z.role for _, _, z in zone for i in z.sources}

    def role_of(index: int) -> str | None:
        seen = plan.seen.get(index)
        return seen["role"] if seen is not None else roles.get(index)

    out, last = [], -1
    for d in lines:
        src = str(d["src"])
        if " " not in src and d["times"] is None and \
                compact.implied(role_of, last, str(d["role"]).split(":", 1)[0]) == int(src[1:]):
            d = {**d, "src": ""}
        out.append(d)
        last = int(src.rsplit(" m", 1)[-1].lstrip("m"))
    return out


def _joined_lines(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive summary lines of one message (its sentences that the state did not absorb)
    as one line: "m5 assistant: I found 5 flights. It costs $198." says its source and speaker
    once (each prefix costs 4 tokens). Each sentence keeps its own text (and budget mark); a
    space joins them unless the first ends in a character that needs none (Chinese punctuation).
    The lines given are not changed (`_flat_lines` remembers them)."""
    out: list[dict[str, Any]] = []
    for d in lines:
        last = out[-1] if out else None
        if last is not None and d["times"] is None and last["times"] is None and str(last["src"]) == str(d["src"]) \
                and " " not in str(d["src"]) and str(last["role"]) == str(d["role"]) and last["reason"] == d["reason"]:
            tail = str(last["parts"][-1]["text"])
            out[-1] = {**last, "parts": [*last["parts"], {"sep": " " if tail and tail[-1].isascii() else "",
                                                          "text": d["parts"][0]["text"]}]}
            continue
        out.append(d)
    return out


@dataclass
class _Cut:
    """What one candidate of the budget search shows: the history units kept (their ranks, in
    the conversation's order), the recent turns kept (tier, position, message), the summary lines
    kept, the sources of the lines the cut pushed out and what it dropped (<truncated_context>)."""

    history: list[int]
    turns: list[tuple[str, int, Message]]
    zone: list[tuple[str, int, compact.ZoneLine]]
    lost: list[int]
    dropped: list[str]


def _cut(plan: _Plan, kept: dict[str, int]) -> _Cut:
    """The candidate keeping the first kept[tier] items of each tier, made once per plan (the
    search's guess and the render of that candidate read the same)."""
    key = tuple(kept[t] for t in TIERS)
    cut = plan.cuts_memo.get(key)
    if cut is None:
        hist = sorted(range(kept["history"]), key=lambda i: plan.ranked[i].messages[0].index)
        first_recent = len(plan.recent) - kept["recent"]
        units = [("recent", first_recent + j, u) for j, u in enumerate(plan.recent[first_recent:])]
        units += [("latest", j, u) for j, u in enumerate(plan.latest[: kept["latest"]])]
        turns = sorted(((tier, j, m) for tier, j, unit in units for m in unit), key=lambda x: x[2].index)
        shown = {m.index for i in hist for m in plan.ranked[i].messages} | {m.index for _, _, m in turns}
        shown_text = "\n".join(plan.seen[i]["content"] for i in shown)
        zone, lost, zone_dropped = _kept_zone(plan, kept, shown, shown_text)
        cut = plan.cuts_memo[key] = _Cut(hist, turns, zone, lost, _dropped_summary(plan, kept, zone_dropped))
    return cut


def _dropped_summary(plan: _Plan, kept: dict[str, int], zone_lines: int) -> list[str]:
    sizes = plan.sizes()
    parts = [(sizes["recent"] + sizes["latest"] - kept["recent"] - kept["latest"], "recent turn"),
             (sizes["optional"] - kept["optional"], "field"), (sizes["history"] - kept["history"], "older message"),
             (plan.oversized, "oversized message"), (zone_lines, "summary line"), (sizes["alerts"] - kept["alerts"], "alert")]
    return [f"{n} {label}{'s' if n != 1 else ''}" for n, label in parts if n > 0]


def _grouped(fields: list[dict[str, Any]], plan: _Plan) -> list[dict[str, Any]]:
    """The fields of a several-domain envelope by domain, in the order the domains were given
    (a domain with nothing to show has no group)."""
    groups: dict[str, list[dict[str, Any]]] = {d: [] for d in plan.sections}
    for f in fields:
        groups.setdefault(f.get("domain", ""), []).append(f)
    return [{"domain": d, "fields": fs} for d, fs in groups.items() if fs]


MULTI_TEMPLATE = "multi.xml.j2"


@dataclass(frozen=True)
class RenderPart:
    """One domain of a conversation, as `render_many` takes it: the domain's renderer, its state,
    the session's messages from its action's window on, its summary lines and anchors."""

    renderer: Renderer
    state: State
    messages: list[Message]
    summary: list[compact.SummaryLine] = field(default_factory=list)
    anchors: dict[str, dict[str, Any]] = field(default_factory=dict)


def render_many(parts: list[RenderPart], action: str, budget: int | str | None = None,
                language: str | None = None) -> RenderedContext:
    """One `<context>` for several domains of one conversation: the state grouped by domain
    (`<state domain=…>`), each turn and each summary line at most once, one budget, one exact
    token count. The summary zone counts a value as absorbed when any domain's state holds it.
    The first part leads: its action's budget, window and the turns as its domain may see them;
    the messages are the conversation's, the same in every part. Field names in `fields`,
    `missing` and `<truncated_context>` are "domain.field"."""
    if not parts:
        raise Errors.NO_DOMAINS()
    names = [p.renderer.domain.name for p in parts]
    if len(set(names)) != len(names):
        raise Errors.DUPLICATE_DOMAIN(domains=", ".join(names))
    lead = parts[0].renderer
    for p in parts:
        p.renderer.action(action)
    specs = [p.renderer.action(action) for p in parts]
    views = [p.renderer.state_view(p.state, spec) for p, spec in zip(parts, specs)]
    joined: dict[int, list[tuple[int, int]]] = {}
    absorbed: compact.Absorbed = (joined, [])
    for _, _, (by_message, texts), _ in views:
        for index, spans in by_message.items():
            joined.setdefault(index, []).extend(spans)
        absorbed[1].extend(texts)
    # The messages are the conversation's, the same in every part: the lead's plan holds the turns
    # and the summary lines (judged against every state), the others only their fields and asks.
    language = language or lead._language(parts[0].messages)
    # A minimal envelope: what every state holds and the offers every state left open.
    offers: minimal.Offers = {}
    for p in parts if specs[0].minimal else ():
        minimal.open_offers(p.state, offers)
    held = minimal.held([p.state for p in parts]) if specs[0].minimal else None
    taken = minimal.taken([p.state for p in parts]) if specs[0].minimal else None
    carried = minimal.carried([(p.renderer.domain.carry, p.state) for p in parts]) if specs[0].minimal else None
    values = frozenset().union(*(minimal.value_words(p.renderer.domain) for p in parts)) if specs[0].minimal else None
    plans = [p.renderer._plan(p.state, action, p.messages if i == 0 else [], budget, language, p.summary if i == 0 else [],
                              p.anchors if i == 0 else {}, None, None, None, absorbed_by=absorbed, offers_by=offers,
                              held_by=held, taken_by=taken, domains_by=names, carried_by=carried,
                              summaries_by=[q.summary for q in parts[1:]] if i == 0 and specs[0].minimal else None,
                              values_by=values)
             for i, p in enumerate(parts)]
    plan = _joined(parts, plans, lead.env.get_template(MINIMAL_TEMPLATE if specs[0].minimal else MULTI_TEMPLATE))
    state = parts[0].state

    def fallback(lost: list[str]) -> RenderedContext:
        raise Errors.CRITICAL_LOST(lost=lost)

    return lead._result(plan, state, parts[0].messages, lambda: render_many(parts, action, budget, language), fallback)


def _joined(parts: list[RenderPart], plans: list[_Plan], template: Template) -> _Plan:
    """The plans of each domain made one: fields, asks and alerts named by domain; the lead's
    turns, history and summary lines; one entity graph over every domain's values."""
    lead = plans[0]

    def qualified(domain: str, names: list[str]) -> list[str]:
        return [f"{domain}.{n}" for n in names]

    names, protected, optional, missing, alerts, fixed_alerts = [], [], [], [], [], []
    known: list[str] = []
    relations: list[str] = []
    for part, plan in zip(parts, plans):
        d, r, st = part.renderer.domain.name, part.renderer, part.state
        names += qualified(d, plan.names)
        protected += qualified(d, plan.protected)
        optional += qualified(d, plan.optional)
        missing += [{**m, "name": f"{d}.{m['name']}", "field": m["name"], "domain": d} for m in plan.missing]
        alerts += [{**a, "domain": d} for a in plan.alerts]
        fixed_alerts += [{**a, "domain": d} for a in plan.fixed_alerts]
        present = [n for n in plan.names if st.get(n) is not None and r._shown(n, st)]
        known += [v for n in plan.names if isinstance(v := st.get(n), str) and r.domain.fields[n].cls != "trace"]
        relations += r._relations(st, present)
    texts = [lead.seen[i]["content"] for i in sorted(lead.seen)]
    return replace(lead, template=template, names=names, protected=protected, optional=optional, missing=missing,
                   alerts=alerts, fixed_alerts=fixed_alerts,
                   entities=compact.entity_graph(texts, known, relations) if not lead.spec.minimal else [],
                   sections={p.renderer.domain.name: (p.renderer, p.state) for p in parts},
                   label=" ".join(p.renderer.domain.name for p in parts))
