"""`context-editor`: a thin shell over the Python API (every command maps to one call).

Exit codes: 0 success, 1 a check failed (lint problems), 2 bad input or usage (the message says
what to fix). Errors go to stderr; data (state, XML, JSON) to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, TypeAlias

from . import registry
from .adapters import FORMATS
from .errors import ContextEditorError, Errors

if TYPE_CHECKING:
    from .model import Message, State
    from .pipeline import ContextEditor
    from .signing import Signer

# The pipeline, stores and their dependencies (jsonschema, cn2an, Jinja, cryptography), the data
# model and importlib.metadata (the registries' entry points) are imported inside the commands
# that use them, so `--help` and argument errors answer at once (tests/test_cli.py checks it).

EPILOG = """\
examples:
  context-editor demo
  context-editor run ecommerce conversation.jsonl --action place_order --budget 300
  context-editor ingest travel chat.json --session alice-1
  context-editor ingest travel_v2.yaml more.jsonl --session alice-1 --upgrade
  context-editor state --session alice-1 --as-of-round 3 --json
  context-editor render --session alice-1 --action book_flight
  context-editor why --session alice-1 budget_max
  context-editor lint my_domain.yaml --strict
  context-editor test my_domain.yaml tests/my_domain/ --junit report.xml
  context-editor audit verify --store prod.db
  context-editor replay --session alice-1

Conversations are JSONL (one {"role", "content", "timestamp"?, "id"?, "name"?, "tool_call_id"?}
per line), a JSON array in the OpenAI chat format, or the output of `audit export`; `-` reads stdin.
The store is $CONTEXT_EDITOR_STORE or ./context_editor.db unless --store URL is given
(memory://, sqlite:///path.db, a path, postgresql://user@host/db). Installed packages may add
commands (entry-point group context_editor.commands): name one to run it.
"""


def _parse_now(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise Errors.BAD_NOW(value=value) from None
    return dt


def _state_table(state: State, editor: ContextEditor) -> str:
    """A plain-text table: field, value, round, source, extractor."""
    from .inject import format_value

    rows = [("field", "value", "round", "source", "extractor")]
    for name in editor.domain.fields:
        fs = state.fields.get(name)
        if fs is None or not fs.present:
            continue
        p = fs.provenance
        rows.append((name, format_value(fs.value), str(fs.set_round), fs.source or "",
                     p.extractor if p else fs.source or ""))
    widths = [max(_width(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c + " " * (w - _width(c)) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    head = f"session {state.session}  domain {state.domain} ({state.domain_version})  round {state.round}  phase {state.phase}"
    alerts = [f"alert {a.code} (round {a.round}): {a.message}" for a in state.alerts]
    u = editor.usage(state.session)
    cost = f", cost {u['cost']} (raw window {u['raw_cost']})" if u["cost"] is not None else ""
    usage = f"usage: {u['renders']} renders, {u['context_tokens']} context tokens for {u['source_tokens']} raw tokens{cost}"
    return "\n".join([head, *lines, *alerts, usage])


def _width(text: str) -> int:
    """Display width: CJK characters take two columns."""
    return sum(2 if "\u2e80" <= ch <= "\ufaff" or "\uff00" <= ch <= "\uffef" else 1 for ch in text)


def _plugins(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "allow_plugins", False) or os.environ.get("CONTEXT_EDITOR_ALLOW_PLUGINS") == "1")


def _editor_for_session(session: str, store_url: str | None, model: str | None = None, allow_plugins: bool = False,
                        context_window: int | None = None, retrieval: bool = False) -> ContextEditor:
    """The editor of an existing session, with the domain version it was processed with."""
    from .pipeline import ContextEditor, stored_domain
    from .store import open_store

    store = open_store(store_url, create=False)
    info = store.require_session(session)
    return ContextEditor(stored_domain(store, info, allow_plugins), store, model=model, context_window=context_window,
                         retrieval=retrieval)


def cmd_demo(args: argparse.Namespace) -> int:
    from .conversation import read_conversation
    from .pipeline import ContextEditor
    from .resources import sample_conversation
    from .store import open_store

    store = open_store(args.store)
    editor = ContextEditor("ecommerce", store)
    taken = set(store.sessions())
    n = 1
    while f"demo-{n}" in taken:
        n += 1
    session = f"demo-{n}"
    sample = sample_conversation("ecommerce_headphones")
    state = editor.ingest(session, read_conversation(str(sample)))
    print(f"Ingested {sample.name} ({state.message_index + 1} messages) into {store.url} as session {session}\n")
    print(_state_table(state, editor))
    for action in editor.domain.actions:
        ctx = editor.render(session, action)
        print(f"\n# action {action}: {ctx.tokens} tokens (budget {ctx.budget})")
        print(ctx.xml)
    print(f"\nNext: context-editor why --session {session} budget_max --store {store.url}")
    return 0


def _print_result(editor: ContextEditor, session: str, args: argparse.Namespace) -> None:
    if getattr(args, "action", None):  # `state` has no --action
        print(editor.render(session, args.action, budget=args.budget, as_of_round=args.as_of_round).xml)
        return
    state = editor.history_state(session, as_of_round=args.as_of_round)  # every field's full history
    if args.json:
        print(json.dumps(state.to_json(), ensure_ascii=False, indent=2))
    else:
        print(_state_table(state, editor))


def cmd_run(args: argparse.Namespace) -> int:
    from .conversation import read_conversation
    from .pipeline import ContextEditor

    editor = ContextEditor(args.domain, "memory://", model=args.model, allow_plugins=_plugins(args),
                           context_window=args.context_window, retrieval=args.retrieval)
    if args.action:
        editor.renderer.action(args.action)
    messages = read_conversation(args.conversation, args.format)
    editor.ingest("run", messages, now=_parse_now(args.now) or datetime.now(timezone.utc))
    _print_result(editor, "run", args)
    return 0


def _already_stored(stored: list[Message], incoming: list[dict[str, Any]]) -> int:
    """How many leading incoming messages an earlier, interrupted run of the same file stored.

    Matched by identity, not position: a message with an `id` matches the stored message with
    that id; one without matches on role, content, name, tool call id, tool calls and timestamp
    (a missing timestamp matches any: the run stamped it). The file's first messages must appear
    in order among the stored ones, with anything another writer appended in between skipped, so
    re-running after someone else wrote to the session never stores a message twice."""
    def same(m: Message, d: dict[str, Any]) -> bool:
        if d.get("id") is not None or m.id is not None:
            return m.id == d.get("id")
        return ((m.role, m.content, m.name, m.tool_call_id, list(m.tool_calls))
                == (d["role"], d["content"], d.get("name"), d.get("tool_call_id"), list(d.get("tool_calls") or []))
                and d.get("timestamp") in (None, m.timestamp))

    matched, position = 0, 0
    for d in incoming:
        position = next((i + 1 for i in range(position, len(stored)) if same(stored[i], d)), -1)
        if position < 0:
            break
        matched += 1
    return matched


def cmd_ingest(args: argparse.Namespace) -> int:
    from .conversation import read_conversation
    from .pipeline import ContextEditor

    messages = read_conversation(args.conversation, args.format)  # all checked before anything is stored
    editor = ContextEditor(args.domain, args.store, allow_plugins=_plugins(args), upgrade=args.upgrade)
    skip = 0 if args.append_all else _already_stored(editor.store.messages(args.session), messages)
    if skip:
        print(f"session {args.session}: the first {skip} messages are already stored (an earlier run); continuing after them",
              file=sys.stderr)
    before = editor.state(args.session).message_index + 1
    state = editor.ingest(args.session, messages[skip:], now=_parse_now(args.now) or datetime.now(timezone.utc))
    print(f"session {args.session}: {state.message_index + 1 - before} messages ingested "
          f"({state.message_index + 1} in total, round {state.round}) into {editor.store.url}", file=sys.stderr)
    return 0


def cmd_state(args: argparse.Namespace) -> int:
    editor = _editor_for_session(args.session, args.store, allow_plugins=_plugins(args))
    _print_result(editor, args.session, args)
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    editor = _editor_for_session(args.session, args.store, model=args.model, allow_plugins=_plugins(args),
                                 context_window=args.context_window, retrieval=args.retrieval)
    if args.together:
        from .pipeline import render_together

        parts = [(editor, args.session)] + [(_editor_for_session(s, args.store, model=args.model, allow_plugins=_plugins(args),
                                                                 context_window=args.context_window), s) for s in args.together]
        print(render_together(parts, args.action, budget=args.budget, as_of_round=args.as_of_round).xml)
        return 0
    print(editor.render(args.session, args.action, budget=args.budget, as_of_round=args.as_of_round).xml)
    return 0


def cmd_why(args: argparse.Namespace) -> int:
    editor = _editor_for_session(args.session, args.store, allow_plugins=_plugins(args), retrieval=args.retrieval)
    if args.field not in editor.domain.fields and re.fullmatch(r"m\d+", args.field):
        return _why_message(editor, args)
    info = editor.why(args.session, args.field, as_of_round=args.as_of_round)
    if args.json:
        print(json.dumps(info, ensure_ascii=False, indent=2))
        return 0
    print(f"{info['field']} = {json.dumps(info['value'], ensure_ascii=False)}")
    if info["provenance"]:
        p = info["provenance"]
        # A value from the user's memory points at a message of another session (message_id session#index).
        where = f"message {p['message_index']}" if p["message_index"] >= 0 else f"session message {p['message_id']}"
        print(f"  from round {p['round']}, {where} ({p['role']}), chars {p['span'][0]}-{p['span'][1]}: "
              f"{p['text']!r} via {p['extractor']} (confidence {p['confidence']}, domain {p['domain_version']})")
    if info["note"]:
        print(f"  {info['note']}")
    for h in info["history"]:
        prov = h.get("provenance")
        where = f" <- {prov['text']!r} via {prov['extractor']}" if prov else ""
        reason = f" [{h['reason']}]" if h["reason"] else ""
        print(f"  round {h['round']:>3}  {h['status']:<8} {h['source']:<10} {json.dumps(h['value'], ensure_ascii=False)}{reason}{where}")
    return 0


def _why_message(editor: ContextEditor, args: argparse.Namespace) -> int:
    """`why m12 [--action A]`: where a message is in the action's context, and why (search included)."""
    info = editor.why_message(args.session, args.field, action=args.action, budget=args.budget,
                              as_of_round=args.as_of_round)
    if args.json:
        print(json.dumps(info, ensure_ascii=False, indent=2))
        return 0
    name = f" {info['name']}" if info["name"] else ""
    print(f"{info['message']}: round {info['round']}, {info['role']}{name}: {info['text']!r}")
    for f in info["fields"]:
        print(f"  set {f['field']} = {json.dumps(f['value'], ensure_ascii=False)} [{f['reason']}]")
    shown = info.get("shown")
    if shown is not None:
        where = shown["as"] or "not shown"
        reason = f" (reason: {shown['reason']})" if shown.get("reason") else ""
        print(f"  in {info['action']}: {where}{reason}" + (f"; {shown['note']}" if shown.get("note") else ""))
    hit = info.get("retrieval")
    if hit is not None:
        print(f"  search query: {' '.join(hit['query'])}")
        print(f"  matched terms: {' '.join(hit['matched_terms']) or '(none)'}")
        if "rank" in hit:
            print(f"  rank {hit['rank']} of {hit['of']}, score {hit['score']}, searched rounds "
                  f"{hit['searched_rounds'][0]}-{hit['searched_rounds'][1]}")
        else:
            print(f"  {hit['note']}")
    elif shown is not None:
        print("  (search off: pass --retrieval to see what search made of it)")
    return 0


def _all_sessions(kind: str, args: argparse.Namespace) -> int | None:
    """`--all`: the job fanned out over every selected session (backfill.cli); None without it."""
    if not args.all:
        if args.engine != "local" or args.out or args.sessions or args.address:
            raise Errors.BAD_ENGINE_OPTION(problem="--engine, --address, --out and --sessions go with --all",
                                           fix=f"add --all to {kind} every selected session, or drop them")
        return None
    if args.session:
        raise Errors.BAD_ENGINE_OPTION(problem="--session and --all", fix="pass one of them")
    from .backfill.cli import run_checks

    return run_checks(kind, args)


def cmd_audit_verify(args: argparse.Namespace) -> int:
    if (code := _all_sessions("verify", args)) is not None:
        return code
    from . import audit
    from .signing import public_key_from
    from .store import open_store

    store = open_store(args.store, create=False)
    pubkey = public_key_from(args.pubkey) if args.pubkey else None
    report = audit.verify_store(store, args.session, pubkey=pubkey, checkpoint=args.checkpoint,
                                allow_plugins=_plugins(args))
    for v in report.sessions:
        if v.ok:
            print(f"ok      {v.session}: {v.messages} messages, {v.edits} edits, both hash chains and the head intact")
        else:
            print(f"BROKEN  {v.session}: first broken at {v.broken_at}: {v.reason}")
            for problem in v.problems[1:]:
                print(f"        also {problem}")
        for line in v.erasure_summary():
            print(f"        {line}; their commitments verify")
    for problem in report.store_problems:
        print(f"BROKEN  {problem}")
    if not report.sessions:
        print(f"no sessions in {store.url}")
    if pubkey:
        print(f"heads signed by the trusted key {pubkey[:16]}…"
              + (f"; checked against checkpoint {report.checkpoint}" if report.checkpoint else ""))
    for limit in report.limits:
        print(f"note: {limit}")
    return 0 if report.ok else 1


def cmd_erase(args: argparse.Namespace) -> int:
    from . import audit
    from .store import open_store

    if args.message is not None and args.field is not None:
        raise Errors.ERASE(problem="--message and --field name different things", fix="erase one at a time")
    store = open_store(args.store, create=False, signer=_optional_signer(args))
    user = getattr(args, "user", None)
    if args.session:
        sessions = [args.session]
    elif user:
        sessions = audit.sessions_of_user(store, user, getattr(args, "tenant", None))
        if not sessions:
            raise Errors.ERASE(problem=f"no stored session belongs to user {user!r}"
                                       + (f" of tenant {args.tenant!r}" if getattr(args, "tenant", None) else ""),
                               fix="check --user (and --tenant): sessions are keyed tenant/user/session")
    else:
        raise Errors.ERASE(problem="nothing to erase named",
                           fix="pass --session S (with --message N or --field F), or --user U for all of a user's sessions")
    done = audit.erase(store, sessions, args.actor, args.reason, None if args.message is None else [args.message],
                       args.field)
    for s in sessions:
        kinds = [t.kind for t in done if t.session == s]
        counts = [_count(kinds.count(kind), noun) for kind, noun in
                  (("message", "message"), ("edit", "edit"), ("before", "replaced value"))]
        print(f"erased  {s}: {', '.join(counts)} (by {args.actor}: {args.reason}); "
              "the commitments stay, `audit verify` still passes")
    return 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def cmd_retention_apply(args: argparse.Namespace) -> int:
    from . import audit
    from .store import open_store

    from .domain import load_domain

    domains = {d.name: d for d in (load_domain(x, allow_plugins=_plugins(args)) for x in args.domain or ())} or None
    store = open_store(args.store, create=False, signer=_optional_signer(args))
    steps = audit.apply_retention(store, _parse_now(args.now), domains, args.actor, args.dry_run, _plugins(args))
    for step in steps:
        what = f"{_count(len(step.messages), 'message')} older than {step.days} days (before {step.cutoff})"
        if args.dry_run:
            print(f"would erase  {step.session}: {what}, with the edits they caused")
        else:
            print(f"erased  {step.session}: {what}: {len(step.tombstones)} tombstones"
                  + (" (signed)" if store.signer else ""))
        if step.unerasable:
            print(f"        kept {len(step.unerasable)} older messages written before erasable payloads (schema 8): "
                  "their hash covers the text itself")
    if not steps:
        print("nothing is older than its domain's retention period")
    if args.dry_run:
        print("dry run: nothing was changed")
    return 0


def _optional_signer(args: argparse.Namespace) -> Signer | None:
    """--key's signer; None lets the store take the environment's key (CONTEXT_EDITOR_SIGNING_KEY*), if any."""
    from .signing import Signer

    return Signer.from_file(args.key) if getattr(args, "key", None) else None


def _signer(args: argparse.Namespace) -> Signer:
    from .signing import Signer

    signer = Signer.from_file(args.key) if args.key else Signer.from_env()
    if signer is None:
        raise Errors.SIGNING_KEY(problem="no signing key")
    return signer


def cmd_audit_checkpoint(args: argparse.Namespace) -> int:
    from . import audit
    from .store import open_store

    record = audit.checkpoint(open_store(args.store, create=False), _signer(args), args.out)
    body = record["checkpoint"]
    if args.out:
        print(f"checkpoint of {body['sessions']} sessions, root {body['root']}, appended to {args.out}")
    else:
        print(json.dumps(record, ensure_ascii=False))
    return 0


def cmd_audit_keygen(args: argparse.Namespace) -> int:
    from .signing import Signer

    signer = Signer.generate()
    try:
        fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never overwrite a key
    except OSError as exc:
        raise Errors.CHECKPOINT(problem=f"cannot create {args.out}: {exc.strerror}",
                                fix="choose a path that does not exist yet (a key is never overwritten)") from None
    with os.fdopen(fd, "w") as f:
        f.write(signer.private_hex() + "\n")
    print(f"private key written to {args.out} (keep it outside the store); public key: {signer.public_hex}")
    return 0


def cmd_audit_export(args: argparse.Namespace) -> int:
    from . import audit
    from .store import open_store

    store = open_store(args.store, create=False)
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout
    try:
        for record in audit.export(store, args.session):
            out.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
    finally:
        if args.out:
            out.close()
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    if (code := _all_sessions("replay", args)) is not None:
        return code
    if not args.session:
        raise Errors.BAD_ENGINE_OPTION(problem="replay needs --session ID or --all", fix="pass one of them")
    from . import audit
    from .store import open_store

    report = audit.replay(open_store(args.store, create=False), args.session, _plugins(args))
    if report.not_rederivable:
        print(f"not re-derivable (their message or values were erased): {len(report.not_rederivable)} edits, "
              f"seq {', '.join(map(str, report.not_rederivable))}")
    if report.identical:
        print(f"identical: {report.session} replays to the same {report.recorded - len(report.not_rederivable)} edits"
              + (" that can still be derived" if report.not_rederivable else ", byte for byte"))
        return 0
    print(f"DIFFERENT: {report.session}: recorded {report.recorded} edits, replay produced {report.replayed}")
    print(json.dumps(report.first_difference, ensure_ascii=False, indent=2))
    return 1


def cmd_lint(args: argparse.Namespace) -> int:
    from .domain import lint_domain, load_domain

    path, problems = lint_domain(args.domain, timing=args.timing)
    for p in problems:
        print(p.format(str(path)))
    errors = sum(p.is_error for p in problems)
    warnings = len(problems) - errors
    if errors or (warnings and args.strict):
        strict = " (--strict: warnings count as errors)" if warnings and args.strict else ""
        print(f"{errors} error(s), {warnings} warning(s) in {path}{strict}", file=sys.stderr)
        return 1
    domain = load_domain(path)
    note = f", {warnings} warning(s)" if warnings else ""
    print(f"{path}: ok (domain {domain.name} version {domain.version}, hash {domain.version_hash}, "
          f"{len(domain.fields)} fields, {len(domain.actions)} actions{note})")
    return 0


def cmd_test(args: argparse.Namespace) -> int:
    from .domain import load_domain

    from . import domaintest  # the test runner drives whole editors: only loaded for this command

    domain = load_domain(args.domain, allow_plugins=_plugins(args))
    cases = domaintest.load_cases(args.directory)
    suite = domaintest.run_suite(domain, cases)
    print(domaintest.report(suite))
    if args.compare:
        old = domaintest.run_suite(load_domain(args.compare, allow_plugins=_plugins(args)), cases)
        print()
        print(domaintest.compare(old, suite))
    if args.junit:
        with open(args.junit, "w", encoding="utf-8") as fh:
            fh.write(domaintest.junit(suite))
    return 0 if suite.passed else 1


_FORMAT = argparse.RawDescriptionHelpFormatter
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _global_options(parser: argparse.ArgumentParser, nested: bool) -> None:
    """Options every command takes, before or after its name. Below the top level they default to
    SUPPRESS, so a subcommand's parser never resets a value given before the subcommand."""
    unset = argparse.SUPPRESS if nested else None
    group = parser.add_argument_group("global options (accepted before or after the command)")
    group.add_argument("--store", metavar="URL", default=unset,
                       help="store URL (default $CONTEXT_EDITOR_STORE or ./context_editor.db)")
    group.add_argument("--tenant", metavar="ID", default=unset,
                       help="tenant the session belongs to (sessions are keyed tenant/user/session)")
    group.add_argument("--user", metavar="ID", default=unset, help="user the session belongs to")
    group.add_argument("--allow-plugins", action="store_true", default=argparse.SUPPRESS if nested else False,
                       help="load the Python plugin modules a domain declares (they run code; "
                            "also CONTEXT_EDITOR_ALLOW_PLUGINS=1)")


def _spread_global_options(parser: argparse.ArgumentParser) -> None:
    """Give every subcommand, at any depth (`audit verify`, `bench sgd`), the global options."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _global_options(child, nested=True)
                _spread_global_options(child)


def _command(sub: Subcommands, name: str, func: Callable[[argparse.Namespace], int] | None,
             help_: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help_, description=help_, formatter_class=_FORMAT, epilog=EPILOG)
    if func is not None:  # a command group gets its function from the chosen subcommand
        p.set_defaults(func=func)
    return p


def _session_option(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--session", required=required, metavar="ID", help="session id")


def _all_options(p: argparse.ArgumentParser, kind: str) -> None:
    from .backfill.options import add_engine_options

    p.add_argument("--all", action="store_true", help=f"{kind} every selected session as a job of batches on --engine, "
                   "results in --out DIR (verify.jsonl / replay.jsonl, report.md)")
    p.add_argument("--sessions", metavar="GLOB", help="with --all: only session ids matching this glob")
    add_engine_options(p, out_required=False)


def _view_options(p: argparse.ArgumentParser, action: bool) -> None:
    p.add_argument("--json", action="store_true", help="print the state as JSON")
    p.add_argument("--as-of-round", type=int, metavar="N", help="the state as it stood at the end of round N")
    if action:
        p.add_argument("--action", metavar="NAME", help="print the XML context of this action instead of the state")
        _render_options(p)


def _render_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--budget", metavar="TOKENS|N%",
                   help="token budget: tokens, or a share of --context-window like 60%% (default: the action's budget_tokens)")
    p.add_argument("--context-window", type=int, metavar="TOKENS",
                   help="the model's context window; 15%% of it (the answer's reservation) is never budgeted")
    p.add_argument("--model", metavar="MODEL", help="model whose tokenizer counts (default gpt-4o, o200k_base)")
    p.add_argument("--retrieval", action="store_true",
                   help="bring back older messages that match the latest user turn (shown with reason=\"retrieved\")")


def _format_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=["auto", *FORMATS], default="auto",
                   help="message format of the conversation (default: detected): the project's JSONL, OpenAI chat "
                        "or Responses, Anthropic Messages ({system, messages} or a messages array), LangChain "
                        "messages_to_dict output")


def _add_write_commands(sub: Subcommands) -> None:
    """Commands that process conversations: `demo`, `run` (in memory) and `ingest`."""
    _command(sub, "demo", cmd_demo, "Run the bundled headphone conversation through the ecommerce domain into the "
             "store and show state and contexts.")
    p = _command(sub, "run", cmd_run, "One shot, in memory: process a conversation and print its final state or an "
                 "action's context.")
    p.add_argument("domain", help="domain file path or bundled domain name (ecommerce, …)")
    p.add_argument("conversation", help="JSONL or JSON file (see --format), or - for stdin")
    p.add_argument("--now", metavar="ISO8601", help="clock for messages without a timestamp (relative dates)")
    _format_option(p)
    _view_options(p, action=True)
    p = _command(sub, "ingest", cmd_ingest, "Append a conversation to a session in the store.")
    p.add_argument("domain")
    p.add_argument("conversation")
    _session_option(p)
    p.add_argument("--now", metavar="ISO8601")
    _format_option(p)
    p.add_argument("--append-all", action="store_true",
                   help="append every message even if the file's first messages equal the session's last ones "
                        "(by default they are taken as already ingested by an interrupted run and skipped)")
    p.add_argument("--upgrade", action="store_true",
                   help="move a session processed with an older version of this domain to this version "
                        "(recorded as an edit; replay runs each part under its own version)")


def cmd_forgetting_test(args: argparse.Namespace) -> int:
    from .forgetting import forgetting_test, report

    editor = _editor_for_session(args.session, args.store, allow_plugins=_plugins(args))
    actions = [args.action] if args.action else list(editor.domain.actions)
    out = {a: report(forgetting_test(editor, args.session, a, args.k, args.runs, args.seed)) for a in actions}
    if args.json:
        print(json.dumps(out, ensure_ascii=False, indent=2))
    else:
        for action, r in out.items():
            print(f"# {action}: {'PASS' if r['passed'] else 'FAIL'} ({args.runs} runs, {args.k} fields deleted each)")
            for f in r["fields"]:
                never = "" if f["present"] else "  (never in the session: missing in every run)"
                print(f"  {f['field']:<24} {'must ask' if f['must_ask'] else 'optional':<9} "
                      f"asked {f['asked']}/{f['deleted']} ({f['rate']:.0%}){never}")
    return 0 if all(r["passed"] for r in out.values()) else 1


def _add_read_commands(sub: Subcommands) -> None:
    """Commands that only read a stored session (they never create a store)."""
    p = _command(sub, "state", cmd_state, "Print a stored session's state (as a table, or --json).")
    _session_option(p)
    _view_options(p, action=False)
    p = _command(sub, "render", cmd_render, "Print the XML context of an action for a stored session.")
    _session_option(p)
    p.add_argument("--action", required=True, metavar="NAME")
    p.add_argument("--as-of-round", type=int, metavar="N")
    p.add_argument("--with", dest="together", action="append", metavar="SESSION",
                   help="another domain of the same conversation (its own session in this store): render them all as one "
                        "context, state grouped by domain, each turn once, one budget (repeatable)")
    _render_options(p)
    p = _command(sub, "forgetting-test", cmd_forgetting_test,
                 "Delete K random present fields N times and report how often the context asks for each; exit 1 unless "
                 "every required and critical field is asked for in every run.")
    _session_option(p)
    p.add_argument("--action", metavar="NAME", help="one action (default: every action of the domain)")
    p.add_argument("-k", type=int, default=3, help="fields deleted per run (default 3)")
    p.add_argument("--runs", type=int, default=100, help="number of runs (default 100)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    p = _command(sub, "why", cmd_why, "Explain one field (where its value came from, its full history) or one message "
                 "(m12, as a context's src names it: where an action's context shows it and why, search included).")
    p.add_argument("field", metavar="FIELD|mN")
    _session_option(p)
    p.add_argument("--json", action="store_true")
    p.add_argument("--as-of-round", type=int, metavar="N", help="the field's history as it stood at the end of round N")
    p.add_argument("--action", metavar="NAME", help="with a message: explain its place in this action's context")
    p.add_argument("--budget", metavar="TOKENS|N%", help="with --action: the render's budget (default: the action's)")
    p.add_argument("--retrieval", action="store_true", help="with --action: render with retrieval, as `render --retrieval`")
    p = _command(sub, "erase", cmd_erase, "Erase text and values (right to erasure): a message with the edits it "
                 "caused, every value of a field, a whole session, or every session of --user.")
    p.description = ERASE_HELP
    p.epilog = ("examples:\n"
                "  context-editor erase --session alice-1 --message 3 --actor dpo@acme.com --reason 'GDPR art. 17 #118'\n"
                "  context-editor erase --session alice-1 --field phone --actor dpo --reason 'ticket 7'\n"
                "  context-editor erase --tenant acme --user amy --actor dpo --reason 'PIPL art. 47 #9'   # every session of amy\n"
                "  context-editor audit verify --store prod.db    # then: ok … 1 message, 4 edits erased (on …, by …, …)")
    _session_option(p, required=False)
    p.add_argument("--message", type=int, metavar="N", help="the message index to erase (default: the whole session)")
    p.add_argument("--field", metavar="F", help="erase every value of this field")
    p.add_argument("--actor", required=True, help="who erases (recorded in each tombstone)")
    p.add_argument("--reason", required=True, help="why (recorded in each tombstone), e.g. 'GDPR art. 17 request 2024-118'")
    p.add_argument("--key", metavar="FILE", help="sign each tombstone with this Ed25519 key "
                   "(default $CONTEXT_EDITOR_SIGNING_KEY_FILE, if set)")
    _add_retention_command(sub)
    p = _command(sub, "replay", cmd_replay, "Re-run a session's stored messages through its recorded domain version; "
                 "exit 0 if the edit log is identical.")
    _session_option(p, required=False)
    _all_options(p, "replay")


def _add_audit_commands(sub: Subcommands) -> None:
    p = _command(sub, "audit", None, "Audit a store: verify its hash chains or export a session for auditors.")
    audit_sub = p.add_subparsers(dest="audit_command", required=True, metavar="SUBCOMMAND")
    v = audit_sub.add_parser("verify", help="exit 0 if every hash chain is intact, else 1 and the first broken row",
                             description="Check that no stored message or edit was changed, deleted, reordered or inserted.")
    _session_option(v, required=False)
    v.add_argument("--pubkey", metavar="HEX|FILE", help="trusted Ed25519 public key: every session head must be signed by it")
    v.add_argument("--checkpoint", metavar="FILE",
                   help="checkpoint file (`audit checkpoint --out`): prove no anchored session was deleted, "
                        "truncated or rewritten since its last checkpoint (needs --pubkey)")
    _all_options(v, "verify")
    v.set_defaults(func=cmd_audit_verify)
    c = audit_sub.add_parser("checkpoint", help="sign a Merkle tree head over every session head",
                             description="Verify the store, then sign a Merkle tree head over all session heads and "
                                         "append it to FILE (or print it for an external witness).")
    c.add_argument("--key", metavar="FILE", help="private key file (default $CONTEXT_EDITOR_SIGNING_KEY_FILE)")
    c.add_argument("--out", metavar="FILE", help="append the checkpoint to this file instead of printing it")
    c.set_defaults(func=cmd_audit_checkpoint)
    k = audit_sub.add_parser("keygen", help="write a new Ed25519 signing key", description="Write a new Ed25519 private key "
                             "(64 hex digits, mode 600) and print its public key.")
    k.add_argument("--out", metavar="FILE", required=True)
    k.set_defaults(func=cmd_audit_keygen)
    x = audit_sub.add_parser("export", help="JSONL of a session's messages and edits, with the domain version",
                             description="Write the session as JSONL: a header, then messages and their edits in commit order.")
    _session_option(x)
    x.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    x.set_defaults(func=cmd_audit_export)


def _add_memory_commands(sub: Subcommands) -> None:
    p = _command(sub, "memory", None, "A user's memory across sessions (fields with scope: user).")
    memory_sub = p.add_subparsers(dest="memory_command", required=True, metavar="SUBCOMMAND")
    r = memory_sub.add_parser("rebuild", help="recompute a user's memory from the logs of the user's sessions",
                              description="Replace a user's memory (--user, and --tenant if any) with the events "
                                          "recomputed from the logs of every session of that user: it is derived data.")
    r.add_argument("--json", action="store_true", help="print the rebuilt events")
    r.set_defaults(func=cmd_memory_rebuild)


def cmd_memory_rebuild(args: argparse.Namespace) -> int:
    from .pipeline import rebuild_user_memory
    from .store import open_store

    user, tenant = getattr(args, "user", None), getattr(args, "tenant", None)
    if not user:
        raise Errors.BAD_SESSION_KEY(part="(no --user)")
    from .model import session_key

    session_key("-", tenant, user)  # the same checks as a session key's parts
    events = rebuild_user_memory(open_store(args.store, create=False), tenant or "", user, _plugins(args))
    if args.json:
        print(json.dumps(events, ensure_ascii=False, indent=2))
        return 0
    kinds = {k: sum(1 for e in events if e["event"] == k) for k in ("remember", "use")}
    fields = sorted({e["field"] for e in events})
    print(f"memory of user {user!r}{f' (tenant {tenant!r})' if tenant else ''} rebuilt: {len(events)} events "
          f"({kinds['remember']} remembered, {kinds['use']} used) over fields {', '.join(fields) or '(none)'}")
    return 0


ERASE_HELP = """\
Erase text and values for the right to erasure (GDPR art. 17, PIPL art. 47), keeping the proof.

Each message's text and each edit's value are stored apart from the hashed log, committed
by a salted hash. Erasing removes the text, the value and the salt and keeps the
commitment, so every hash chain still verifies; a tombstone records when, by --actor and
why (--reason), signed with the store's key (--key or $CONTEXT_EDITOR_SIGNING_KEY_FILE).

  --session S --message N   message N (numbered from 0, as `audit export` lists them) and
                            every value read from it
  --session S --field F     every value of field F in session S
  --session S               the whole session
  --user U [--tenant T]     every session of end user U, and U's memory (with --session S:
                            U's session S only; sessions are keyed tenant/user/session)

The value a later message corrected stays; what depended only on the erased text reads
[erased] in state, render and why; `replay` names the edits it can no longer re-derive.
The session's derived data (snapshots, summaries, search index) is rebuilt from the log.
"""


RETENTION_HELP = """\
Erase what a domain keeps no longer. A domain declares how long it keeps messages:

  retention: {messages: 180d}     # in the domain file, days

`retention apply` erases every message older than that (its text, and the values and
text of the edits it caused) the way `erase` does: each row keeps its salted commitment
and gets a tombstone (when, by whom, which policy), signed with the store's key
(--key or $CONTEXT_EDITOR_SIGNING_KEY_FILE), so `audit verify` still passes and
reports what was erased. Run it from cron; a second run erases nothing twice.

The policy is that of each session's domain version as stored, or of the domain files
given with --domain (today's policy, applied to older sessions of that domain too).
"""


def _add_retention_command(sub: Subcommands) -> None:
    p = _command(sub, "retention", None, "Apply the domains' retention periods (`retention: {messages: 180d}`).")
    retention_sub = p.add_subparsers(dest="retention_command", required=True, metavar="SUBCOMMAND")
    a = retention_sub.add_parser(
        "apply", help="erase every message older than its domain's retention period (signed tombstones stay)",
        description=RETENTION_HELP, formatter_class=_FORMAT,
        epilog="examples:\n  context-editor retention apply --store prod.db --dry-run\n"
               "  context-editor retention apply --store prod.db --key retention.key\n"
               "  context-editor retention apply --domain travel.yaml --now 2024-07-01 --store prod.db")
    a.add_argument("--now", metavar="TIME", help="the time ages are measured from (ISO 8601; default: now, UTC)")
    a.add_argument("--dry-run", action="store_true", help="list what would be erased; change nothing")
    a.add_argument("--domain", action="append", metavar="FILE|NAME",
                   help="take the policy from this domain (repeatable) instead of each session's stored version")
    a.add_argument("--actor", default="retention", help="recorded in each tombstone (default: retention)")
    a.add_argument("--key", metavar="FILE", help="sign each tombstone with this Ed25519 key "
                   "(default $CONTEXT_EDITOR_SIGNING_KEY_FILE, if set)")
    a.set_defaults(func=cmd_retention_apply)


def _add_registered_commands(sub: Any, argv: list[str]) -> None:
    """Commands from the `context_editor.commands` entry-point group (this package's `import`,
    `bench`, `serve`, `keys`, `train`, or a third party's). One is loaded only when the command
    line names it, so the other commands never import the benchmark package or the service; this
    package's others are listed with their help (`registry.OWN_COMMANDS`). The installed
    distributions are scanned for the group only when the command line names a command that
    is neither built in nor this package's (a third party's, or a typo: its error lists them all),
    so `--help` and every built-in command start without reading any package metadata."""
    known = set(sub.choices) | set(registry.OWN_COMMANDS)
    words = [a for a in argv if not a.startswith("-")]
    names = registry.commands.names() if words and not known.intersection(words) else list(registry.OWN_COMMANDS)
    for name in names:
        if name in argv:
            registry.commands.get(name)(sub)
        else:
            sub.add_parser(name, help=registry.OWN_COMMANDS.get(name, f"(see `context-editor {name} --help`)"),
                           add_help=False)


def _add_domain_commands(sub: Subcommands) -> None:
    """Commands a domain author uses: `lint` and `test`."""
    p = _command(sub, "lint", cmd_lint, "Check a domain file and report every problem (errors and warnings) with its "
                 "line and a fix.")
    p.add_argument("domain")
    p.add_argument("--strict", action="store_true", help="warnings count as errors (exit 1)")
    p.add_argument("--timing", action="store_true",
                   help="also time every rule the domain uses on adversarial text and refuse one that is not linear-time")
    p = _command(sub, "test", cmd_test, "Run a domain's test conversations (DIR/*.yaml, docs/testing-domains.md): "
                 "per-field precision and recall, every miss with its why; exit 1 if any expectation fails.")
    p.add_argument("domain", help="domain file path or bundled domain name")
    p.add_argument("directory", help="directory of test case files (one conversation per .yaml)")
    p.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report (for CI systems)")
    p.add_argument("--compare", metavar="OLD.yaml", help="also run an older version of the domain and show what changed")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="context-editor", formatter_class=_FORMAT, epilog=EPILOG,
        description="Turn a conversation into provenance-tagged state and render the minimal XML context an action needs.")
    _global_options(parser, nested=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_write_commands(sub)
    _add_read_commands(sub)
    _add_audit_commands(sub)
    _add_memory_commands(sub)
    _add_domain_commands(sub)
    _add_registered_commands(sub, sys.argv[1:] if argv is None else argv)
    _spread_global_options(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser(argv).parse_args(argv)
    if hasattr(args, "argv"):  # commands that record how they were run (a model card's rebuild command)
        args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if getattr(args, "session", None):
            from .model import session_key

            args.session = session_key(args.session, getattr(args, "tenant", None), getattr(args, "user", None))
        return int(args.func(args))
    except ContextEditorError as exc:
        print(f"context-editor: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


__all__ = ["main", "build_parser"]
