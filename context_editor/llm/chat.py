"""An OpenAI-compatible `/v1/chat/completions` client (vLLM, Ollama, llama.cpp, a cloud model),
and the scorer and summarizer built on it.

Standard library only (urllib): JSON in and out, temperature 0, a timeout, retries with
exponential backoff, markdown fences stripped before parsing. The scorer sends the articles'
prompt (goal, subtask, `[id]`-tagged messages, the five grades) once per render for all older
messages. Any failure (network, HTTP status, unparseable or incomplete answer) falls back to the
deterministic rule scorer for that render, with a `LLM_SCORER_FALLBACK` alert in the context.

Every answer, and every failure, is an `Answer` kept by the SHA-256 of model and prompt. The
pipeline records each answer a render used in the session's edit log (an `llm` edit, on the
hash chain) and gives the recorded ones back before the next render: a prompt that has a
recorded answer is never sent again, so re-rendering a session (in another process, with the
endpoint gone) gives the same context without a network call. `replay_only=True` never calls
the endpoint at all (an unrecorded prompt goes to the rules).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from ..inject.history import rule_score
from ..model import Message

LLM_SCORER_FALLBACK = "LLM_SCORER_FALLBACK"
_FENCE = re.compile(r"^\s*```[A-Za-z]*\s*|\s*```\s*$")

SCORE_PROMPT = """You manage this agent's memory. Judge how much each earlier message is worth for the task.
Task goal: {goal}
Current subtask: {subtask}
Action about to run: {action} ({description})
Earlier messages, each starting with its [id]:
{history}
Answer with a JSON array with exactly one element per message, like
[{{"id": "m12", "score": 4, "reason": "the user's hard constraint"}}]
Scores:
5 decides whether the task succeeds (a constraint, a unique ID, key data): keep
4 matters for the next key steps: keep
3 useful background: keep if there is room
2 barely related: drop first
1 unrelated: drop
score is an integer from 1 to 5. Leave no message out. Keep each reason short."""


class ChatError(Exception):
    """The endpoint did not give a usable answer."""


def strip_fences(text: str) -> str:
    """The JSON inside a ```json … ``` fence (or the text as is)."""
    return _FENCE.sub("", text.strip())


@dataclass
class ChatClient:
    """POST /v1/chat/completions with retries. `base_url` like http://127.0.0.1:8000/v1."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 20.0
    retries: int = 3
    backoff: float = 0.25  # seconds before the second try; doubles each time

    def complete(self, prompt: str) -> str:
        """The assistant's text for one user prompt, at temperature 0."""
        body = json.dumps({"model": self.model, "temperature": 0,
                           "messages": [{"role": "user", "content": prompt}]}).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = self.base_url.rstrip("/") + "/chat/completions"
        last: Exception | None = None
        for attempt in range(self.retries):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                request = urllib.request.Request(url, data=body, headers=headers, method="POST")
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    data = json.loads(response.read().decode("utf-8"))
                return str(data["choices"][0]["message"]["content"])
            except (urllib.error.URLError, TimeoutError, OSError, ValueError, KeyError, IndexError, TypeError) as exc:
                last = exc
        raise ChatError(f"{url}: no usable answer after {self.retries} tries ({last})")


def prompt_hash(model: str, prompt: str) -> str:
    return hashlib.sha256(f"{model}\n{prompt}".encode("utf-8")).hexdigest()


@dataclass
class Answers:
    """A model's answers by prompt hash. An answer is a record (the body of an `llm` edit):
    {"kind", "model", "prompt_hash", "result"} or, when the endpoint failed, "error" instead of
    a result (replayed as the same fallback). `used` collects what renders used since the last
    `drain`, for the pipeline to record in the session's log."""

    known: dict[str, dict[str, Any]] = field(default_factory=dict)
    used: dict[str, dict[str, Any]] = field(default_factory=dict)

    def recall(self, records: dict[str, dict[str, Any]]) -> None:
        """Answers recorded earlier (a session's `State.llm`) count as known."""
        self.known.update(records)

    def get(self, key: str) -> dict[str, Any] | None:
        record = self.known.get(key)
        if record is not None:
            self.used[key] = record
        return record

    def put(self, record: dict[str, Any]) -> dict[str, Any]:
        self.known[record["prompt_hash"]] = self.used[record["prompt_hash"]] = record
        return record

    def drain(self) -> list[dict[str, Any]]:
        out, self.used = list(self.used.values()), {}
        return out


def parse_scores(text: str, ids: list[str]) -> dict[str, int]:
    """{id: score} from the model's answer: a JSON array (or an object wrapping one), every id
    present exactly with an integer 1-5. Anything else is a ChatError."""
    try:
        data = json.loads(strip_fences(text))
    except ValueError:
        match = re.search(r"\[.*\]", text, re.S)
        if match is None:
            raise ChatError("the answer holds no JSON array") from None
        try:
            data = json.loads(match.group(0))
        except ValueError as exc:
            raise ChatError(f"the answer is not JSON ({exc})") from None
    if isinstance(data, dict):
        data = next((v for v in data.values() if isinstance(v, list)), None)
    if not isinstance(data, list):
        raise ChatError("the answer is not a JSON array of scores")
    scores: dict[str, int] = {}
    for item in data:
        if isinstance(item, dict) and str(item.get("id")) in ids:
            score = item.get("score")
            if isinstance(score, bool) or not isinstance(score, (int, float)) or not 1 <= score <= 5:
                raise ChatError(f"score {score!r} for {item.get('id')} is not 1-5")
            scores[str(item["id"])] = int(score)
    missing = [i for i in ids if i not in scores]
    if missing:
        raise ChatError(f"no score for {', '.join(missing[:5])}")
    return scores


@dataclass
class ChatScorer:
    """The articles' LLM scorer behind the Scorer protocol (batch: one request per render)."""

    client: ChatClient
    replay_only: bool = False  # never call the endpoint: recorded answers or the rule scorer
    preview_chars: int = 200
    answers: Answers = field(default_factory=Answers)
    alerts: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, message: Message, ctx: dict[str, Any]) -> float:
        return self.score_batch([message], ctx)[0]

    def prompt(self, messages: list[Message], ctx: dict[str, Any]) -> str:
        history = "\n".join(f"[m{m.index}] ({m.role}{'/' + m.name if m.name else ''}) {m.content[: self.preview_chars]}"
                            for m in messages)
        return SCORE_PROMPT.format(goal=ctx.get("goal") or "(not set)", subtask=ctx.get("subtask") or "(not set)",
                                   action=ctx.get("action", ""), description=ctx.get("description", ""), history=history)

    def score_batch(self, messages: list[Message], ctx: dict[str, Any]) -> list[float]:
        ids = [f"m{m.index}" for m in messages]
        prompt = self.prompt(messages, ctx)
        key = prompt_hash(self.client.model, prompt)
        record = self.answers.get(key)
        if record is None and self.replay_only:
            record = {"error": "replay: no recorded answer for this prompt"}  # not recorded: nothing was asked
        elif record is None:
            record = {"kind": "score", "model": self.client.model, "prompt_hash": key}
            try:
                record = self.answers.put({**record, "result": parse_scores(self.client.complete(prompt), ids)})
            except ChatError as exc:
                record = self.answers.put({**record, "error": str(exc)})
        if "error" in record:
            self.alerts.append({"code": LLM_SCORER_FALLBACK, "round": ctx.get("round", 0),
                                "message": f"scorer {self.client.model} unavailable, rule scores used: {record['error']}"})
            return [rule_score(m, ctx) for m in messages]
        return [float(record["result"][i]) for i in ids]

    def drain_alerts(self) -> list[dict[str, Any]]:
        out, self.alerts = self.alerts, []
        return out


DISTIL_PROMPT = """Distil this text into one line of at most {max_chars} characters. Keep its conclusion and
every number and identifier exactly as written. Add nothing that is not in the text; no hedging words.
Answer with the line only.
Text: {text}"""


@dataclass
class ChatSummarizer:
    """Trace distillation by a model, behind the Summarizer protocol (checked by `distil.check_line`)."""

    client: ChatClient
    max_chars: int = 30
    answers: Answers = field(default_factory=Answers)
    replay_only: bool = False

    def __call__(self, text: str, ctx: dict[str, Any]) -> str:
        """The model's line for `text`; a ChatError when the endpoint failed (now or when recorded)."""
        prompt = DISTIL_PROMPT.format(max_chars=self.max_chars, text=text)
        key = prompt_hash(self.client.model, prompt)
        record = self.answers.get(key)
        if record is None:
            if self.replay_only:
                raise ChatError("replay: no recorded answer for this prompt")
            record = {"kind": "distil", "model": self.client.model, "prompt_hash": key}
            try:
                record = self.answers.put({**record, "result": strip_fences(self.client.complete(prompt)).strip().strip('"')})
            except ChatError as exc:
                record = self.answers.put({**record, "error": str(exc)})
        if "error" in record:
            raise ChatError(str(record["error"]))
        return str(record["result"])
