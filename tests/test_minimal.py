"""`minimal: true` on an action (issue 10, context size: inject/minimal.py): each value once. A
turn the state absorbed is left out, a turn with a value the state did not take stays (until the
budget forces it out, then it is named), the latest user message stays verbatim, an offer stays
while it is open, and while the conversation is short the conversation itself is sent when it
counts fewer tokens. Every value stays explainable: fields by `why FIELD`, lines by `why mN`."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html import unescape
from pathlib import Path

import pytest

from context_editor import ContextEditor, add_together, render_together
from context_editor.domain.regexcheck import literal_values
from context_editor.echo import mask_echoes
from context_editor.inject import minimal
from context_editor.inject.compact import shown_lines
from context_editor.inject.render import lost_fields, state_lines
from context_editor.inject.tokens import count_tokens
from context_editor.memory.summary import lines_of

DOMAINS = Path(__file__).parent / "domains"
STAMP = "2024-05-01T19:00:00"
# (role, text): the first turn is absorbed whole; the third holds a date the state has no field
# for; the assistant's last turn offers another restaurant, which the user has not taken yet.
TALK = {
    "en": [("user", "A table for 4 at Sino in Boston at 7pm, please."),
           ("assistant", "Sure. Anything else I should know?"),
           ("user", "My sister flies in on June 12 and might join us."),
           ("assistant", "Noted. How about Rosie's instead? It is quieter."),
           ("user", "Let me think about it.")],
    "zh": [("user", "晚上7点在上海找家餐厅，订鼎泰丰。"),
           ("assistant", "好的。还有别的要求吗？"),
           ("user", "我妹妹6月12日到，可能一起来。"),
           ("assistant", "明白。换成海底捞怎么样？那里安静些。"),
           ("user", "我再想想。")]}
MORE = {"en": [("assistant", "Shall I book Sino in Boston for 4 at 7pm, then?"), ("user", "Yes, Sino for 4 at 7pm in Boston is right."),
               ("assistant", "Booked. Your table at Sino is confirmed for 4 people at 7pm."),
               ("user", "Great, thank you so much. We are all really looking forward to it, and we will be on time."),
               ("assistant", "You're welcome. Enjoy your dinner!"),
               ("user", "Thanks again, that is everything I needed from you today, have a lovely evening.")],
        "zh": [("assistant", "那就订上海的鼎泰丰，晚上7点，可以吗？"), ("user", "可以，就订上海的鼎泰丰，晚上7点。"),
               ("assistant", "订好了，上海鼎泰丰，晚上7点，已经确认。"),
               ("user", "太好了，谢谢你。我们都很期待，会准时到的，麻烦你了。"),
               ("assistant", "不客气，祝您用餐愉快！"),
               ("user", "再次感谢，今天需要的都办好了，祝你晚上愉快，辛苦你了，再见。")]}
OPEN = {"en": "My sister flies in on June 12 and might join us.", "zh": "我妹妹6月12日到，可能一起来。"}
OFFER = {"en": "How about Rosie's instead?", "zh": "换成海底捞怎么样？"}


def domain_file(tmp_path: Path, name: str, history_rounds: int = 4) -> Path:
    """tests/domains/<name>.yaml with a minimal `track` that loads `history_rounds` rounds before the latest."""
    text = (DOMAINS / f"{name}.yaml").read_text("utf-8")
    text = text.replace("    required: []\n", f"    required: []\n    minimal: true\n    recent_rounds: 1\n    history_rounds: {history_rounds}\n")
    path = tmp_path / str(history_rounds) / f"{name}.yaml"  # beside its sibling, for `carry:`
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, "utf-8")
    return path


def with_option(path: Path, key: str, value: str) -> Path:
    """A copy of a `domain_file` (in a folder of its own) whose minimal `track` sets `key: value`."""
    out = path.parent / f"{key}-{value}" / path.name
    out.parent.mkdir()
    out.write_text(path.read_text("utf-8").replace("    minimal: true\n", f"    minimal: true\n    {key}: {value}\n"), "utf-8")
    return out


def roles(editor: ContextEditor, session: str = "c"):
    """The session's message roles by index: they name the lines a minimal context leaves unnumbered."""
    return {m.index: m.role for m in editor.store.messages(session)}.get


def turns(xml: str, editor: ContextEditor, session: str = "c") -> dict[str, str]:
    return {line["src"]: line["text"] for line in shown_lines(ET.fromstring(xml), roles(editor, session))}


def state_form(editor: ContextEditor, monkeypatch):
    """The track render of session "c" as the state form alone (the conversation form not tried)."""
    with monkeypatch.context() as m:
        m.setattr(minimal, "whole", lambda messages: False)
        editor._rendered.clear()
        structured = editor.render("c", "track")
    editor._rendered.clear()
    return structured


@pytest.mark.parametrize("language", ["en", "zh"])
def test_each_value_once_and_what_the_state_did_not_take_stays(tmp_path, language):
    editor = ContextEditor(domain_file(tmp_path, "restaurant", history_rounds=1), "memory://")  # no longer loads it all
    for role, text in TALK[language]:
        editor.add("c", {"role": role, "content": text, "timestamp": STAMP})
    ctx = editor.render("c", "track")
    assert ctx.tokens == count_tokens(ctx.xml)
    root = ET.fromstring(ctx.xml)
    state = (root.find("state").text or "").strip().splitlines()
    name = "Sino" if language == "en" else "鼎泰丰"
    assert f"name: {name}" in state and "time: 19:00" in state  # no round: `why` tells it
    assert editor.why("c", "time")["provenance"]["round"] == 1
    shown = turns(ctx.xml, editor)
    assert "m0" not in shown  # every value of it is in the state
    assert shown["m2"] == OPEN[language]  # a date the state has no field for stays
    assert OFFER[language] in shown["m3"]  # the offer is still open
    assert shown["m4"] == TALK[language][4][1]  # the latest user message, verbatim
    assert "m1" not in shown  # the assistant's question holds no value and was answered long ago
    assert root.find("summary") is None and root.find("recent_turns") is None and "budget=" not in ctx.xml
    # Explainable: the field by `why FIELD`, a line by `why mN --action track`.
    assert editor.why("c", "name")["provenance"]["message_index"] == 0
    assert editor.why_message("c", "m2", action="track")["shown"]["as"] == "turns"
    assert editor.why_message("c", "m0", action="track")["shown"]["as"] is None
    assert lost_fields(ctx.xml, {"name": name}) == []  # the protected-field guard reads the lines
    _, nested = mask_echoes(f"pasted: {ctx.xml}")
    assert nested  # the echo guard knows the form


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_short_conversation_is_sent_as_the_user_said_it_unless_a_smaller_form_says_every_value(tmp_path, language, monkeypatch):
    """While the whole conversation is loaded: the user's turns verbatim (and of the assistant's
    only what holds a value no user turn says), unless the state form is smaller and says every
    value-like span of the conversation word for word (a value shown in its own form, "19:00" for
    "7pm", does not say the user's words)."""
    editor = ContextEditor(domain_file(tmp_path, "restaurant"), "memory://")  # loads the whole (short) conversation
    domain = editor.domain
    forms = []
    for role, text in TALK[language] + MORE[language]:
        editor.add("c", {"role": role, "content": text, "timestamp": STAMP})
        if role != "user":
            continue
        small = editor.render("c", "track")
        structured = state_form(editor, monkeypatch)  # the other candidate: the state form alone
        assert small.tokens == count_tokens(small.xml)
        messages = editor.store.messages("c")
        lines = [(m.role, line) for m in messages for line in lines_of(domain, m)]
        user_text = "\n".join(m.content for m in messages if m.role == "user").lower()
        words = [(role, line.text[a:b].lower()) for role, line in lines for a, b in minimal.words_of(line)]
        spans = {w for role, w in words if role == "user" or not minimal.says(user_text, w)}
        says_all = all(minimal.says(unescape(structured.xml).lower(), v) for v in spans)
        if small.xml == structured.xml:
            assert says_all
            forms.append("state")
            continue
        assert small.tokens < structured.tokens or not says_all
        said = {f"m{m.index}": m.content for m in messages if m.role == "user"}
        assert said.items() <= turns(small.xml, editor).items()  # every user turn verbatim
        fields = editor.state("c").fields
        shown = {int(src[1:]) for src in turns(small.xml, editor)}
        for name in ("name", "city", "time"):  # only the values no shown turn said
            assert (f"{name}: " in small.xml) == (fields[name].provenance.message_index not in shown)
        forms.append("conversation")
    assert forms[0] == "conversation"  # one turn: the turn alone is smaller than its state and the turn


def test_the_budget_drops_an_open_line_whole_and_names_it(tmp_path):
    editor = ContextEditor(domain_file(tmp_path, "restaurant", history_rounds=0), "memory://")
    for role, text in TALK["en"]:
        editor.add("c", {"role": role, "content": text, "timestamp": STAMP})
    full = editor.render("c", "track")
    tight = editor.render("c", "track", budget=full.tokens - 5)
    assert tight.tokens <= full.tokens - 5 and tight.tokens == count_tokens(tight.xml)
    cut = ET.fromstring(tight.xml).find("truncated_context")
    assert cut is not None and cut.get("budget") == str(full.tokens - 5)
    gone = set(cut.get("lines", "").split())
    assert gone and not gone & set(turns(tight.xml, editor))  # named, and not shown
    assert "m4" in turns(tight.xml, editor)  # the latest user message outlives them


def test_one_envelope_of_several_minimal_domains(tmp_path):
    trip = [(ContextEditor(domain_file(tmp_path, name, history_rounds=0), "memory://"), "t") for name in ("restaurant", "hotel")]
    add_together(trip, {"role": "user", "content": "A table for 4 at Sino in Boston at 7pm, please.", "domains": ["restaurant"],
                        "timestamp": STAMP})
    add_together(trip, {"role": "assistant", "content": "Done. Anything else?", "timestamp": STAMP})
    add_together(trip, {"role": "user", "content": "And a room at the Hilton, under $200 a night.", "domains": ["hotel"],
                        "timestamp": STAMP})
    ctx = render_together(trip, "track")
    root = ET.fromstring(ctx.xml)
    lines = set(state_lines(root))
    assert ("restaurant", "name", "Sino") in lines and ("hotel", "name", "Hilton") in lines
    assert ("hotel", "city", "Boston") in lines  # carried, and said once per domain
    assert "# restaurant\nname: Sino\n" in ctx.xml and len(list(root.iter("state"))) == 1
    assert root.get("domain") is None  # each group names its domain
    assert list(turns(ctx.xml, trip[0][0], "t")) == ["m2"]  # the rest is in the states
    assert ctx.tokens == count_tokens(ctx.xml)


# The conversation form keeps of the assistant's turns only the clauses with a value no user turn
# says: the question and the pleasantry go, the offer the user took stays (its values word for word).
SAID = {"en": [("user", "A table for 4 in Boston, please."),
               ("assistant", "Great. Which day works for you? Sino has a table at 8:30pm on Friday, with a lovely view."),
               ("user", "Sounds good.")],
        "zh": [("user", "我想在上海订4位的位子。"),
               ("assistant", "好的，您想哪天去？抱歉，鼎泰丰订满了，海底捞周五晚上8点有位子，环境不错。"),
               ("user", "好的。")]}
KEPT = {"en": "Sino has a table at 8:30pm on Friday", "zh": "鼎泰丰订满了，海底捞周五晚上8点有位子"}


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_conversation_form_keeps_of_the_assistant_only_the_clauses_with_values_the_user_did_not_say(tmp_path, language,
                                                                                                    monkeypatch):
    editor = ContextEditor(domain_file(tmp_path, "restaurant"), "memory://")
    for role, text in SAID[language]:
        editor.add("c", {"role": role, "content": text, "timestamp": STAMP})
    ctx = editor.render("c", "track")
    assert ctx.tokens == count_tokens(ctx.xml)
    shown = turns(ctx.xml, editor)
    assert shown["m0"] == SAID[language][0][1] and shown["m2"] == SAID[language][2][1]  # the user's words verbatim
    assert shown["m1"] == KEPT[language]  # one line for the message, its value clauses only
    assert [line["src"] for line in shown_lines(ET.fromstring(ctx.xml), roles(editor))].count("m1") == 1
    # `why` finds the line without its number from the roles of the messages after the line
    # before it, read a few at a time: not the whole session.
    whole = []
    messages = editor.store.messages
    monkeypatch.setattr(editor.store, "messages", lambda s, since_round=None: whole.append(since_round is None) or messages(s, since_round))
    assert editor.why_message("c", "m1", action="track")["shown"]["line"] == KEPT[language]
    assert not any(whole)


# A request the user restated: the older line held a value the state read and moved on from.
RESTATED = {"en": [("user", "A table for 4 at Sino in Boston at 7pm, please."), ("assistant", "Sure. Anything else?"),
                   ("user", "Actually, make it 8pm."), ("assistant", "Noted. Anything else?"),
                   ("user", "No, thank you.")],
            "zh": [("user", "晚上7点在上海找家餐厅，订鼎泰丰。"), ("assistant", "好的。还有别的吗？"),
                   ("user", "改成晚上8点吧。"), ("assistant", "好的，记下了。还有别的吗？"), ("user", "没有了，谢谢。")]}


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_line_whose_value_the_user_restated_is_absorbed_by_the_newer_value(tmp_path, language):
    editor = ContextEditor(domain_file(tmp_path, "restaurant", history_rounds=1), "memory://")  # not the whole conversation
    for role, text in RESTATED[language]:
        editor.add("c", {"role": role, "content": text, "timestamp": STAMP})
    time = editor.state("c").fields["time"]
    assert time.value == "20:00" and time.provenance.message_index == 2
    assert [h.value for h in time.history if h.status == "accepted"] == ["19:00", "20:00"]
    assert minimal.moved_on(time)[0].message_index == 0  # where the replaced value was read
    ctx = editor.render("c", "track")
    assert "time: 20:00\n" in ctx.xml
    assert "m0" not in turns(ctx.xml, editor)  # its 7pm was read, then replaced: nothing of it is open
    assert editor.why_message("c", "m0", action="track")["shown"]["as"] is None
    assert ctx.tokens == count_tokens(ctx.xml)


# An older user turn with a value the state has no field for is kept as its clauses with the value.
DIGEST = {"en": [("user", "A table for 4 at Sino in Boston at 7pm, please."), ("assistant", "Sure. Anything else?"),
                 ("user", "Well, my sister flies in on June 12, so she might join us."), ("assistant", "Noted."),
                 ("user", "That is all."), ("assistant", "Great."), ("user", "Thanks a lot.")],
          "zh": [("user", "晚上7点在上海找家餐厅，订鼎泰丰，4位。"), ("assistant", "好的。还有别的吗？"),
                 ("user", "对了，我妹妹6月12日到，她可能一起来。"), ("assistant", "好的，记下了。"),
                 ("user", "就这些。"), ("assistant", "好的。"), ("user", "谢谢。")]}
DIGESTED = {"en": "my sister flies in on June 12", "zh": "我妹妹6月12日到"}


@pytest.mark.parametrize("language", ["en", "zh"])
def test_an_older_open_line_is_reduced_to_its_clauses_with_open_values(tmp_path, language):
    editor = ContextEditor(domain_file(tmp_path, "restaurant", history_rounds=1), "memory://")
    for role, text in DIGEST[language][:3]:
        editor.add("c", {"role": role, "content": text, "timestamp": STAMP})
    for role, text in DIGEST[language][3:]:
        editor.add("c", {"role": role, "content": text, "timestamp": STAMP})
    ctx = editor.render("c", "track")
    shown = turns(ctx.xml, editor)
    assert shown["m2"] == DIGESTED[language]  # older than the loaded window: a digest of it
    assert editor.why_message("c", "m2", action="track")["shown"]["line"] == DIGESTED[language]
    assert ctx.tokens == count_tokens(ctx.xml)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_line_says_its_number_only_where_the_order_does_not_tell_it(tmp_path, language):
    """`line_numbers: gaps` (the default): "user: …" is the user's next turn after the line
    before, as in a transcript; "mN user: …" only where a turn of that role is skipped. `why`
    reads every line's source back from the session's message roles; `line_numbers: all`
    numbers every line, two tokens each."""
    every = domain_file(tmp_path, "restaurant")
    numbered = with_option(every, "line_numbers", "all")
    editor, plain = ContextEditor(every, "memory://"), ContextEditor(numbered, "memory://")
    forms = []
    for role, text in TALK[language] + MORE[language]:
        for e in (editor, plain):
            e.add("c", {"role": role, "content": text, "timestamp": STAMP})
        if role != "user":
            continue
        ctx, all_numbered = editor.render("c", "track"), plain.render("c", "track")
        assert ctx.tokens == count_tokens(ctx.xml) and all_numbered.tokens == count_tokens(all_numbered.xml)
        messages = editor.store.messages("c")
        lines = shown_lines(ET.fromstring(ctx.xml), roles(editor))
        # Read back, each line names the message it was taken from, in the order of the
        # conversation, and says its number exactly where the message before it of its role is not shown.
        last = -1
        for line in lines:
            index = int(line["src"][1:])
            assert line["text"] in messages[index].content and line["role"] == messages[index].role
            skipped = any(m.role == line["role"] for m in messages[last + 1:index])
            assert (f"\nm{index} {line['role']}: " in ctx.xml) == skipped
            assert editor.why_message("c", f"m{index}", action="track")["shown"]["line"] == line["text"]
            last = index
        bare = sum(1 for line in lines if f"\n{line['src']} " not in ctx.xml)
        if lines == shown_lines(ET.fromstring(all_numbered.xml)):  # the same lines, every one numbered
            assert all_numbered.tokens == ctx.tokens + 2 * bare
            forms.append("same")
        else:  # numbered, the conversation lost to the state form: each candidate is cheaper unnumbered
            assert ctx.tokens < all_numbered.tokens
            forms.append("other")
        assert bare or not lines
    assert forms[0] == "same"
    assert any(f"\nm{i} user: " in ctx.xml for i in range(2, 12))  # the last render skips absorbed user turns


# A statement about the booking that no rule reads (no field holds a seat's place), and no
# pleasantry: it shares words with the action's description.
SEATING = {"en": "Great, thank you so much. Please keep us a quiet table by the window, far from the kitchen and the door, "
                 "because the people dining with us are elderly and hard of hearing, and they will want to talk.",
           "zh": "太好了，谢谢你。我们用餐想要一个安静的位子，最好靠窗，同桌的都是老人家。"}
DESCRIPTION = '"Track a table booking: the restaurant, its city, the people dining and the time. 预订餐厅的位子：餐厅、城市、用餐人数和时间。"'


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_state_form_must_be_smaller_by_more_than_the_statements_no_value_was_read_from(tmp_path, language, monkeypatch):
    """`conversation_form: smaller` (the default): while the whole conversation is loaded, the
    state form is sent only when it is smaller than the conversation as the user said it by more
    than the user's statements it leaves out that no value was read from, that hold no value-like
    span and that are about the action (`minimal.unread_user`: "a quiet table by the window",
    words no rule reads). Here it is not: the conversation is sent, the statement with it."""
    path = with_option(domain_file(tmp_path, "restaurant", history_rounds=5), "description", DESCRIPTION)  # the whole conversation
    editor = ContextEditor(path, "memory://")
    talk = TALK[language] + MORE[language]
    talk = [*talk[:8], ("user", SEATING[language]), *talk[9:]]
    for role, text in talk:
        editor.add("c", {"role": role, "content": text, "timestamp": STAMP})
    ctx = editor.render("c", "track")
    shown = turns(ctx.xml, editor)
    assert {f"m{i}": text for i, (role, text) in enumerate(talk) if role == "user"}.items() <= shown.items()
    assert shown["m8"] == SEATING[language] and ctx.tokens == count_tokens(ctx.xml)
    assert editor.why_message("c", "m8", action="track")["shown"]["line"] == SEATING[language]
    structured = state_form(editor, monkeypatch)  # the other candidate: smaller, without the statement
    window = "window" if language == "en" else "靠窗"
    assert window not in structured.xml and "<state>" in structured.xml and structured.tokens < ctx.tokens


# A request a value was read from (another restaurant) that says a value no rule read: the
# seating rule reads "window" as a value only before "table" or "seat".
PARTLY_READ = {"en": "Actually, make it Rosie's instead, and please keep the people dining with us a quiet table by the window.",
               "zh": "还是换成海底捞吧，我们用餐想要一个安静的位子，最好靠窗。"}
SEATING_FIELD = """  seating:
    type: text
    extract: [{pattern: '(?P<value>window|靠窗)\\s*的?(?:table|seat|位子|座位)', parse: text}]
"""


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_partly_read_sentence_keeps_the_value_no_rule_read_in_it(tmp_path, language, monkeypatch):
    """A user sentence a value was read from (`name`) may hold another value a rule of the domain
    reads word for word, where that rule did not fire ("by the window", "最好靠窗": the seating
    rule wants "window table", "靠窗的位子"). The state form shows the value read and leaves the
    sentence out, so it is sent only when it is smaller by more than the sentence
    (`minimal.unread_user`); here it is not, and the conversation is sent with the sentence."""
    path = domain_file(tmp_path, "restaurant", history_rounds=5)  # the whole conversation
    path.write_text(path.read_text("utf-8").replace("actions:\n", SEATING_FIELD + "actions:\n"), "utf-8")
    editor = ContextEditor(path, "memory://")
    talk = TALK[language] + MORE[language]
    talk = [*talk[:8], ("user", PARTLY_READ[language]), *talk[9:]]
    for role, text in talk:
        editor.add("c", {"role": role, "content": text, "timestamp": STAMP})
    assert editor.why("c", "name")["provenance"]["message_index"] == 8 and editor.state("c").get("seating") is None
    ctx = editor.render("c", "track")
    window = "window" if language == "en" else "靠窗"
    assert window in unescape(ctx.xml) and ctx.tokens == count_tokens(ctx.xml)
    structured = state_form(editor, monkeypatch)  # the other candidate: smaller, without the value
    name = "Rosie's" if language == "en" else "海底捞"
    assert window not in unescape(structured.xml) and f"name: {name}" in unescape(structured.xml) and structured.tokens < ctx.tokens


@pytest.mark.parametrize("pattern, values", [
    (r"(?:门票|票价)\s*(?P<value>\d+\s*元以[上下]|免费)|(?P<value2>免费)的?(?:景点|景区)", {"免费"}),
    (r"(?i)\b(?P<value>Pop|rock|r&b)\s+(?:music|songs?)", {"pop", "rock", "r&b"}),
    (r"(?P<value>\d+)\s*(?:people|人)", set()),  # a shape, no word
    (r"(?P<value>(?:window|aisle) seat)", set()),  # a choice inside a value: not spelled out
    (r"party of (two|three)", set()),  # not a value group
])
def test_the_words_a_rule_reads_as_values(pattern, values):
    """`regexcheck.literal_values`: what a rule's value groups read word for word (`value_words`)."""
    compiled = re.compile(pattern)
    groups = tuple(sorted(g for g in compiled.groupindex if g.startswith("value"))) or (0,)
    assert literal_values(compiled, groups) == values


# Every value restated: the state form holds the conversation's values in fewer tokens, and the
# user's statements all hold one (nothing is left unread).
RESTATED_ALL = {"en": [("user", "Hello there, I would really like to book a nice table at Sino in Boston for 4 people, please."),
                       ("assistant", "Sure. Anything else?"),
                       ("user", "Sorry, to be clear: the table is for 4 people, at Sino, in Boston, please."),
                       ("assistant", "Done."), ("user", "Thanks.")],
                "zh": [("user", "你好，麻烦你帮我在上海订一家餐厅，就订鼎泰丰吧，谢谢你了。"), ("assistant", "好的。还有别的吗？"),
                       ("user", "不好意思，再确认一下，还是在上海订鼎泰丰，没错吧。"), ("assistant", "好的。"), ("user", "谢谢。")]}


@pytest.mark.parametrize("language", ["en", "zh"])
def test_conversation_form_always_sends_the_conversation_whenever_it_fits(tmp_path, language):
    """`conversation_form: always`: while the whole conversation is loaded it is sent as the user
    said it whenever it fits the budget, though the state form (which the default, `smaller`,
    sends here: smaller, every value-like span said, no statement left unread) is smaller."""
    smaller = domain_file(tmp_path, "restaurant", history_rounds=5)  # the whole conversation is loaded
    always = with_option(smaller, "conversation_form", "always")
    talk = RESTATED_ALL[language]
    editors = {"smaller": ContextEditor(smaller, "memory://"), "always": ContextEditor(always, "memory://")}
    for role, text in talk:
        for e in editors.values():
            e.add("c", {"role": role, "content": text, "timestamp": STAMP})
    ctx = {k: e.render("c", "track") for k, e in editors.items()}
    assert "<state>" in ctx["smaller"].xml and turns(ctx["smaller"].xml, editors["smaller"]) == {"m4": talk[4][1]}
    shown = turns(ctx["always"].xml, editors["always"])
    assert {f"m{i}": text for i, (role, text) in enumerate(talk) if role == "user"}.items() <= shown.items()
    assert "<state>" not in ctx["always"].xml  # every value's turn is shown
    assert editors["always"].why_message("c", "m2", action="track")["shown"]["line"] == talk[2][1]
    assert ctx["always"].tokens == count_tokens(ctx["always"].xml) and ctx["smaller"].tokens < ctx["always"].tokens
    # Not whole within the budget: the state form, as before (the budget is exact either way).
    tight = editors["always"].render("c", "track", budget=ctx["smaller"].tokens)
    assert tight.xml == ctx["smaller"].xml


# A user line of the loaded window, not the latest: the state took one of its values, not the other.
CLAUSES = {"en": [("user", "A table at Sino in Boston, please."), ("assistant", "Sure."), ("user", "Thank you."),
                  ("assistant", "Anything else?"), ("user", "Make it 7pm, and my sister flies in on June 12."),
                  ("assistant", "Noted."), ("user", "That is all.")],
           "zh": [("user", "在上海订鼎泰丰。"), ("assistant", "好的。"), ("user", "谢谢。"), ("assistant", "还有别的吗？"),
                  ("user", "改成晚上7点吧，我妹妹6月12日到。"), ("assistant", "记下了。"), ("user", "就这些。")]}
CLAUSE = {"en": "and my sister flies in on June 12.", "zh": "我妹妹6月12日到。"}


@pytest.mark.parametrize("language", ["en", "zh"])
def test_user_clauses_all_keeps_of_a_user_line_only_the_clauses_the_state_did_not_take(tmp_path, language):
    """`user_clauses: all` (the importers' `track`): a user line of the loaded window that is not
    shown as a turn keeps only its clauses with a value the state did not take (the time is said
    by the state line); `older` (the default) does so only for lines older than the loaded window."""
    older = domain_file(tmp_path, "restaurant", history_rounds=1)  # rounds 2-4 of 4 loaded: not whole
    every = with_option(older, "user_clauses", "all")
    editors = {"older": ContextEditor(older, "memory://"), "all": ContextEditor(every, "memory://")}
    for role, text in CLAUSES[language]:
        for e in editors.values():
            e.add("c", {"role": role, "content": text, "timestamp": STAMP})
    ctx = {k: e.render("c", "track") for k, e in editors.items()}
    for k, e in editors.items():
        assert "time: 19:00\n" in ctx[k].xml and ctx[k].tokens == count_tokens(ctx[k].xml)
        assert e.why("c", "time")["provenance"]["round"] == 3
    assert turns(ctx["older"].xml, editors["older"])["m4"] == CLAUSES[language][4][1]  # whole
    assert turns(ctx["all"].xml, editors["all"])["m4"] == CLAUSE[language]  # the clause the state did not take
    assert editors["all"].why_message("c", "m4", action="track")["shown"]["line"] == CLAUSE[language]
    assert ctx["all"].tokens < ctx["older"].tokens


# An offer the user took: the state holds the name it read ("Rosie's", "海底捞"), the assistant said
# more of it ("Rosie's by the harbour", "海底捞外滩店": a longer name, a branch).
TAKEN = {"en": [("user", "A table for 4 in Boston at 7pm, please."),
                ("assistant", "Sure. How about Rosie's by the harbour, a quiet place?"), ("user", "Sure, that works.")],
         "zh": [("user", "晚上7点在上海找家餐厅，4位。"), ("assistant", "好的。推荐海底捞外滩店，环境安静，可以吗？"), ("user", "可以。")]}
TAKEN_CLAUSE = {"en": "How about Rosie's by the harbour", "zh": "推荐海底捞外滩店"}


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_conversation_form_shows_the_clause_a_value_was_read_from_in_place_of_its_state_line(tmp_path, language):
    """The conversation as the user said it shows the assistant's clause a present value was read
    from, and not the value's state line: the words hold all that was said of it (SGD's "Alchemy
    John MD" was read as `John MD`), once; the value stays explainable by `why`."""
    editor = ContextEditor(domain_file(tmp_path, "restaurant"), "memory://")  # the whole conversation is loaded
    for role, text in TAKEN[language]:
        editor.add("c", {"role": role, "content": text, "timestamp": STAMP})
    name = editor.state("c").fields["name"]
    assert name.value == ("Rosie's" if language == "en" else "海底捞") and name.provenance.message_index == 1
    ctx = editor.render("c", "track")
    assert ctx.tokens == count_tokens(ctx.xml)
    shown = turns(ctx.xml, editor)
    assert shown["m1"] == TAKEN_CLAUSE[language]  # the clause with the name, not the pleasantry after it
    assert "name:" not in ctx.xml and "<state>" not in ctx.xml  # every value is said by a shown line
    assert editor.why_message("c", "m1", action="track")["shown"]["line"] == TAKEN_CLAUSE[language]
    assert editor.why("c", "name")["provenance"]["message_index"] == 1


# The assistant named a place the state reads only part of: the enum knows "Sino", the name is
# "Golden Sino" (SGD train: "Alchemy John MD" read as `John MD`).
PART = {"en": [("user", "Hello there, I would really like to book a nice table in Boston for 4 people, please."),
               ("assistant", "Sure. Golden Sino has a quiet table, shall I book it?"), ("user", "Yes, book it."),
               ("assistant", "Done."), ("user", "Thanks.")],
        "zh": [("user", "你好，麻烦你帮我在上海找家餐厅，谢谢你了。"), ("assistant", "好的。为您推荐Golden Sino，环境不错，可以吗？"),
               ("user", "可以。"), ("assistant", "好的。"), ("user", "谢谢。")]}


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_value_read_from_part_of_a_name_keeps_the_whole_name(tmp_path, language, monkeypatch):
    """A value read from part of a name (the capitalised words around its span: `minimal.named`)
    leaves the rest of the name a span the state form does not say: the conversation form is
    sent, with the clause that holds the whole name in place of the value's state line."""
    editor = ContextEditor(domain_file(tmp_path, "restaurant", history_rounds=5), "memory://")  # the whole conversation
    for role, text in PART[language]:
        editor.add("c", {"role": role, "content": text, "timestamp": STAMP})
    name = editor.state("c").fields["name"]
    assert name.value == "Sino" and name.provenance.message_index == 1
    ctx = editor.render("c", "track")
    assert "Golden Sino" in turns(ctx.xml, editor)["m1"] and "name:" not in ctx.xml
    assert ctx.tokens == count_tokens(ctx.xml)
    structured = state_form(editor, monkeypatch)  # the other candidate: smaller, "Sino" alone
    assert "name: Sino" in structured.xml and "Golden" not in structured.xml and structured.tokens < ctx.tokens


# The assistant names what it offers in words with no value-like span (lowercase, no number: SGD's
# "The giants vs dodgers game at oracle park."), and the user's reply names nothing.
BARE = {"en": [("user", "A table for 4 in Boston at 7pm, please."),
               ("assistant", "There is the little noodle bar by the old market."), ("user", "That would be great.")],
        "zh": [("user", "晚上7点在上海找家餐厅，4位。"), ("assistant", "巷子口那家老面馆不错，离地铁很近。"), ("user", "那就这家吧。")]}
NEXT = {"en": [("assistant", "Done. Anything else?"), ("user", "Thanks, that is all.")],
        "zh": [("assistant", "订好了。还有别的吗？"), ("user", "谢谢，没有了。")]}


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_message_a_bare_reply_answers_stays_whole_while_it_is_pending(tmp_path, language):
    """A reply with no value-like span from which the state read nothing ("That would be great.",
    `minimal.bare`) takes or turns down what the message before it named: that message is shown
    whole while it is the one replied to, in either form, whatever its words (no span marks a
    lowercase name). A round later it goes: what the user took is no longer pending."""
    editor = ContextEditor(domain_file(tmp_path, "restaurant"), "memory://")  # the whole conversation is loaded
    for role, text in BARE[language]:
        editor.add("c", {"role": role, "content": text, "timestamp": STAMP})
    ctx = editor.render("c", "track")
    shown = turns(ctx.xml, editor)
    assert shown["m1"] == BARE[language][1][1] and shown["m2"] == BARE[language][2][1]
    assert editor.why_message("c", "m1", action="track")["shown"]["line"] == BARE[language][1][1]
    assert ctx.tokens == count_tokens(ctx.xml)
    for role, text in NEXT[language]:
        editor.add("c", {"role": role, "content": text, "timestamp": STAMP})
    assert "m1" not in turns(editor.render("c", "track").xml, editor)


# The user names a place whole, first in a sentence, where a capital says nothing; the state
# reads part of it: the enum knows "Sino" (SGD train: `Australia` of "Sydney, Australia.";
# `Access Dental` of "Access Dental - Santa Rosa", `Bayhill Dental Care` of "Bayhill Dental Care /
# Dr. Diaz F Luisa": a branch after a dash, a person after a slash, a title's full stop; `Paradise
# Sushi` of "Paradise Sushi & Grill").
WHOLE = {"en-name": "Golden Sino", "en-comma": "Sydney, Sino", "zh-name": "Golden Sino", "zh-comma": "Sydney, Sino",
         "en-dash": "Sino - Midtown", "en-slash": "Sino / Dr. Lee", "zh-dash": "Sino - Midtown",
         "zh-slash": "Sino / Dr. Lee", "en-ampersand": "Sino & Grill", "zh-ampersand": "Sino & Grill"}


def restated(case: str) -> list[tuple[str, str]]:
    """Every value said twice, with pleasantries: the state form is the smaller one."""
    name = WHOLE[case]
    if case.startswith("en"):
        return [("user", "Hello there, I would really like to book a nice table in Boston for 4 people, please."),
                ("assistant", "Sure. Which one?"),
                ("user", f"{name} is the one. Sorry, to be clear: the table is for 4 people, in Boston, please."),
                ("assistant", "Done."), ("user", "Thanks.")]
    return [("user", "你好，麻烦你帮我在上海订一家餐厅，谢谢你了。"), ("assistant", "好的。哪一家？"),
            ("user", f"{name}那家。不好意思，再确认一下，是在上海订，没错吧。"), ("assistant", "好的。"), ("user", "谢谢。")]


@pytest.mark.parametrize("case", list(WHOLE))
def test_a_value_read_from_part_of_a_name_the_user_said_keeps_the_whole_name(tmp_path, case, monkeypatch):
    """A value read from part of a name in the user's words (`minimal.named`: the capitalised Latin
    words around its span, one space or a comma, dash, slash or ampersand and a space apart) leaves the whole name a span
    the state form must say (`minimal.spans_of`). It says `Sino`, `Boston`: the conversation is
    sent, though the state form is smaller."""
    editor = ContextEditor(domain_file(tmp_path, "restaurant", history_rounds=5), "memory://")  # the whole conversation
    talk = restated(case)
    for role, text in talk:
        editor.add("c", {"role": role, "content": text, "timestamp": STAMP})
    fields = editor.state("c").fields
    whole = WHOLE[case]
    assert fields["name"].value == "Sino" and fields["name"].provenance.message_index == 2
    ctx = editor.render("c", "track")
    assert ctx.tokens == count_tokens(ctx.xml)
    shown = turns(ctx.xml, editor)
    assert whole in shown["m2"]
    with monkeypatch.context() as m:  # without the whole name: the smaller form, the part alone
        m.setattr(minimal, "named", lambda text, a, b: (a, b))
        editor._rendered.clear()
        part = editor.render("c", "track")
    editor._rendered.clear()
    assert whole not in part.xml and "<state>" in part.xml and part.tokens < ctx.tokens


# The assistant offers a time in the morning, then one in the evening at the same clock time
# (SGD train: "leaving at 8:05 am" and later "arrives at 8:05 pm"). No rule reads either.
MERIDIEM = [("user", "A table for 4 at Sino in Boston, please."), ("assistant", "Sino has a free table at 8:05 am."),
            ("user", "Hmm, is there anything in the evening?"), ("assistant", "Only one, at 8:05 pm."),
            ("user", "Let me think about it.")]


def test_a_time_is_said_with_its_half_of_the_day(tmp_path):
    """`minimal.words_of`: a time's value-like span takes the half of the day written after it, so
    "8:05 am" is not said by a later "8:05 pm", and the sentence that offered it stays. Latin
    script only: Chinese writes the half of the day before the time ("上午8点05分"), a word of
    its own."""
    editor = ContextEditor(domain_file(tmp_path, "restaurant", history_rounds=5), "memory://")  # the whole conversation
    for role, text in MERIDIEM:
        editor.add("c", {"role": role, "content": text, "timestamp": STAMP})
    assert editor.state("c").get("time") is None
    ctx = editor.render("c", "track")
    assert "8:05 am" in ctx.xml and "8:05 pm" in ctx.xml and ctx.tokens == count_tokens(ctx.xml)
    line = lines_of(editor.domain, editor.store.messages("c")[1])[0]
    assert [line.text[a:b] for a, b in minimal.words_of(line)] == ["Sino", "8:05 am"]


# A name in lowercase words, after a word names often follow ("in half moon bay", "a 1 star hotel
# called budget suites of america": SGD train), that no rule reads: no capital or number
# marks it, and the enum knows no such restaurant. The user's (`spans_of`) and the assistant's
# (`said_lines`).
CUED = {"en-user": [("user", "Hello there, I would really like to book a nice table in Boston for 4 people, please."),
                    ("assistant", "Sure. Which one?"),
                    ("user", "The one called little noodle bar. Sorry, to be clear: the table is for 4 people, in Boston, please."),
                    ("assistant", "Done."), ("user", "Thanks.")],
        "zh-user": [("user", "你好，麻烦你帮我在上海订一家餐厅，谢谢你了。"), ("assistant", "好的。哪一家？"),
                    ("user", "就是叫巷口面馆的那家。不好意思，再确认一下，是在上海订，没错吧。"), ("assistant", "好的。"), ("user", "谢谢。")],
        "en-assistant": [("user", "Hello there, I would really like to book a nice table in Boston for 4 people, please."),
                         ("assistant", "Sure. There is a quiet place called little noodle bar."),
                         ("user", "Sounds good. Sorry, to be clear: the table is for 4 people, in Boston, please."),
                         ("assistant", "Done."), ("user", "Thanks.")],
        "zh-assistant": [("user", "你好，麻烦你帮我在上海订一家餐厅，谢谢你了。"), ("assistant", "好的。有一家叫巷口面馆的店很安静。"),
                         ("user", "听起来不错。不好意思，再确认一下，是在上海订，没错吧。"), ("assistant", "好的。"), ("user", "谢谢。")]}
CUED_NAME = {"en": "little noodle bar", "zh": "巷口面馆"}


@pytest.mark.parametrize("case", list(CUED))
def test_a_lowercase_name_after_a_naming_word_is_a_span_the_state_form_must_say(tmp_path, case, monkeypatch):
    """Lowercase words right after a word names often follow (`memory/name_after`, `minimal.cued`),
    from which no value was read, are a span of the conversation the state form must say: it
    does not, so the conversation is sent, though the state form is smaller."""
    editor = ContextEditor(domain_file(tmp_path, "restaurant", history_rounds=5), "memory://")  # the whole conversation
    for role, text in CUED[case]:
        editor.add("c", {"role": role, "content": text, "timestamp": STAMP})
    name = CUED_NAME[case[:2]]
    assert name not in str(editor.state("c").fields)  # no rule read it
    ctx = editor.render("c", "track")
    assert ctx.tokens == count_tokens(ctx.xml)
    assert name in turns(ctx.xml, editor)["m2" if case.endswith("user") else "m1"]
    with monkeypatch.context() as m:  # without it: the smaller form, and the name is gone
        m.setattr(minimal, "cued", lambda line: [])
        editor._rendered.clear()
        without = editor.render("c", "track")
    editor._rendered.clear()
    assert name not in without.xml and "<state>" in without.xml and without.tokens < ctx.tokens


# The user answers the assistant's question with words no rule reads (SGD train: "What type of
# film?" "A scary one."): no value-like span, and the enum knows no such restaurant.
ANSWER = {"en": [("user", "Hello, I need a table for 4 in Boston at 7pm, please."),
                 ("assistant", "Sure. Which restaurant would you like?"), ("user", "The quiet one by the river."),
                 ("assistant", "Let me see what I can find for you."), ("user", "Thanks, take your time.")],
          "zh": [("user", "你好，晚上7点在上海找家餐厅，4位。"), ("assistant", "好的。您想去哪家餐厅？"), ("user", "河边那家安静的。"),
                 ("assistant", "我帮您看看有哪些。"), ("user", "好的，谢谢你。")]}


@pytest.mark.parametrize("language", ["en", "zh"])
def test_an_answer_no_rule_read_stays_with_its_question(tmp_path, language, monkeypatch):
    """A user's answer to a question that holds no value-like span, from which no state read a
    value (`minimal.answered`), says what the user wants, and the question says what of: both stay
    (as facts) once the answer is no longer the latest turn, in the state form too. Without the rule
    the state form keeps neither."""
    editor = ContextEditor(domain_file(tmp_path, "restaurant"), "memory://")
    talk = ANSWER[language]
    for role, text in talk:
        editor.add("c", {"role": role, "content": text, "timestamp": STAMP})
    assert editor.state("c").get("name") is None and editor.state("c").get("city") is not None
    question = talk[1][1].split(" ", 1)[1] if language == "en" else talk[1][1][3:]
    for ctx in (editor.render("c", "track"), state_form(editor, monkeypatch)):
        assert ctx.tokens == count_tokens(ctx.xml)
        shown = turns(ctx.xml, editor)
        assert shown["m1"] == question and shown["m2"] == talk[2][1], ctx.xml
        assert editor.why_message("c", "m2", action="track")["shown"]["line"] == talk[2][1]
        assert editor.why_message("c", "m1", action="track")["shown"]["line"] == question
    with monkeypatch.context() as m:  # without the rule: the state form has neither
        m.setattr(minimal, "answered", lambda *a: [])
        bare = state_form(editor, monkeypatch)
    assert talk[2][1] not in bare.xml and question not in bare.xml and "<state>" in bare.xml


# A cab "there" after an attraction search, in the test domains: a hotel "near there" after the
# restaurant's offer. The hotel takes the restaurant's city (`carry: {city: [restaurant.city]}`);
# the place the user means is the one the assistant named in a message that speaks for the restaurant.
NEAR = {"en": [("user", "I'd like a table in Boston tonight.", ["restaurant"]),
               ("assistant", "How about the grill at 20 Harbor Street? It has a table at 8pm.", ["restaurant"]),
               ("user", "Good, please book it.", ["restaurant"]), ("assistant", "Done. Anything else?", ["restaurant"]),
               ("user", "I also need a hotel room near there.", ["hotel"])],
        "zh": [("user", "我想在上海找家餐厅。", ["restaurant"]),
               ("assistant", "推荐您去南京路100号的小馆，晚上8点有位子。", ["restaurant"]),
               ("user", "好的，就订这家。", ["restaurant"]), ("assistant", "订好了。还需要什么？", ["restaurant"]),
               ("user", "再帮我订一间附近的酒店。", ["hotel"])]}
PLACE = {"en": "20 Harbor Street", "zh": "南京路100号"}


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_messages_of_a_domain_a_value_was_carried_from_speak_for_this_context(tmp_path, language, monkeypatch):
    """A message the app said speaks for another domain gives this context no lines
    (`minimal.foreign`), unless a value this context holds was carried from that domain
    (`minimal.carried`): the hotel's city came from the restaurant's, and "near there" means the
    place the assistant named for the restaurant. Without the rule the hotel's context loses it."""
    trip = [(ContextEditor(domain_file(tmp_path, name), "memory://"), "t") for name in ("restaurant", "hotel")]
    for role, text, domains in NEAR[language]:
        add_together(trip, {"role": role, "content": text, "domains": domains, "timestamp": STAMP})
    hotel = trip[1][0]
    city = hotel.state("t").fields["city"]
    assert city.source == "carry" and minimal.carried([(hotel.domain.carry, hotel.state("t"))]) == {"restaurant"}
    ctx = render_together([trip[1]], "track")
    assert PLACE[language] in ctx.xml and ctx.tokens == count_tokens(ctx.xml)
    assert hotel.why_message("t", "m1", action="track")["shown"] is not None
    # The carried city was read from the first turn (`minimal.read_at`: the source's message, the
    # same in every domain's session): the whole name around it counts there (`named`), and the
    # conversation form shows no state line repeating it (`Renderer._said`).
    assert city.provenance.message_index == -1 and minimal.read_at(city) == 0 and 0 in minimal.taken([hotel.state("t")])
    with monkeypatch.context() as m:  # without the rule: the restaurant's message is foreign
        m.setattr(minimal, "carried", lambda parts: set())
        hotel._rendered.clear()
        alone = render_together([trip[1]], "track")
    hotel._rendered.clear()
    assert PLACE[language] not in alone.xml
