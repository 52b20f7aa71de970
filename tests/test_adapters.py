"""Message-format adapters, tested against the real packages' own types (anthropic, openai,
langchain-core; nothing is sent anywhere), through the pipeline and the CLI."""

from __future__ import annotations

import html
import json

import pytest
from anthropic.types import Message as AnthropicMessage
from anthropic.types import TextBlock, ToolUseBlock, Usage
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, messages_to_dict
from openai.types.chat import ChatCompletionMessage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from context_editor import ContextEditor
from context_editor.adapters import detect, to_messages
from context_editor.cli import main
from context_editor.conversation import normalise_message, parse_conversation
from context_editor.errors import ConversationError

TOOL_RESULT = {"order_id": "ORDER-2024-001", "resolution_status": "open"}
# The phone number is masked in the arguments too (inject/pii.py): a tool call is text the model reads.
ORDER_TURN = '<turn round="1" role="assistant" tool_call="find_order">{"phone":"[phone number]"}</turn>'


def ingest(messages: list[dict]) -> ContextEditor:
    editor = ContextEditor("ecommerce", "memory://")
    editor.ingest("s", [normalise_message(m) for m in messages], now="2024-05-01T10:00:00+08:00")
    return editor


def assert_tool_round_trip(editor: ContextEditor) -> None:
    """The tool call renders with its name and arguments, and the tool result set the order id."""
    state = editor.state("s")
    assert state.get("order_id") == "ORDER-2024-001" and state.get("user_intent") == "complaint"
    assert state.fields["order_id"].source == "tool"
    xml = editor.render("s", "handle_complaint").xml
    assert ORDER_TURN in xml and 'role="tool" tool="find_order"' in xml
    assert '<turn round="1" role="assistant"></turn>' not in xml


def test_anthropic_request_with_tool_use_tool_result_and_images():
    response = AnthropicMessage(
        id="msg_01", type="message", role="assistant", model="claude-sonnet-4-5", stop_reason="tool_use",
        stop_sequence=None, usage=Usage(input_tokens=10, output_tokens=5),
        content=[ToolUseBlock(type="tool_use", id="toolu_1", name="find_order", input={"phone": "13800000000"})])
    request = {
        "system": [{"type": "text", "text": "You are a support agent."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "我要投诉，耳机坏了"},
                                         {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]},
            response,
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                          "content": [{"type": "text", "text": json.dumps(TOOL_RESULT)}]}]},
        ]}
    assert detect(json.loads(json.dumps({**request, "messages": request["messages"][:1]}))) == "anthropic"
    messages = to_messages(request)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assert messages[1]["content"] == "我要投诉，耳机坏了\n[image]"
    assert messages[2]["id"] == "msg_01" and messages[2]["tool_calls"][0]["function"]["name"] == "find_order"
    assert messages[3]["tool_call_id"] == "toolu_1" and messages[3]["name"] == "find_order"
    assert_tool_round_trip(ingest(messages))


def test_anthropic_user_turn_with_results_and_text_keeps_the_api_order():
    turns = [{"role": "assistant", "content": [TextBlock(type="text", text="Checking."),
                                               ToolUseBlock(type="tool_use", id="t1", name="stock", input={})]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "in stock"},
                                          {"type": "text", "text": "要黑色"}]}]
    messages = to_messages(turns, "anthropic")
    assert [(m["role"], m["content"]) for m in messages] == [("assistant", "Checking."), ("tool", "in stock"),
                                                            ("user", "要黑色")]
    with pytest.raises(ConversationError, match="unknown Anthropic content type 'hologram'"):
        to_messages([{"role": "user", "content": [{"type": "hologram"}]}], "anthropic")


def test_openai_chat_objects_and_params():
    messages = to_messages([
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": [{"type": "text", "text": "我要投诉，耳机坏了"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        ChatCompletionMessage(role="assistant", content=None, tool_calls=[
            {"id": "call_1", "type": "function", "function": {"name": "find_order", "arguments": '{"phone": "13800000000"}'}}]),
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(TOOL_RESULT)},
    ])
    assert messages[1]["content"].endswith("[image]") and messages[3]["name"] == "find_order"
    assert_tool_round_trip(ingest(messages))


def test_openai_responses_items():
    request = {"instructions": "You are a support agent.", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "我要投诉，耳机坏了"},
                                     {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        ResponseFunctionToolCall(type="function_call", call_id="call_1", name="find_order",
                                 arguments='{"phone": "13800000000"}', id="fc_1"),
        {"type": "function_call_output", "call_id": "call_1", "output": json.dumps(TOOL_RESULT)},
        ResponseOutputMessage(id="msg_2", type="message", role="assistant", status="completed",
                              content=[ResponseOutputText(type="output_text", text="已找到订单。", annotations=[])]),
    ]}
    messages = to_messages(request)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert_tool_round_trip(ingest(messages))


def test_langchain_messages_and_their_dict_form():
    native = [SystemMessage("You are a support agent."),
              HumanMessage(content=[{"type": "text", "text": "我要投诉，耳机坏了"},
                                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]),
              AIMessage(content="", tool_calls=[{"name": "find_order", "args": {"phone": "13800000000"}, "id": "c1"}]),
              ToolMessage(content=json.dumps(TOOL_RESULT), tool_call_id="c1")]
    messages = to_messages(native)
    assert messages == to_messages(messages_to_dict(native))
    assert detect(messages_to_dict(native)) == "langchain"
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assert_tool_round_trip(ingest(messages))


def test_cli_detects_the_format_and_reports_bad_input_by_file(tmp_path, capsys):
    anthropic_file = tmp_path / "anthropic.json"
    anthropic_file.write_text(json.dumps({"system": "Be brief.", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "我要投诉，耳机坏了"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "find_order", "input": {"phone": "13800000000"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": json.dumps(TOOL_RESULT)}]},
    ]}, ensure_ascii=False), "utf-8")
    assert main(["run", "ecommerce", str(anthropic_file), "--action", "handle_complaint", "--now", "2024-05-01T10:00:00"]) == 0
    assert ORDER_TURN in capsys.readouterr().out
    # the same file, forced through another adapter: refused whole, naming the file
    assert main(["run", "ecommerce", str(anthropic_file), "--format", "openai-responses", "--json"]) == 2
    err = capsys.readouterr().err
    assert str(anthropic_file) in err and "[CE200]" in err
    jsonl = tmp_path / "lc.jsonl"  # langchain's dict form, one message per line
    jsonl.write_text("\n".join(json.dumps(d) for d in messages_to_dict([HumanMessage("要黑色的耳机")])), "utf-8")
    assert parse_conversation(jsonl.read_bytes())[0] == {"role": "user", "content": "要黑色的耳机"}


def test_long_tool_arguments_are_trimmed_whole_values_only():
    args = {f"key_{i}": "v" * 40 for i in range(20)}
    editor = ingest([{"role": "user", "content": "我要投诉"},
                     {"role": "assistant", "content": "", "tool_calls": [
                         {"id": "c1", "type": "function", "function": {"name": "bulk", "arguments": json.dumps(args)}}]}])
    xml = editor.render("s", "handle_complaint", budget=2000).xml
    turn = next(line for line in xml.splitlines() if 'tool_call="bulk"' in line)
    shown = json.loads(html.unescape(turn.split(">", 1)[1].rsplit("</turn>", 1)[0]))
    assert shown["…"].endswith("more arguments omitted") and all(shown[k] == "v" * 40 for k in shown if k != "…")
