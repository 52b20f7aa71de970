"""The LLM half (issue 11): any scorer through the articles' thresholds, an OpenAI-compatible
client tested against a real HTTP server on 127.0.0.1 with scripted answers, fallback to the
rule scorer with an alert, replay from recorded answers, and rule-checked distillation."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from context_editor import ContextEditor
from context_editor.llm import ChatClient, ChatScorer, ChatSummarizer, check_line, distil
from context_editor.audit import replay, verify
from context_editor.llm.chat import LLM_SCORER_FALLBACK, prompt_hash
from context_editor.store import open_store

TS = "2024-05-01T10:{:02d}:00+08:00"


class ChatServer:
    """A Chat Completions endpoint on 127.0.0.1 that answers from a script: each item is a
    function (prompt -> (status, content)). It records every prompt it was sent."""

    def __init__(self) -> None:
        self.script: list = []
        self.prompts: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                assert self.path == "/v1/chat/completions" and body["temperature"] == 0
                prompt = body["messages"][-1]["content"]
                server.prompts.append(prompt)
                status, content = (server.script.pop(0) if server.script else (lambda p: (500, "")))(prompt)
                reply = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = ChatServer()
    yield s
    s.close()


def grade_by_text(grades: dict[str, int], fenced: bool = False):
    """A scripted model: scores each [mN] line by the first key its text contains (else 1)."""
    def answer(prompt: str) -> tuple[int, str]:
        items = []
        for mid, text in re.findall(r"^\[(m\d+)\] \([^)]*\) (.*)$", prompt, re.M):
            score = next((g for key, g in grades.items() if key in text), 1)
            items.append({"id": mid, "score": score, "reason": "scripted"})
        body = json.dumps(items, ensure_ascii=False)
        return 200, f"```json\n{body}\n```" if fenced else body
    return answer


def conversation(editor: ContextEditor, session: str = "s") -> None:
    turns = [("user", "我想买蓝牙耳机"), ("user", "预算2000以内")] + \
        [("user", f"今天天气不错{i}") for i in range(5)] + [("user", "嗯嗯")] * 3 + [("user", "要黑色的")]
    for i, (role, text) in enumerate(turns):
        editor.add(session, {"role": role, "content": text, "timestamp": TS.format(i)})


def history_of(xml: str) -> list[str]:
    node = ET.fromstring(xml).find("history")
    return [t.text or "" for t in node] if node is not None else []


def test_any_scorer_goes_through_the_thresholds(server):
    """Chit-chat scored 2 and '嗯嗯' scored 1 never reach <history>; 5s are kept first."""
    server.script = [grade_by_text({"蓝牙耳机": 5, "预算": 5, "天气": 2, "嗯嗯": 1}, fenced=True)]
    editor = ContextEditor("ecommerce", "memory://", scorer=ChatScorer(ChatClient(server.url, "scripted")))
    editor.set_task_goal("s", "帮用户下单买耳机")
    conversation(editor)
    xml = editor.render("s", "place_order", budget=2000).xml
    history = history_of(xml)
    assert "我想买蓝牙耳机" in history and "预算2000以内" in history
    assert not any("天气" in t or t == "嗯嗯" for t in history), history
    prompt = server.prompts[0]
    assert "Task goal: 帮用户下单买耳机" in prompt and "[m1] (user) 我想买蓝牙耳机" in prompt
    assert len(server.prompts) == 1  # one batch request per render


def test_threes_fill_by_recency_after_the_fours():
    """A plain callable scorer: 4s first, then 3s newest first, 2s compressed away."""
    grades = {"A": 4, "B": 3, "C": 3, "D": 2}
    editor = ContextEditor("ecommerce", "memory://",
                           scorer=lambda m, ctx: float(grades.get(m.content[:1], 1)))
    for i, text in enumerate(["A 我想买耳机", "B 一", "C 二", "D 三", "X 四", "Y 五", "Z 六"]):
        editor.add("s", {"role": "user", "content": text, "timestamp": TS.format(i)})
    ranked = editor.renderer._plan(editor.state("s"), "place_order", editor.store.messages("s"), 2000, None, [], {}, None, None).ranked
    assert [u.messages[0].content[:1] for u in ranked] == ["A", "C", "B"]


def test_endpoint_failure_falls_back_to_rules_with_an_alert(server):
    server.script = [lambda p: (500, "")] * 2 + [lambda p: (200, "I cannot answer that")]
    scorer = ChatScorer(ChatClient(server.url, "scripted", backoff=0.01, retries=3))
    editor = ContextEditor("ecommerce", "memory://", scorer=scorer)
    conversation(editor)
    ctx = editor.render("s", "place_order", budget=2000)
    alerts = [a.get("code") for a in ET.fromstring(ctx.xml).find("alerts")]
    assert alerts == [LLM_SCORER_FALLBACK] and len(server.prompts) == 3  # retried, then gave up
    assert "预算2000以内" in history_of(ctx.xml)  # the rule scorer still found the source of a value
    rules_only = ContextEditor("ecommerce", "memory://")
    conversation(rules_only)
    assert history_of(rules_only.render("s", "place_order", budget=2000).xml) == history_of(ctx.xml)


def llm_edits(editor: ContextEditor, session: str = "s") -> list:
    return [e for e in editor.store.edits(session) if e.op == "llm"]


def test_answers_are_recorded_in_the_edit_log_and_replayed_without_the_endpoint(server, tmp_path):
    """Each answer a render used is an `llm` edit on the session's hash chain (prompt hash, model,
    scores). With the endpoint stopped, another editor over the store renders the same context
    from the log, without a network call; `audit verify` and `audit replay` hold."""
    db = str(tmp_path / "s.db")
    server.script = [grade_by_text({"蓝牙耳机": 5, "预算": 4, "天气": 3, "嗯嗯": 1})]
    live = ContextEditor("ecommerce", db, scorer=ChatScorer(ChatClient(server.url, "scripted")))
    conversation(live)
    first = live.render("s", "place_order", budget=2000).xml
    assert live.render("s", "place_order", budget=2000).xml == first and len(server.prompts) == 1  # asked once
    [record] = llm_edits(live)
    assert record.after["prompt_hash"] == prompt_hash("scripted", server.prompts[0])
    assert record.after["kind"] == "score" and record.after["result"]["m0"] == 5 and record.source == "llm"
    assert record.message_index == live.state("s").message_index  # attached to the last message
    server.close()
    again = ContextEditor("ecommerce", db, scorer=ChatScorer(ChatClient(server.url, "scripted", retries=1)))
    assert again.render("s", "place_order", budget=2000).xml == first  # no fallback: nothing was sent
    assert LLM_SCORER_FALLBACK not in first and any("天气" in t for t in history_of(first))
    assert len(llm_edits(again)) == 1  # a reused answer is not recorded twice
    store = open_store(db)
    assert all(v.ok for v in verify(store)) and replay(store, "s").identical
    live.add("s", {"role": "user", "content": "还要白色的", "timestamp": TS.format(30)})  # the chain goes on after it
    assert all(v.ok for v in verify(store)) and replay(store, "s").identical


def test_a_failed_endpoint_is_recorded_and_replayed_as_the_same_fallback(server, tmp_path):
    db = str(tmp_path / "s.db")
    server.script = [lambda p: (500, "")]
    live = ContextEditor("ecommerce", db, scorer=ChatScorer(ChatClient(server.url, "scripted", retries=1)))
    conversation(live)
    first = live.render("s", "place_order", budget=2000).xml
    assert LLM_SCORER_FALLBACK in first and "error" in llm_edits(live)[0].after
    server.script = [grade_by_text({"天气": 5})]  # the endpoint is back, but this prompt's answer is on record
    again = ContextEditor("ecommerce", db, scorer=ChatScorer(ChatClient(server.url, "scripted")))
    assert again.render("s", "place_order", budget=2000).xml == first and len(server.prompts) == 1
    assert replay(open_store(db), "s").identical


def test_a_tampered_answer_breaks_the_chain(server, tmp_path):
    db = tmp_path / "s.db"
    server.script = [grade_by_text({"蓝牙耳机": 5})]
    live = ContextEditor("ecommerce", str(db), scorer=ChatScorer(ChatClient(server.url, "scripted")))
    conversation(live)
    live.render("s", "place_order", budget=2000)
    seq = llm_edits(live)[0].seq
    with sqlite3.connect(db) as c:
        # The answer is the edit's value: in its payload, committed to by the hashed body.
        c.execute("UPDATE edits SET payload = replace(payload, '\"m0\":5', '\"m0\":1') WHERE session = 's' AND seq = ?",
                  (seq,))
        assert '"m0":1' in c.execute("SELECT payload FROM edits WHERE session = 's' AND seq = ?", (seq,)).fetchone()[0]
    [verdict] = verify(open_store(str(db)), "s")
    assert not verdict.ok and verdict.broken_at == f"edit {seq}"


def test_scores_of_two_or_less_leave_history_for_the_summary_zone(server):
    """<= 2 is compressed, not lost: the sentence is not verbatim in <history>, its line is in <summary>."""
    server.script = [grade_by_text({"蓝牙耳机": 5, "花生": 2, "天气": 2, "嗯嗯": 1})]
    editor = ContextEditor("ecommerce", "memory://", scorer=ChatScorer(ChatClient(server.url, "scripted")))
    editor.add("s", {"role": "user", "content": "我对花生过敏，订单号是A123456", "timestamp": TS.format(0)})
    conversation(editor)
    root = ET.fromstring(editor.render("s", "place_order", budget=2000).xml)
    assert not any("花生" in t for t in history_of(ET.tostring(root, encoding="unicode")))
    assert "花生" in "".join(root.find("summary").itertext())


def test_distillation_is_checked_by_rules(server):
    source = "这款耳机降噪效果好，因为麦克风阵列实时生成反向声波。实测地铁降噪深度达35dB。"
    assert check_line("降噪达35dB，因麦克风阵列生成反向声波", source) is None
    assert "35" in (check_line("降噪效果很好", source) or "")  # the number was dropped
    assert "hedges" in (check_line("可能降噪35dB", source) or "")
    assert "longer" in (check_line("降噪" * 20 + "35dB", source) or "")
    server.script = [lambda p: (200, "降噪达35dB，因双馈阵列生成反向声波"), lambda p: (200, "大概降噪35dB吧")]
    summarizer = ChatSummarizer(ChatClient(server.url, "scripted"))
    assert distil(source, summarizer) == ("降噪达35dB，因双馈阵列生成反向声波", None)
    line, why = distil(source + " ", summarizer)  # a new prompt: the model hedges, the rules refuse it
    assert why and "hedges" in why and line == "实测地铁降噪深度达35dB。"  # the extractive line
    server.close()
    line, why = distil(source + "  ", ChatSummarizer(ChatClient(server.url, "scripted", retries=1)))
    assert line == "实测地铁降噪深度达35dB。" and why and "failed" in why


def test_scorers_are_found_by_name_in_the_registry():
    editor = ContextEditor("ecommerce", "memory://", scorer="relevance")
    conversation(editor)
    assert "预算2000以内" in history_of(editor.render("s", "place_order", budget=2000).xml)
