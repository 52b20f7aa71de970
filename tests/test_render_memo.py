"""A render repeated with nothing new in the log is served from the editor's memory (issue 15:
render p50); anything that changes what it is made of makes a new one."""

from __future__ import annotations

from context_editor import ContextEditor
from context_editor.audit import erase

TS = "2024-05-01T10:00:00+08:00"
TURNS = [{"role": "user", "content": "我想买黑色的降噪耳机，预算2000以内", "timestamp": TS},
         {"role": "assistant", "content": "推荐Sony WH-1000XM5，现价1999元。需要下单吗？", "timestamp": TS}]


def test_a_repeated_render_is_the_same_and_what_changes_it_is_seen(tmp_path):
    url = f"sqlite:///{tmp_path}/m.db"
    editor = ContextEditor("ecommerce", url)
    editor.ingest("s", TURNS)
    drafts = []
    draft = editor._draft
    editor._draft = lambda *a: drafts.append(a) or draft(*a)  # type: ignore[method-assign]
    first = editor.render("s", "place_order")
    first.fields.append("not a field")  # a caller's change to what it got is its own
    again = editor.render("s", "place_order")
    assert again.xml == first.xml and "not a field" not in again.fields
    assert len(drafts) == 1  # the second came from memory
    assert editor.usage("s")["renders"] == 2  # every render is accounted, remembered or not
    assert editor.render("s", "place_order", budget=300).xml != first.xml or first.tokens <= 300
    # Another writer appends: the next render sees it.
    ContextEditor("ecommerce", url).add("s", {"role": "user", "content": "改成白色的吧", "timestamp": TS})
    assert "白色" in editor.render("s", "place_order").xml
    # An erased message is gone from the next render, though a render of it was remembered.
    index = len(editor.store.messages("s")) - 1
    assert "改成白色的吧" in editor.render("s", "recommend_product").xml
    erase(editor.store, ["s"], "tester", "test", messages=[index])
    assert "改成白色的吧" not in editor.render("s", "recommend_product").xml


def test_renders_with_a_model_in_the_loop_are_not_repeated_from_memory():
    class Scorer:
        calls = 0

        def __call__(self, msg, ctx):
            Scorer.calls += 1
            return 3.0

    editor = ContextEditor("ecommerce", "memory://", scorer=Scorer())
    editor.ingest("s", TURNS * 20)
    editor.render("s", "place_order")
    before = Scorer.calls
    editor.render("s", "place_order")
    assert Scorer.calls > before and not editor._rendered
