"""ContextEditor: the public API wiring Extract -> Transform -> Validate -> commit -> Inject.

One message is processed atomically: every edit it causes is computed first, sealed into the
session's hash chain and committed with the raw message in one store transaction. The live
state of a session is cached and advanced by folding the committed edits, so the work per
message does not grow with the length of the conversation.

Several editors (processes, service workers) may share one store. Every read checks the cached
state against the store's session head (message and edit counts) and folds in what others
appended; an append that loses a race is recomputed on the new head and retried. The cache
holds at most `cache_sessions` sessions, least recently used first out.
"""

from __future__ import annotations

import logging
import random
import time
from collections import OrderedDict
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, TypeGuard

from . import registry
from .conversation import check_value, normalise_message
from .domain import ActionSpec, Domain, domain_from_source, load_domain
from .echo import CONTEXT_LOOP_DETECTED, mask_echoes
from .errors import Errors, StoreConflictError
from .extract import Extractor, Prior
from .lang.lexicon import using
from .inject import RenderedContext, Renderer
from .inject.render import RenderPart, render_many
from .inject.budget import Window
from .inject import compact
from .inject.tokens import count_tokens
from .llm import Answers, distil
from .llm.distil import MAX_CHARS
from .memory import SummaryZone
from .memory import explain, open_stage, past, retrieval
from .memory.retrieval import Embedder, VectorIndex
from .memory.summary import ANCHORS_KEY, KIND as SUMMARY_KIND
from .memory.user import Remembered, UserMemory, memory_events, recall_edit, recalled
from .model import ERASED, Candidate, Edit, Message, SearchFilter, SnapshotFormatError, State, session_owner
from .store import MemoryStore, SessionInfo, Store, open_store
from .store.base import UNSEALED, Usage, sealed, unsealed
from .transform import PhaseMachine, edit, expiry_edits, field_edits
from .transform.carry import Carried, carried_from, carry_edits, offered
from .validate import FieldValidator, violations

log = logging.getLogger(__name__)
COMPACTION_RATIO_OUT_OF_BAND = "COMPACTION_RATIO_OUT_OF_BAND"
DEFAULT_BAND = (0.0, 1.0)  # a context larger than the raw window it stands for is out of band
MIN_RATIO_SOURCE = 400  # below this many raw tokens the ratio measures the XML's frame, not compaction
DEFAULT_CACHE_SESSIONS = 1024
DEFAULT_HISTORY_CAP = 64  # history entries per field a cached state holds in memory (the log holds all)
MAX_OPEN_ROUNDS = 2  # an offer the user only asks about stays open this many rounds after it was made
DEFAULT_BATCH = 200  # messages per store transaction in `ingest_many`
SNAPSHOT_KIND = "snapshot"  # the session's folded state every SNAPSHOT_EVERY messages (derived data)
SNAPSHOT_EVERY = 256  # a reopened session folds at most this many messages' edits and reads their tail
RENDERS_KEPT = 16  # per cached session: its latest render of each action (budget, model), repeated from memory
TAIL_SLACK_ROUNDS = 20  # rounds a session's cached tail reaches back before the latest window (other actions' windows)
UPGRADE = "DOMAIN_UPGRADE"  # the session moves to the new version; values already set stay as they are
REDERIVE = "DOMAIN_REDERIVE"  # the same, and its state becomes what the new version makes of all its messages
GIVEN_SOURCES = ("user_memory", "carry")  # values a session is given from outside its own messages: inputs to a replay
APPEND_ATTEMPTS = 32  # a writer losing this many races in a row on one session gives up with the conflict


def stored_domain(store: Store, info: SessionInfo, allow_plugins: bool = False) -> Domain:
    """The domain version a session was processed with, as stored beside its log (for replay and
    for reading a session with the rules that made it)."""
    source = store.get_domain(info.domain_version)
    if source is None:
        raise Errors.DOMAIN_VERSION_MISSING(session=info.session, domain=info.domain, version=info.domain_version,
                                            store=store.url)
    return domain_from_source(source, f"<stored {info.domain} {info.domain_version}>", allow_plugins)


def rebuild_user_memory(store: Store, tenant: str, user: str, allow_plugins: bool = False) -> list[dict[str, Any]]:
    """Recompute one user's memory from the logs of the user's sessions (every domain they were
    in, each read with its stored domain version) and replace what the store holds, atomically.
    The events come out as the sessions appended them: per message in time order (ties: session
    key, message index), `remember` for each accepted `scope: user` value, `use` for each value a
    session was given. Returns the events written."""
    prefix = f"{tenant}/{user}/" if tenant else f"{user}/"
    keys = [k for k in store.session_keys(after=prefix, upto=prefix[:-1] + chr(ord("/") + 1))
            if k.startswith(prefix) and session_owner(k) == (tenant, user)]
    batches: list[tuple[str, str, int, list[dict[str, Any]]]] = []
    for key in keys:
        domain = stored_domain(store, store.require_session(key), allow_plugins)
        if not any(f.scope == "user" for f in domain.fields.values()):
            continue
        by_message: dict[int, list[Edit]] = {}
        for e in store.edits(key):
            by_message.setdefault(e.message_index, []).append(e)
        for msg in store.messages(key):
            # An erased value reads as ERASED: erasure forgot its event, a rebuild must not bring it back.
            events = [ev for ev in memory_events(domain, msg, by_message.get(msg.index, [])) if ev["value"] != ERASED]
            when = msg.time()
            if events:  # ordered on UTC time: two sessions may give their times in different offsets
                batches.append((when.astimezone(timezone.utc).isoformat() if when and when.tzinfo else msg.timestamp or "",
                                key, msg.index, events))
    events = [ev for *_, batch in sorted(batches, key=lambda b: b[:3]) for ev in batch]
    store.replace_user_memory(tenant, user, events)
    return events


def rerun(domain: Domain, session: str, messages: Iterable[Message], editor: ContextEditor | None = None,
          recorded: Iterable[Edit] = ()) -> State:
    """The state `domain` makes of a session's messages, computed in memory (nothing is stored).
    `editor`: one over a MemoryStore built with `recalled=()` (a replay: what a session is given
    comes from its own recorded log, never from another session's rerun) to reuse for many
    sessions (building one costs milliseconds).
    `recorded`: the session's edit log: the values it was given from outside its messages (its
    user's memory, carries from other domains) are given again, as a replay does; without them a
    re-derived state would drop them."""
    if editor is None:
        editor = ContextEditor(domain, MemoryStore(), cache_sessions=1, recalled=())
    editor._give(recorded)
    for m in messages:
        editor.add(session, m)
    return editor.state(session)


def rederived(state: State, target: State, msg: Message, domain: Domain) -> list[Edit]:
    """Edits (unsealed, on `msg`) that take `state` to `target`'s values and phase: a `set` with the
    provenance the new version found, a `clear` for a value it does not find, a `transition`."""
    out = []
    for name in domain.fields:  # the domain's field order: deterministic, as replay needs
        now, then = state.get(name), target.get(name)
        if now != then:
            fs = target.fields.get(name)
            out.append(edit(msg, domain, "set", name, now, then, "machine", reason=REDERIVE,
                            provenance=fs.provenance if fs else None) if then is not None else
                       edit(msg, domain, "clear", name, now, None, "machine", reason=REDERIVE))
    if target.phase != state.phase:
        out.append(edit(msg, domain, "transition", None, state.phase, target.phase, "machine", reason=REDERIVE))
    return out


class _Chain:
    """Seals edits one after another onto a session's hash chain."""

    def __init__(self, state: State, salts: Callable[[], str] | None):
        self.seq, self.prev, self.salts = state.last_seq, state.last_hash, salts

    def seal(self, e: Edit) -> Edit:
        self.seq += 1
        sealed = e.sealed(self.seq, self.prev, (self.salts(), self.salts()) if self.salts else None)
        self.prev = sealed.hash
        return sealed


def _reaches(tail: tuple[int, list[Message]] | None, round_: int, state: State) -> TypeGuard[tuple[int, list[Message]]]:
    """Whether a kept tail (first round, messages) holds every message of rounds >= `round_` up to
    the state's last one: `_window`'s tail is read again otherwise, the summary zone reads the store."""
    return tail is not None and tail[0] <= round_ and bool(tail[1]) and tail[1][-1].index == state.message_index


class ContextEditor:
    """Turns conversations into provenance-tagged state and renders per-action contexts.

    >>> editor = ContextEditor("ecommerce", store="memory://")
    >>> state = editor.ingest("s1", [{"role": "user", "content": "预算2000以内"}], now="2024-05-01T10:00:00")
    >>> state.get("budget_max")
    {'amount': 2000, 'currency': 'CNY'}
    """

    def __init__(self, domain: Domain | str | Path, store: Store | str | None = None, model: str | None = None,
                 allow_plugins: bool = False, upgrade: bool | str = False, system: str | None = None, context_window: int | None = None,
                 output_reserve: float = 0.15, budget: int | str | None = None, price_per_mtok: float | None = None,
                 scorer: Any = None, summarizer: Any = None, compaction_band: tuple[float, float] | None = DEFAULT_BAND,
                 cache_sessions: int = DEFAULT_CACHE_SESSIONS, retrieval: bool = False, embedder: Embedder | None = None,
                 recalled: Iterable[Edit] | None = None, salts: Callable[[], str] | None = None,
                 history_cap: int | None = DEFAULT_HISTORY_CAP):
        """`upgrade`: a session processed with another version of this domain moves to this version
        (recorded as an `upgrade` edit with the next message); without it, adding to it is refused.
        `upgrade=REDERIVE` (`backfill --apply`) also sets, with that message, every field to what this
        version makes of the session's stored messages (replay re-derives it the same way).
        `system`: a system prompt rendered first in every context. `context_window`: the model's
        window in tokens; a budget may then be a share of it ("60%"), and no budget ever eats into
        `output_reserve` (a share of the window, or tokens), kept for the answer. `budget`: the
        default for every render (else each action's `budget_tokens`). `price_per_mtok`: the model's
        input price per million tokens, for the session's cost account (`usage`). `scorer`: how older
        messages are scored 1-5 (a registered name such as "relevance", or any Scorer, e.g.
        `llm.ChatScorer`); the articles' thresholds apply to it. A scorer with `answers` (llm.Answers)
        has every answer a render used recorded in the session's edit log, so a re-render reuses them.
        `summarizer`: how a `class: trace` field becomes one line (a registered name or any Summarizer,
        e.g. `llm.ChatSummarizer`), checked by rules (llm.distil; a refused line gives the extractive
        line, as does no summarizer). `compaction_band`: (low, high) for the compaction ratio (context
        tokens / raw window tokens); a render outside it carries a COMPACTION_RATIO_OUT_OF_BAND
        alert (`RenderedContext.alerts`), once the raw window has MIN_RATIO_SOURCE tokens; None: unchecked.
        `cache_sessions`: how many sessions' states are kept folded (least recently used out).
        `history_cap`: how many of each field's newest history entries a folded state holds in
        memory (None: all); what renders read of the older ones stays in compact form, and the full
        history is read from the store (`why`, `history_state`).
        `recalled`: the `user_memory` edits of a recorded log, given to new sessions instead of what
        the store's user memory holds now, and nothing remembered (audit replay).
        `retrieval`: index every message for search (`search`), and let each render bring back the
        messages older than its window that match the action and the latest user turn (shown in
        <history> with reason="retrieved"). `embedder`: an `memory.retrieval.Embedder` that re-ranks
        the lexical hits by cosine similarity (`memory.minilm.MiniLMEmbedder` with the [embed] extra).
        `salts`: where the salt of each message's and edit's commitment comes from (erasure keeps
        the commitment); default 128 random bits each. Only a test that pins hashes passes its own."""
        self.domain = domain if isinstance(domain, Domain) else load_domain(domain, allow_plugins=allow_plugins)
        self.upgrade = upgrade
        self._bound: dict[str, str | None] = {}  # session -> the version it moves from (None: already on ours)
        self.store = store if isinstance(store, Store) else open_store(store)
        self.extractor = Extractor.shared(self.domain)  # compiled once per domain version
        self.validator = FieldValidator(self.domain)
        self.machine = PhaseMachine(self.domain) if self.domain.machine else None
        self.window = Window(context_window, output_reserve) if context_window else None
        self.scorer = registry.scorers.get(scorer) if isinstance(scorer, str) else scorer
        self.system = system
        self.summarizer = registry.summarizers.get(summarizer) if isinstance(summarizer, str) else summarizer
        self.compaction_band = compaction_band
        self.renderer = self._new_renderer(model)
        self._renderers: dict[str, Renderer] = {}  # model -> renderer counting with that model's tokenizer
        self.default_budget, self.price_per_mtok = budget, price_per_mtok
        self._states: OrderedDict[str, State] = OrderedDict()
        self._erased: dict[str, int] = {}  # per cached session: the store's erasure count when it was read
        self._marks: dict[str, tuple[int, ...]] = {}  # per cached session: the store's `data_version` its head was read under
        self._cache_sessions = max(cache_sessions, 1)
        self.history_cap = None if history_cap is None else max(history_cap, 1)
        self._zones: dict[str, SummaryZone] = {}
        self._pasts: dict[str, dict[str, tuple[int, int, int]]] = {}  # session -> action -> the settled past stored last
        self._opens: dict[str, tuple[int, int]] = {}  # session -> its open stage as stored (number, last index): `_keep_open`
        self._rendered: dict[str, dict[Any, tuple[tuple[Any, ...], RenderedContext]]] = {}  # session -> its latest renders
        self._warned: dict[str, set[str]] = {}  # session -> actions whose out-of-band ratio was logged (`_check_ratio`)
        self._tails: dict[str, tuple[int, list[Message]]] = {}  # session -> (first round, its messages since): `_window`
        # The edits the last fold from a snapshot read (its last edit first), with its session and
        # state: a stored past anchored among them checks its spans without reading them again.
        self._replayed: tuple[str, State, list[Edit]] | None = None
        self._priors: dict[str, Prior] = {}  # session -> what its last assistant message left open
        self._open_offers: dict[str, Prior] = {}  # session -> an offer the user's last message only asked about
        # session -> the messages since its last edit, read by `_live`, whose priors are worked out
        # when the next message is added (`_read_priors`): a render needs none of them.
        self._unread: dict[str, list[Message]] = {}
        self._salts = salts
        # In a replay, the values the recorded log was given from outside it: a user's memory, carries.
        self._recalled: dict[tuple[str, int], list[Edit]] | None = None
        if recalled is not None:
            self._recalled = {}
            self._give(recalled)
        self._user_scoped = any(f.scope == "user" for f in self.domain.fields.values())
        self.retrieval, self.embedder = retrieval or embedder is not None, embedder
        self._indexed: set[str] = set()  # sessions whose search index has caught up with the log in this process
        self._vectors: dict[str, VectorIndex] = {}  # sessions' message vectors (with an embedder)
        self.store.put_domain(self.domain.version_hash, self.domain.name, self.domain.source)

    # ------------------------------------------------------------------ ingest
    def ingest(self, session: str, messages: Iterable[dict[str, Any] | Message], now: datetime | str | None = None,
               idempotent: bool = False) -> State:
        """Process messages in order; returns the session's state after the last one.
        `idempotent`: a message whose `id` the session already holds is skipped (a retried request)."""
        self._bind(session)  # a session of another domain or version is refused even with nothing to add
        for m in messages:
            self.add(session, m, now=now, idempotent=idempotent)
        return self.state(session)

    def ingest_many(self, items: Iterable[tuple[str, dict[str, Any] | Message]], now: datetime | str | None = None,
                    batch_size: int = DEFAULT_BATCH) -> int:
        """A bulk load: (session, message) pairs in order, committed `batch_size` messages per
        store transaction (one commit for many messages). Each message is still atomic, and a
        reader sees a batch whole or not at all. If a message fails, its batch is rolled back
        (whole messages only) and the error raised; the batches before it stay committed.
        Returns the number of messages committed."""
        done = 0
        pending: list[tuple[str, dict[str, Any] | Message]] = []

        def flush() -> None:
            nonlocal done
            touched = {s for s, _ in pending}
            for deferred in (True, False):
                try:
                    with self.store.batch(deferred=deferred):
                        for session, message in pending:
                            self._bind(session)
                            self.add(session, message, now=now)
                    break
                except BaseException as exc:
                    for s in touched:  # the cached folds and memory may hold what was rolled back
                        self._forget(s)
                    # Another writer moved a session while the batch's appends were held back: the
                    # batch is redone, each append checked as it is made (a lost race retried).
                    if not (deferred and isinstance(exc, StoreConflictError)):
                        raise
            done += len(pending)
            pending.clear()

        for item in items:
            pending.append(item)
            if len(pending) >= max(batch_size, 1):
                flush()
        if pending:
            flush()
        return done

    def forget(self, session: str) -> None:
        """Drop everything cached about a session (after `erase`: the cache may hold erased text);
        the next use reads it from the store."""
        self._forget(session)

    def _forget(self, session: str) -> None:
        """Drop everything cached about a session: the next use reads it from the store."""
        self._states.pop(session, None)
        self._erased.pop(session, None)
        self._marks.pop(session, None)
        self._bound.pop(session, None)
        self._zones.pop(session, None)
        self._pasts.pop(session, None)
        self._opens.pop(session, None)
        self._tails.pop(session, None)
        self._rendered.pop(session, None)
        self._warned.pop(session, None)
        self._priors.pop(session, None)
        self._open_offers.pop(session, None)
        self._unread.pop(session, None)
        if self._replayed is not None and self._replayed[0] == session:
            self._replayed = None
        self._indexed.discard(session)
        self._vectors.pop(session, None)

    def add(self, session: str, message: dict[str, Any] | Message, now: datetime | str | None = None,
            idempotent: bool = False, carried: Iterable[Carried] = ()) -> list[Edit]:
        """Process one message atomically; returns the edits it committed (none if `idempotent`
        and a message with its id is already stored). `carried`: what the other domains of the
        conversation hold for this domain's `carry:` fields (`add_together` passes it)."""
        carried = list(carried)
        check_value(session, "session id")
        raw = normalise_message(message.to_dict() if isinstance(message, Message) else message)
        if idempotent and self._stored(session, raw):
            return []
        for attempt in range(APPEND_ATTEMPTS):
            upgrade_from = self._bind(session)
            # A cached fold is used without asking the store for its head: the append itself
            # refuses a message computed on a head another writer has moved (the retry below).
            state = self._cached(session) or self._live(session)
            self._read_priors(session)
            msg = self._stamp(session, raw, state, now)
            try:
                with using(self.domain.lexicon):  # the words this domain version was made with
                    edits = self._edits_for(state, msg, upgrade_from, carried)
                self.store.append(self.domain.name, self.domain.version_hash, msg, edits)
            except StoreConflictError:
                # Another writer got there first: the cached fold is ahead of the store. Re-read the
                # head and recompute this message on it (unless the winner was this very message).
                self._states.pop(session, None)
                self._bound.pop(session, None)
                if attempt == APPEND_ATTEMPTS - 1:
                    raise
                if idempotent and self._stored(session, raw):
                    return []
                # Writers that keep colliding in step would keep colliding: a short random pause
                # breaks the symmetry (it changes only who goes first, never what is computed).
                time.sleep(random.uniform(0, 0.002 * (attempt + 1)))
                continue
            except BaseException:
                self._states.pop(session, None)  # the cached fold may be ahead of the store: rebuild on next use
                self._bound.pop(session, None)
                raise
            state.round, state.message_index, state.last_message_hash = msg.round, msg.index, msg.hash
            self._took_own_write(session)
            self._bound[session] = None
            if (msg.index + 1) % SNAPSHOT_EVERY == 0:
                self._put_sealed(session, SNAPSHOT_KIND, 0, state.snapshot())
            self._summarize(session, msg)
            tail = self._tails.get(session)
            if tail is not None and tail[1] and tail[1][-1].index == msg.index - 1:
                tail[1].append(msg)
            else:
                self._tails.pop(session, None)
            if self.retrieval:
                self._index(session, msg, edits)
            self._remember_user(msg, edits)
            return edits
        raise AssertionError("unreachable")  # the loop returns or raises

    def _stored(self, session: str, raw: dict[str, Any]) -> bool:
        return bool(raw.get("id")) and bool(self.store.known_message_ids(session, [raw["id"]]))

    def set_task_goal(self, session: str, goal: str, now: datetime | str | None = None) -> None:
        """Anchor the task's goal: shown after the system prompt in every context of the session.
        Kept in the log as a system message named `goal` (so replay and `as_of_round` see it)."""
        self.add(session, {"role": "system", "name": "goal", "content": goal}, now=now)

    def set_subtask(self, session: str, subtask: str, now: datetime | str | None = None) -> None:
        """Anchor the current subtask (replaces the previous one), shown after the goal."""
        self.add(session, {"role": "system", "name": "subtask", "content": subtask}, now=now)

    # ------------------------------------------------------------------ a user's memory across sessions
    def _recall(self, msg: Message) -> list[tuple[Remembered, float]]:
        """The remembered values (and weights) a session's first message starts from: its user's
        memory at the message's time, or in a replay the values the recorded log was given."""
        if self._recalled is not None:
            return [recalled(e) for e in self._given(msg, "user_memory")]
        owner = session_owner(msg.session)
        now = msg.time()
        if owner is None or now is None or not self._user_scoped or msg.index != 0:
            return []
        return UserMemory.fold(self.domain, self.store.user_memory(*owner)).recall(now)

    def _carried(self, msg: Message, given: list[Carried]) -> list[Carried]:
        """What other domains offer this message: as given, or in a replay what the recorded log took."""
        if self._recalled is None:
            return given
        return [carried_from(e) for e in self._given(msg, "carry")]

    def _give(self, recorded: Iterable[Edit]) -> None:
        """In a replay (an editor built with `recalled`), add the values a recorded log was given
        from outside its messages (the other edits are left out): any session's, any number of times."""
        assert self._recalled is not None, "a live editor takes its users' memory and carries as they happen"
        for e in recorded:
            if e.source in GIVEN_SOURCES:
                self._recalled.setdefault((e.session, e.message_index), []).append(e)

    def _given(self, msg: Message, source: str) -> list[Edit]:
        """In a replay, the recorded edits of `source` that `msg` was given."""
        assert self._recalled is not None
        return [e for e in self._recalled.get((msg.session, msg.index), ()) if e.source == source]

    def _remember_user(self, msg: Message, edits: list[Edit]) -> None:
        """Add what a committed message said (or was given) to its user's memory. Written after the
        message's transaction: the events can be rebuilt from the user's session logs."""
        owner = session_owner(msg.session)
        if owner is None or self._recalled is not None or not self._user_scoped:
            return
        events = memory_events(self.domain, msg, edits)
        if events:
            self.store.append_user_memory(*owner, events)

    def user_memory(self, tenant: str, user: str) -> UserMemory:
        """One user's memory (the fold of its events) as this domain sees it."""
        return UserMemory.fold(self.domain, self.store.user_memory(tenant, user))

    # ------------------------------------------------------------------ memory (derived data)
    def _summarize(self, session: str, msg: Message) -> None:
        """Fold a committed message into the session's summary zone and store what changed."""
        zone = self._zone(session, latest=True)
        zone.add(msg)
        for key, body in zone.bodies(zone.settled()).items():
            self._put_sealed(session, SUMMARY_KIND, key, body)

    def _zone(self, session: str, latest: bool = False) -> SummaryZone:
        """The session's summary zone, read from the store the first time and folded on. `latest`:
        its latest stages are enough (a render that goes on from a stored past, or an append)."""
        zone = self._zones.get(session)
        if zone is not None and zone.partial and not latest:
            zone = None
        if zone is None:
            zone = self._latest_zone(session) if latest else None
            if zone is None:
                zone = SummaryZone.from_bodies(self.domain, self._read_sealed(session, SUMMARY_KIND)[0])
            messages = self._messages_since(session, zone.resume_round())
            self._resume_open(session, zone, messages)
            for m in messages:
                zone.add(m)
            for key, body in zone.bodies(zone.settled()).items():
                self._put_sealed(session, SUMMARY_KIND, key, body)
            self._zones[session] = zone
        return zone

    def _resume_open(self, session: str, zone: SummaryZone, messages: list[Message]) -> None:
        """Take the zone's open stage as a render stored it, if its row holds (`memory.open_stage`):
        then only the messages after it are folded in."""
        body = self._read_sealed(session, open_stage.KIND, (0, 0))[0].get(0)
        if body is None:
            return
        stage, why, level = open_stage.resume(self.domain, body, zone, messages)
        if stage is None:
            self._unused(session, open_stage.KIND, why, level)
        else:
            self._opens[session] = (stage.number, stage.last_index)

    def _keep_open(self, session: str) -> None:
        """Store the zone's open stage once it holds `open_stage.LAG` messages more than the row
        stored (or read) last, so a reopen folds at most LAG - 1 of them again."""
        zone, tail = self._zones.get(session), self._tails.get(session)
        if zone is None or not zone.stages or tail is None:
            return
        stage = zone.stages[max(zone.stages)]
        number, last_index = self._opens.get(session, (-1, -1))
        if stage.last_index - (last_index if number == stage.number else stage.before[1]) < open_stage.LAG:
            return
        last = next((m for m in reversed(tail[1]) if m.index == stage.last_index), None)
        if last is not None:
            self._put_sealed(session, open_stage.KIND, 0, open_stage.row(self.domain, stage, last))
            self._opens[session] = (stage.number, stage.last_index)

    def _latest_zone(self, session: str) -> SummaryZone | None:
        """The zone's anchors and latest stages only, from the first stage any action's stored past
        needs on (`memory.past`); None when the whole zone is needed or the stored stages do not
        tell what comes before them (stored by an older version)."""
        first = past.first_stage(self.domain, (self._cached(session) or self._live(session)).round)
        if first is None:
            return None
        bodies, whole = self._read_sealed(session, SUMMARY_KIND, (first, 2**62))
        if not whole or first not in bodies or "before" not in bodies[first]:
            return None  # (a row not as written: the whole zone is read, and made again from the log from that row on)
        anchors, whole = self._read_sealed(session, SUMMARY_KIND, (ANCHORS_KEY, ANCHORS_KEY))
        return SummaryZone.from_bodies(self.domain, {**anchors, **bodies}, latest=True) if whole else None

    def _from_past(self, session: str, action: str, part: RenderPart) -> bool:
        """Whether a render of `action` on this part's latest-stages zone can go on from a settled
        past: the one this process kept in memory, or the one stored, if it belongs to this view."""
        spec = self.domain.actions[action]
        vocabulary, hidden, absorbed, _ = part.renderer.state_view(part.state, spec)
        since = self._since(part.state, action)
        view = part.renderer.zone_key(part.state, spec)
        if compact.past_ready(part.summary, since, vocabulary, absorbed, hidden, view):
            return True
        key = past.key_of(self.domain, action)
        body = self._read_sealed(session, past.KIND, (key, key))[0].get(key)
        if body is None:
            return False  # none stored (or not as written): read and score the whole zone
        reads = past.reads_of(body)
        if reads is None:
            self._unused(session, past.KIND, "its reads do not parse (not a row this code wrote)")
            return False
        zone, before = self._zone(session, latest=True), compact.past_before(since)
        at = past.anchor(body)
        # Its read messages' spans as stored, if no edit since gave them one (O(edits since it was
        # stored)); else taken again from this state (O(messages read)), and the row stored anew.
        spans = past.kept_spans(body, reads, self._edits_from(session, part.state, at[0])) if at is not None else None
        fingerprint = past.fingerprint(self.domain, action, zone, before, reads, absorbed, hidden, spans)
        if spans is not None and fingerprint != body.get("fingerprint"):
            spans = None  # the stored digest may be the spoiled part: take it again before calling the row stale
            fingerprint = past.fingerprint(self.domain, action, zone, before, reads, absorbed, hidden)
        if fingerprint != body.get("fingerprint"):
            self._unused(session, past.KIND, "it was scored for another state or domain version", logging.INFO)
            return False
        if not compact.seed_past(part.summary, since, vocabulary, absorbed, hidden, body, reads):
            self._unused(session, past.KIND, "its groups do not parse (not a row this code wrote)")
            return False
        kept = compact.past_of(part.summary, vocabulary, absorbed, hidden, view)
        if kept is not None and spans is not None:  # (else `_keep_past` stores it again, anchored here)
            self._pasts.setdefault(session, {})[action] = (id(kept), kept.before, kept.count)
        return True

    def _edits_from(self, session: str, state: State, seq: int) -> list[Edit]:
        """The edits from `seq` up to the state's last one (none when that is far: reading them
        would cost more than what they spare)."""
        if not 0 <= seq <= state.last_seq or state.last_seq - seq > past.ANCHOR_EDITS:
            return []
        replayed = self._replayed
        if replayed is not None and replayed[0] == session and replayed[1] is state and replayed[2][0].seq <= seq \
                and replayed[2][-1].seq == state.last_seq:  # (a reopen's fold read them: not again)
            return [e for e in replayed[2] if e.seq >= seq]
        return [e for e in self.store.edits(session, since_seq=seq - 1) if e.seq <= state.last_seq]

    def _put_sealed(self, session: str, kind: str, key: int, body: dict[str, Any]) -> None:
        """Store a derived row that a reopen takes instead of the log (a snapshot, a summary stage),
        sealed: a digest of its text, checked over the bytes read back (`_read_sealed`)."""
        self.store.put_derived(session, kind, key, sealed(body, session, kind, str(key), key=self.store.seal_key))

    def _read_sealed(self, session: str, kind: str, keys: tuple[int, int] | None = None) -> tuple[dict[int, dict[str, Any]], bool]:
        """The stored rows of `kind` (in key order) up to the first whose seal does not hold, and
        whether every row held. That one is logged and not used: it and the rows after it are made
        again from the log (a summary stage follows from the ones before it) and stored anew."""
        rows: dict[int, dict[str, Any]] = {}
        for key, data in self.store.raw_derived(session, kind, keys).items():
            body, why = unsealed(data, session, kind, str(key), key=self.store.seal_key)
            if body is None:
                self._unused(session, kind, f"row {key}: {why}", logging.INFO if why == UNSEALED else logging.WARNING)
                return rows, False
            rows[key] = body
        return rows, True

    def _unused(self, session: str, kind: str, why: str, level: int = logging.WARNING) -> None:
        """Log a stored derived row that was not used (it is recomputed from the log)."""
        message, fix = Errors.DERIVED_UNUSED.text(kind=kind, session=session, why=why)
        log.log(level, "[%s] %s (fix: %s)", Errors.DERIVED_UNUSED.code, message, fix)

    def _keep_past(self, session: str, action: str, part: RenderPart) -> None:
        """Store the settled past this render of `action` used, if it is new and long (`memory.past`)."""
        spec = self.domain.actions[action]
        vocabulary, hidden, absorbed, _ = part.renderer.state_view(part.state, spec)
        kept = compact.past_of(part.summary, vocabulary, absorbed, hidden, part.renderer.zone_key(part.state, spec))
        if kept is None or kept.count < past.MIN_LINES:
            return
        mark = (id(kept), kept.before, kept.count)
        stored = self._pasts.setdefault(session, {})
        if stored.get(action) == mark:
            return
        spans = compact.past_spans(absorbed, hidden, kept.reads)
        fingerprint = past.fingerprint(self.domain, action, self._zone(session, latest=True), kept.before, kept.reads,
                                       absorbed, hidden, spans)
        if fingerprint is not None:
            self._put_sealed(session, past.KIND, past.key_of(self.domain, action), past.row(part.state, fingerprint, spans, kept))
        stored[action] = mark

    def rebuild_memory(self, session: str) -> SummaryZone:
        """Drop the session's derived memory (summary zone, search index) and recompute it from the raw log."""
        self.store.drop_derived(session, SUMMARY_KIND)
        self.store.drop_derived(session, past.KIND)
        self.store.drop_derived(session, open_stage.KIND)
        self._zones.pop(session, None)
        self._pasts.pop(session, None)
        self._opens.pop(session, None)
        self.store.drop_search(session)
        self._indexed.discard(session)
        self.store.drop_derived(session, VectorIndex.KIND)
        self._vectors.pop(session, None)
        if self.retrieval:
            self._catch_up_index(session)
        if self.embedder is not None:
            self._vector_index(session)
        return self._zone(session)

    def _index(self, session: str, msg: Message, edits: list[Edit]) -> None:
        """Add a committed message to the session's search index (after catching up on the log)."""
        if session not in self._indexed:
            self._catch_up_index(session)  # indexes this message too
            return
        doc = retrieval.document(self.domain, msg, edits)
        if doc is not None:
            self.store.index_search(session, [doc])
        if self.embedder is not None:
            self._vector_index(session)  # catches up on the log, this message included

    def _vector_index(self, session: str) -> VectorIndex:
        """The session's message vectors (with an embedder): loaded from the store, and every
        searchable message of the log beyond them embedded and stored (derived data, rebuildable)."""
        assert self.embedder is not None
        model = retrieval.embedder_name(self.embedder)
        index = self._vectors.get(session)
        if index is None:
            index = VectorIndex.from_bodies(model, self.store.derived(session, VectorIndex.KIND))
            self._vectors[session] = index
        last = index.last()
        messages = [m for m in self.store.messages(session, since_round=index.docs[last].round if last >= 0 else None)
                    if m.index > last]
        if messages:
            by_message: dict[int, list[Edit]] = {}
            for e in self.store.edits(session):
                if e.message_index > last:
                    by_message.setdefault(e.message_index, []).append(e)
            pairs = [(m, d) for m in messages if (d := retrieval.document(self.domain, m, by_message.get(m.index, [])))]
            vectors = self.embedder.embed([retrieval.document_text(self.domain, m) for m, _ in pairs]) if pairs else []
            for (_, doc), vector in zip(pairs, vectors):
                index.add(doc, vector)
                self.store.put_derived(session, VectorIndex.KIND, doc.message_index,
                                       index.body(doc.message_index))
        return index

    def _catch_up_index(self, session: str) -> None:
        """Index what the log holds beyond the search index (a store written without retrieval,
        a crash between the message and its index row, another writer's messages)."""
        last = self.store.search_indexed(session)
        messages = [m for m in self.store.messages(session) if m.index > last]
        if messages:
            by_message: dict[int, list[Edit]] = {}
            for e in self.store.edits(session):
                if e.message_index > last:
                    by_message.setdefault(e.message_index, []).append(e)
            docs = [d for m in messages if (d := retrieval.document(self.domain, m, by_message.get(m.index, []))) is not None]
            if docs:
                self.store.index_search(session, docs)
        self._indexed.add(session)

    def search(self, session: str, query: str | list[str], where: SearchFilter | None = None,
               limit: int = retrieval.RETRIEVE_K, text: str | None = None) -> list[tuple[Message, float]]:
        """The session's messages matching `query` (text, or terms), best first, with their scores;
        `where` filters by role, round range, tool name and the fields a message set. Lexical: any
        term matches. With an embedder also dense: the messages whose vectors are closest to the
        embedded `text` (default: the query), found even when they share no word with it; the two
        lists are fused by rank (`retrieval.fuse`). Works whether or not `retrieval` is on (the
        indexes catch up on first use)."""
        if session not in self._indexed:
            self._catch_up_index(session)
        where = where or SearchFilter()
        terms = query if isinstance(query, list) else retrieval.terms(query)
        hits = self.store.search(session, terms, where, limit * 3 if self.embedder else limit)
        if self.embedder is not None:
            vector = self.embedder.embed([text or (query if isinstance(query, str) else " ".join(query))])[0]
            floor = float(getattr(self.embedder, "min_similarity", 0.0))
            hits = retrieval.fuse(hits, self._vector_index(session).nearest(vector, where, limit * 3, floor), limit)
        found = {m.index: m for m in self.store.messages_at(session, [i for i, _ in hits])}
        return [(found[i], score) for i, score in hits if i in found][:limit]

    def _bind(self, session: str) -> str | None:
        """Check the session belongs to this domain and version; the version it upgrades from, if any."""
        if session in self._bound:
            return self._bound[session]
        info = self.store.session(session)
        old = None
        if info is not None and info.domain != self.domain.name:
            raise Errors.SESSION_OTHER_DOMAIN(session=session, stored=info.domain, domain=self.domain.name)
        if info is not None and info.domain_version != self.domain.version_hash:
            if not self.upgrade:
                raise Errors.SESSION_OLD_VERSION(session=session, version=info.domain_version, domain=info.domain,
                                                 current=self.domain.version_hash)
            old = info.domain_version
        self._bound[session] = old
        return old

    def _stamp(self, session: str, raw: dict[str, Any], state: State, now: datetime | str | None) -> Message:
        """Give the message its place (index, round) and a timestamp, so replay sees the same clock."""
        index = state.message_index + 1
        rnd = state.round + (1 if raw["role"] == "user" else 0)
        ts = raw.get("timestamp")
        if ts is None:
            clock = now if now is not None else datetime.now(timezone.utc)
            ts = clock if isinstance(clock, str) else clock.isoformat()
        return Message.new(state.last_message_hash, self._salts() if self._salts else None, session=session, index=index,
                           round=rnd, role=raw["role"], content=raw["content"], timestamp=ts, id=raw.get("id"),
                           name=raw.get("name"), tool_call_id=raw.get("tool_call_id"),
                           tool_calls=tuple(raw.get("tool_calls") or ()), asks=tuple(raw.get("asks") or ()),
                           domains=tuple(raw.get("domains") or ()))

    def _edits_for(self, state: State, msg: Message, upgrade_from: str | None = None,
                   carried: list[Carried] | None = None) -> list[Edit]:
        """All edits `msg` causes, sealed, folded into `state` as they are made."""
        chain = _Chain(state, self._salts)
        out: list[Edit] = []

        def commit(e: Edit) -> None:
            sealed = chain.seal(e)
            state.apply(sealed)
            out.append(sealed)

        if upgrade_from is not None:
            how = REDERIVE if self.upgrade == REDERIVE else UPGRADE
            commit(edit(msg, self.domain, "upgrade", None, upgrade_from, self.domain.version_hash, "machine",
                        reason=how, stage="transform"))
            if how == REDERIVE:
                target = rerun(self.domain, msg.session, self.store.messages(msg.session),
                               recorded=self.store.edits(msg.session))
                for e in rederived(state, target, msg, self.domain):
                    commit(e)
        if self.machine and state.phase is None:
            commit(self.machine.initial_edit(msg))
        for item, weight in self._recall(msg):
            commit(recall_edit(item, weight, msg, self.domain))
        for e in expiry_edits(state, self.domain, msg):
            commit(e)
        now = msg.time()
        assert now is not None  # _stamp gave the message a timestamp
        scanned, loop = mask_echoes(msg.content)
        if loop:
            commit(edit(msg, self.domain, "alert", None, None, "a rendered context was found inside this message; "
                        "it was not used as a source", "machine", reason=CONTEXT_LOOP_DETECTED, stage="extract"))
        scan = msg if scanned is msg.content else replace(msg, content=scanned)
        reads = self._reads(msg)
        held = self._held(state, msg)
        candidates = (self.extractor.extract(scan, now, self._priors.get(msg.session) if msg.role == "user" else None, held)
                      if reads else [])
        self._remember(scan, candidates)
        proposed = field_edits(state, self.domain, msg, candidates)
        accepted = self._validate(state, msg, proposed, commit)
        for e in accepted:
            commit(e)
        # After the message's own values, so what the user says here outranks what another domain holds.
        for e in carry_edits(state, self.domain, msg, self._carried(msg, carried or []) if reads else [],
                             lambda name, value: self.validator.check(name, value) is not None):
            commit(e)
        if self.machine:
            for e in self.machine.step(state, msg, accepted):
                commit(e)
        return out

    def _held(self, state: State, msg: Message) -> dict[str, Any] | None:
        """The search constraints an assistant message is read against (`dialogue: {relax: <action>}`)."""
        action = self.domain.actions.get(self.extractor.relax_action or "") if msg.role == "assistant" else None
        return {name: state.get(name) for name in action.fields} if action is not None else None

    def _reads(self, msg: Message) -> bool:
        """Whether this domain reads values from `msg`: a message the app says speaks for other
        domains only (`domains` metadata) is kept in the history and read by them alone; without
        it, a domain that declares its `dialogue: {subject: …}` reads no user message that names
        other kinds of thing only (`Extractor.speaks_for_me`)."""
        return self.domain.name in msg.domains if msg.domains else self.extractor.speaks_for_me(msg)

    def _remember(self, msg: Message, candidates: list[Candidate]) -> None:
        """Keep what an assistant message asks for and offers, for the reply that follows; a user
        message uses it up. Derived from the messages alone, so a reload recomputes it (`_live`)."""
        if not self._reads(msg):  # a turn for another domain: what this one asked or offered lapses
            self._priors.pop(msg.session, None)
            self._open_offers.pop(msg.session, None)
            return
        if msg.role == "user":
            before = self._priors.pop(msg.session, None)
            self._open_offers.pop(msg.session, None)
            if before is not None and before.offered and self.extractor.keeps_offer_open(msg, candidates):
                self._open_offers[msg.session] = before  # only asked about: the offer stays open
        elif msg.role in ("assistant", "tool"):
            before = self._priors.get(msg.session)
            asks = self.extractor.asks(msg) if msg.role == "assistant" else ()
            offered = tuple(dict.fromkeys(c.field for c in candidates if c.kind == "proposal"))
            named = tuple((c.field, c.provenance.text, c.value) for c in candidates
                          if c.kind == "proposal" and msg.role == "assistant" and isinstance(c.value, str) and c.provenance.text)
            offer_round = msg.round if offered else None
            if before is not None and before.round == msg.round:
                asks, offered = tuple(dict.fromkeys([*before.asks, *asks])), tuple(dict.fromkeys([*before.offered, *offered]))
                named = (*before.named, *named)
                offer_round = before.offer_round if offer_round is None else offer_round
            kept = self._open_offers.get(msg.session)
            made = (kept.offer_round if kept.offer_round is not None else kept.round) if kept is not None else None
            if offer_round is None and kept is not None and made is not None and msg.round - made <= MAX_OPEN_ROUNDS:
                # the assistant answered the user's question about its offer: the offer is still on the table
                offered, named, offer_round = offered or kept.offered, named or kept.named, made
            self._priors[msg.session] = Prior(msg.round, asks, offered, named, offer_round)

    def _validate(self, state: State, msg: Message, proposed: list[Edit], commit: Callable[[Edit], None]) -> list[Edit]:
        """Split proposed edits into accepted ones and rejections (committed with their alerts)."""
        accepted: list[Edit] = []
        for e in proposed:
            problem = self.validator.check(e.field, e.after) if e.op == "set" and e.field is not None else None
            if e.op == "reject" or problem:
                code, text = problem or (e.reason, f"{e.field}: {e.reason}")
                commit(replace(e, op="reject", reason=code, stage="validate"))
                if problem:
                    commit(edit(msg, self.domain, "alert", e.field, None, text, "machine", reason=code, stage="validate"))
                continue
            accepted.append(e)
        changed = {e.field for e in accepted if e.field is not None}
        if not changed or not self.domain.rules:
            return accepted  # a rule is only checked when a field it reads changes
        values = state.values() | {e.field: e.after for e in accepted if e.field is not None}
        now = msg.time()
        for rule, text in violations(self.domain, values, now.date() if now else None, changed):
            touched = [e for e in accepted if e.field in rule.fields]
            if not touched:
                continue  # the violation predates this message; it was reported then
            for e in touched:
                accepted.remove(e)
                commit(replace(e, op="reject", reason=rule.code, stage="validate"))
            commit(edit(msg, self.domain, "alert", touched[0].field, None, text, "machine", reason=rule.code, stage="validate"))
        return accepted

    # ------------------------------------------------------------------ read
    def _live(self, session: str, reach: Callable[[int], int] | None = None) -> State:
        """The session's current state: the cached fold if it matches the store's head, else the
        cached fold caught up with what other writers appended (or a fresh fold). `reach`: the
        first round of the window the caller reads next, given the state's round; when the state is
        folded here, the messages read to place it reach back to there and are kept as that
        window's tail (`_tail`): a reopen reads the session's latest messages once. The head is
        read only when the store's mark moved since the cached state was last checked against it
        (another writer, or an append of this store's, may have moved it)."""
        mark = self.store.data_version()  # before the head: a commit after it moves the next mark
        state = self._states.get(session)
        if state is not None and mark is not None and self._marks.get(session) == mark:
            self._states.move_to_end(session)
            return state
        info = self.store.session(session)
        head = (info.messages, info.edits) if info else (0, 0)
        if info is not None and self._erased.get(session, 0) != info.erased:
            self._forget(session)  # parts were erased since it was cached: the cache may hold their text
            for renderer in (self.renderer, *self._renderers.values()):
                renderer.forget()  # and so may the renderers' turns, remembered by message hash
            self._erased[session] = info.erased
            state = None
        if state is not None and (state.message_index + 1, state.last_seq + 1) == head:
            self._checked(session, mark)
            return state
        if state is None or state.message_index + 1 > head[0] or state.last_seq + 1 > head[1]:
            state = None  # nothing cached, or the store went back
        edits, refused = None, False
        if state is None:
            state, edits, refused = self._from_snapshot(session, head)
        for e in edits[1:] if edits is not None else self.store.edits(session, since_seq=state.last_seq):
            state.apply(e)
        self._replayed = (session, state, edits) if edits else None
        # The cached summary zone may lack what another writer appended: reload it from the
        # derived table and the log on next use (it resumes from its last complete stage).
        self._zones.pop(session, None)
        self._tails.pop(session, None)
        # Messages that caused no edit still move the session on: take the position of the last one.
        first = state.round if reach is None else min(state.round, reach(state.round))
        read = self.store.messages(session, since_round=first)
        tail = read if first == state.round else [m for m in read if m.round >= state.round]
        if tail:
            state.round, state.message_index, state.last_message_hash = tail[-1].round, tail[-1].index, tail[-1].hash
        self._priors.pop(session, None)
        self._open_offers.pop(session, None)
        self._unread[session] = [m for m in tail if m.role != "system"]
        if reach is not None and read:  # (the window's rounds only move on with the state's)
            self._tails[session] = (first, read)
        if refused:  # a stored snapshot not used: the next reopen starts from this fold instead
            self._put_sealed(session, SNAPSHOT_KIND, 0, state.snapshot())
        self._states[session] = state
        self._checked(session, mark)
        while len(self._states) > self._cache_sessions:
            evicted, _ = self._states.popitem(last=False)
            self._forget(evicted)  # everything kept per session goes with its state: memory stays bounded
        return state

    def _took_own_write(self, session: str) -> None:
        """The cached state of `session` took in this editor's own append: if it was current at
        its mark, it is current at the mark the store has after that append (the next render does
        not read the head unless something else was committed meanwhile)."""
        known = self._marks.pop(session, None)
        after = self.store.after_own_write(known) if known is not None else None
        if after is not None:
            self._marks[session] = after

    def _checked(self, session: str, mark: tuple[int, ...] | None) -> None:
        """The cached state of `session` is the store's as of `mark`: used last (LRU), and not
        checked against the head again while the store's mark stays."""
        self._states.move_to_end(session)
        if mark is not None:
            self._marks[session] = mark

    def _read_priors(self, session: str) -> None:
        """Work out what the assistant left open since the last user message, from the messages
        `_live` read after the session's last edit (before the next message is read against it)."""
        for m in self._unread.pop(session, ()):
            when = m.time() or datetime.now(timezone.utc)
            self._remember(m, self.extractor.extract(m, when, self._priors.get(session) if m.role == "user" else None)
                           if self._reads(m) else [])

    def _from_snapshot(self, session: str, head: tuple[int, int]) -> tuple[State, list[Edit] | None, bool]:
        """The session's last stored snapshot and the edits from its last one on (that one
        first: the snapshot belongs to this log, its last edit is the stored one at its seq); else
        an empty state to fold from, and None. Last: whether a stored snapshot was refused."""
        empty = State(self.domain.name, self.domain.version_hash, session, history_cap=self.history_cap)
        rows, whole = self._read_sealed(session, SNAPSHOT_KIND, (0, 0))
        body = rows.get(0)
        if body is None:
            return empty, None, not whole
        try:
            snap = State.from_snapshot(body).capped(self.history_cap)
        except SnapshotFormatError as exc:
            self._unused(session, SNAPSHOT_KIND, str(exc), logging.INFO)
            return empty, None, True
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            self._unused(session, SNAPSHOT_KIND, f"it does not parse ({type(exc).__name__}: {exc})")
            return empty, None, True
        if snap.message_index + 1 > head[0] or snap.last_seq + 1 > head[1]:
            self._unused(session, SNAPSHOT_KIND, "it is ahead of the log (the log was cut back)")
            return empty, None, True
        if snap.last_seq < 0:
            return snap, None, False
        edits = self.store.edits(session, since_seq=snap.last_seq - 1)
        if not edits or edits[0].seq != snap.last_seq or edits[0].hash != snap.last_hash:
            # a snapshot of another log (rewritten, or restored from elsewhere): ignore it
            self._unused(session, SNAPSHOT_KIND, "its last edit is not in this log")
            return empty, None, True
        return snap, edits, False

    def _cached(self, session: str) -> State | None:
        state = self._states.get(session)
        if state is not None:
            self._states.move_to_end(session)
        return state

    def state(self, session: str, as_of_round: int | None = None) -> State:
        """The session's state now, or as it stood at the end of round `as_of_round`."""
        if as_of_round is None:
            return self._live(session)
        state = State.fold(self.domain.name, self.domain.version_hash, session, self.store.edits(session), as_of_round)
        # The session stood at round `as_of_round` even if its last edits are older: take the
        # position of its last message by then (so renders count recent rounds from there).
        tail = [m for m in self.store.messages(session, since_round=state.round) if m.round <= as_of_round]
        if tail:
            state.round, state.message_index, state.last_message_hash = tail[-1].round, tail[-1].index, tail[-1].hash
        return state

    def history_state(self, session: str, as_of_round: int | None = None) -> State:
        """The session's state (at `as_of_round` if given) with every field's full history, folded
        from the store's edit log (a cached state holds only the newest `history_cap` entries)."""
        if as_of_round is not None:
            return self.state(session, as_of_round)
        state = self._live(session)
        if all(fs.earlier is None for fs in state.fields.values()):
            return state
        full = State.fold(self.domain.name, self.domain.version_hash, session, self.store.edits(session))
        full.round, full.message_index, full.last_message_hash = state.round, state.message_index, state.last_message_hash
        return full

    def render(self, session: str, action: str, budget: int | str | None = None, as_of_round: int | None = None,
               model: str | None = None) -> RenderedContext:
        """The XML context of `action` for this session (at `as_of_round` if given), counted with
        `model`'s tokenizer (default: the editor's model).
        `budget`: tokens, or a share of the model window ("60%") when `context_window` is set."""
        key = self._render_key(session, action, budget, as_of_round, model)
        known = self._rendered.get(session, {}).get(key[:4]) if key is not None else None
        if known is not None and known[0] == key:
            ctx = _copy(known[1])
        else:
            # The state the key was taken from (`_render_key` has just checked the store's head):
            # the render is made of what its key names, and the head is not read twice.
            ctx, _, _, _ = self._draft(session, action, budget, as_of_round, model,
                                       self._states.get(session) if key is not None else None)
            if key is not None:
                renders = self._rendered.setdefault(session, {})
                if len(renders) >= RENDERS_KEPT:
                    renders.clear()
                renders[key[:4]] = (key, _copy(ctx))
        self._record_llm(session)
        self._check_ratio(session, ctx)
        self._account(session, ctx)
        return ctx

    def _render_key(self, session: str, action: str, budget: int | str | None, as_of_round: int | None,
                    model: str | None) -> tuple[Any, ...] | None:
        """What a render of the live session is a function of: the action, budget and model, the
        state's head and the summary zone's last message (the window, its turns and any search hits
        follow from the log up to there). None when a render may not be repeated from memory: an
        earlier round, or a model-backed scorer or summarizer in the loop."""
        if as_of_round is not None or self.scorer is not None or self.summarizer is not None:
            return None
        self.renderer.action(action)  # unknown action: the renderer's error, as without the memo
        spec = self.domain.actions[action]
        state = self._live(session, lambda round_: past.window_from(spec, round_))  # (`_since`)
        self._tail(session, state, self._since(state, action))  # the window, read once: the zone's open stage is in it
        return (action, budget, model, self.default_budget, state.last_seq, state.last_hash, state.message_index,
                state.round, self._zone(session, latest=True).last_index)

    def _draft(self, session: str, action: str, budget: int | str | None, as_of_round: int | None,
               model: str | None, live: State | None = None) -> tuple[RenderedContext, list[str], list[tuple[Message, float]], int]:
        """A render and what it was made from: the search query, its hits (with scores) and the
        first round of the loaded window. Nothing is recorded or accounted here. `live`: the live
        state, when the caller has just read it (`_render_key`)."""
        part = self._render_part(session, action, as_of_round, model, latest=as_of_round is None, live=live)
        view, since = self.domain.actions[action], self._since(part.state, action)
        self._recall_llm(session)
        query, hits = self._retrieve(session, part.state, view, part.messages, since)

        def render(part: RenderPart) -> RenderedContext:
            return part.renderer.render(part.state, action, part.messages, budget=budget if budget is not None else self.default_budget,
                                        summary=part.summary, anchors=part.anchors, retrieved=[m for m, _ in hits])

        try:
            ctx = render(part)
        except compact.Unloaded:
            # The render needed older lines than the latest stages after all: read the whole zone.
            part = replace(part, summary=self._zone(session).lines(part.state.round))
            ctx = render(part)
        if as_of_round is None:
            self._keep_past(session, action, part)
            self._keep_open(session)
        return ctx, query, hits, since

    def _since(self, state: State, action: str) -> int:
        return past.window_from(self.domain.actions[action], state.round)

    def _render_part(self, session: str, action: str, as_of_round: int | None = None, model: str | None = None,
                     latest: bool = False, live: State | None = None) -> RenderPart:
        """What a render of `action` reads from this session: its state, the messages of the
        action's window, its summary lines and anchors. `latest`: a live render that may go on
        from a stored settled past, with only the zone's latest stages read; `live`: the live state,
        when the caller has just read it."""
        renderer = self._renderer(model)
        renderer.action(action)  # unknown action: fail before touching the store
        state = live if live is not None and as_of_round is None else self.state(session, as_of_round)
        # Only messages the state has seen: another writer may have appended since it was read.
        since = self._since(state, action)
        messages = self._window(session, state, since) if as_of_round is None else \
            [m for m in self.store.messages(session, since_round=since) if m.round <= as_of_round]
        zone = self._zone(session, latest=latest)
        anchors = {n: a for n in ("goal", "subtask") if (a := zone.anchor(n, as_of_round))}
        # Every line up to the latest round: the recent rounds' lines stay hidden while their turns
        # are shown, and keep (or name) a fact of a recent turn the budget drops.
        part = RenderPart(renderer, state, messages, zone.lines(state.round), anchors)
        if zone.partial and not self._from_past(session, action, part):
            part = replace(part, summary=self._zone(session).lines(state.round))
        return part

    def _window(self, session: str, state: State, since: int) -> list[Message]:
        """The session's messages of rounds >= `since` up to the state's last message. The tail read
        last time is kept and extended by this editor's own appends (`add`), so a render after a
        new message reads nothing; it is read again when it does not reach back to `since` or does
        not end at the state's message (another writer appended), and dropped whenever the state is
        refolded or the session forgotten (erasure)."""
        tail = self._tail(session, state, since)
        return [m for m in tail[1] if m.round >= since] if tail[0] < since else list(tail[1])

    def _tail(self, session: str, state: State, since: int) -> tuple[int, list[Message]]:
        """The kept tail (first round, messages) of `_window`, read again when it must be."""
        tail = self._tails.get(session)
        if not _reaches(tail, since, state):
            tail = self._tails[session] = (since, [m for m in self.store.messages(session, since_round=since)
                                                   if m.index <= state.message_index])
        elif tail[0] < since - 2 * TAIL_SLACK_ROUNDS:  # drop what no window reaches back to any more
            tail = self._tails[session] = (since - TAIL_SLACK_ROUNDS, [m for m in tail[1] if m.round >= since - TAIL_SLACK_ROUNDS])
        return tail

    def _messages_since(self, session: str, round_: int) -> list[Message]:
        """The session's messages of rounds >= `round_`: taken from the window's tail when it
        reaches back that far and ends at the live state's last message (`_live` has just checked
        the store's head), else read."""
        tail, state = self._tails.get(session), self._states.get(session)
        if state is not None and _reaches(tail, round_, state):
            return [m for m in tail[1] if m.round >= round_]
        return self.store.messages(session, since_round=round_)

    def _retrieve(self, session: str, state: State, view: ActionSpec, messages: list[Message],
                  since: int) -> tuple[list[str], list[tuple[Message, float]]]:
        """The query and the messages older than the loaded window that match it (with their
        scores): the latest user turn's terms, or the action's vocabulary. Nothing when retrieval is
        off or the window already starts at the first round."""
        if not self.retrieval or since <= 1:
            return [], []
        latest = next((m.content for m in reversed(messages) if m.role == "user"), None)
        query = retrieval.action_query(self.domain, view, state, latest)
        # Dense search embeds what was asked as said, when the query is that turn's terms.
        asked = latest if latest and set(query) <= set(retrieval.terms(latest)) else None
        return query, self.search(session, query, retrieval.older_than(since), text=asked)

    def _answers(self) -> list[Answers]:
        """The answer books of the model parts in use (a ChatScorer's, a ChatSummarizer's)."""
        return [a for part in (self.scorer, self.summarizer) if isinstance(a := getattr(part, "answers", None), Answers)]

    def _recall_llm(self, session: str) -> None:
        """Give the model parts every answer recorded in the session's log: a recorded prompt is
        never sent again (a re-render, here or in another process, needs no endpoint)."""
        books = self._answers()
        if books:
            recorded = self._live(session).llm
            for book in books:
                book.recall(recorded)

    def _record_llm(self, session: str) -> None:
        """Record in the session's log every model answer the render used that the log lacks."""
        used = {r["prompt_hash"]: r for book in self._answers() for r in book.drain()}
        if used:
            self.record(session, list(used.values()))

    def record(self, session: str, records: list[dict[str, Any]]) -> list[Edit]:
        """Append model answers to the session's edit log (`llm` edits on its last message, on the
        hash chain), skipping those it already holds; retried on a race with another writer."""
        for attempt in range(APPEND_ATTEMPTS):
            state = self._live(session)
            fresh = [r for r in records if r["prompt_hash"] not in state.llm]
            if not fresh:
                return []
            chain = _Chain(state, self._salts)
            edits = [chain.seal(Edit(session=session, seq=0, message_index=state.message_index, round=state.round,
                                     stage="inject", op="llm", field=None, before=None, after=r, source="llm",
                                     reason=f"LLM_{str(r.get('kind', 'answer')).upper()}", provenance=None,
                                     domain_version=state.domain_version)) for r in fresh]
            try:
                self.store.append_records(session, edits)
            except StoreConflictError:
                self._states.pop(session, None)
                if attempt == APPEND_ATTEMPTS - 1:
                    raise
                continue
            for e in edits:
                state.apply(e)
            self._took_own_write(session)
            return edits
        raise AssertionError("unreachable")  # the loop returns or raises

    def _account(self, session: str, ctx: RenderedContext) -> None:
        """Add a render to the session's token account (what was sent, and the raw window it
        replaced): one atomic addition in the store, so renders in other processes are not lost."""
        out_of_band = any(a["code"] == COMPACTION_RATIO_OUT_OF_BAND for a in ctx.alerts)
        self.store.add_usage(session, Usage(1, ctx.tokens, ctx.source_tokens, int(out_of_band)))

    def usage(self, session: str) -> dict[str, Any]:
        """The session's token account: renders, context tokens sent, the raw-window tokens they
        stood for, and their cost at `price_per_mtok` (None when no price is set)."""
        usage = asdict(self.store.usage(session))
        price = self.price_per_mtok
        return {**usage, "cost": None if price is None else round(usage["context_tokens"] * price / 1e6, 6),
                "raw_cost": None if price is None else round(usage["source_tokens"] * price / 1e6, 6)}

    def _new_renderer(self, model: str | None) -> Renderer:
        return Renderer(self.domain, model=model, system=self.system, window=self.window, scorer=self.scorer,
                        condense=self._condense)

    def _condense(self, text: str) -> str:
        """A trace field's text as one line: the summarizer's, if the rules accept it, else the extractive line."""
        limit = int(getattr(self.summarizer, "max_chars", MAX_CHARS))  # a summarizer may be told a longer line
        return text if len(text) <= limit else distil(text, self.summarizer, max_chars=limit)[0]

    def _check_ratio(self, session: str, ctx: RenderedContext) -> None:
        """Flag a render whose compaction ratio leaves the band (too big for what it replaces, or
        too little kept), once the raw window is large enough for the ratio to mean compaction.
        Every such render carries the alert; the log says it once per session and action (an
        action whose context is always a little over its window would otherwise log every render)."""
        if self.compaction_band is None or ctx.source_tokens < MIN_RATIO_SOURCE:
            return
        low, high = self.compaction_band
        ratio = ctx.compaction_ratio
        if not low <= ratio <= high:
            message, fix = Errors.COMPACTION_RATIO_OUT_OF_BAND.text(action=ctx.action, ratio=f"{ratio:.2f}", low=low,
                                                                    high=high, source=ctx.source_tokens)
            ctx.alerts.append({"code": COMPACTION_RATIO_OUT_OF_BAND, "catalog": Errors.COMPACTION_RATIO_OUT_OF_BAND.code,
                               "message": message, "fix": fix})
            warned = self._warned.setdefault(session, set())
            if ctx.action not in warned:
                warned.add(ctx.action)
                log.warning("%s (fix: %s)", message, fix)

    def _renderer(self, model: str | None) -> Renderer:
        """The editor's renderer, or one counting with another model's tokenizer (a few are kept)."""
        if model is None or model == self.renderer.model:
            return self.renderer
        if model not in self._renderers:
            count_tokens("", model)  # an unknown model fails here, before any work
            if len(self._renderers) >= 8:
                self._renderers.pop(next(iter(self._renderers)))
            self._renderers[model] = self._new_renderer(model)
        return self._renderers[model]

    def why(self, session: str, field: str, as_of_round: int | None = None) -> dict[str, Any]:
        """Provenance and full history of one field: every accepted, rejected, cleared or expired
        value (up to the end of round `as_of_round` if given)."""
        if field not in self.domain.fields:
            raise Errors.UNKNOWN_FIELD(field=field, domain=self.domain.name, known=", ".join(sorted(self.domain.fields)))
        self.store.require_session(session)
        state = self.history_state(session, as_of_round)
        fs = state.fields.get(field)
        history = []
        for h in fs.history if fs else []:
            entry = h.to_dict()
            if h.provenance:
                entry["provenance"] = h.provenance.to_dict()
            history.append(entry)
        return {
            "session": session,
            "field": field,
            "value": fs.value if fs else None,
            "provenance": fs.provenance.to_dict() if fs and fs.provenance else None,
            "history": history,
            "note": None if history else "no candidate: nothing in this session was extracted for this field",
        }

    def why_message(self, session: str, ref: str | int, action: str | None = None, budget: int | str | None = None,
                    as_of_round: int | None = None) -> dict[str, Any]:
        """Explain one message (`m12`, as a context's src names it): its round, role and text, the
        fields it set, and with `action`, where that action's context shows it and why: a recent or
        history turn, a summary line, dropped by the budget (named in <truncated_context>), or
        brought back by search (the query, the terms it matched, its score and rank)."""
        self.store.require_session(session)
        index = explain.message_index(ref)
        found = self.store.messages_at(session, [index]) if index is not None else []
        if not found:
            info = self.store.session(session)
            last = info.messages - 1 if info is not None else -1
            raise Errors.UNKNOWN_MESSAGE(session=session, ref=str(ref), known=f"m0-m{last}" if last >= 0 else "none yet")
        msg = found[0]
        edits = [e for e in self.store.edits(session) if e.message_index == msg.index and e.field and e.op == "set"]
        out: dict[str, Any] = {
            "session": session, "message": f"m{msg.index}", "round": msg.round, "role": msg.role, "name": msg.name,
            "text": explain.masked(msg.content), "fields": [{"field": e.field, "value": e.after, "reason": e.reason}
                                                               for e in edits]}
        if action is None:
            return out
        ctx, query, hits, since = self._draft(session, action, budget, as_of_round, None)
        out["action"] = action
        out["shown"] = explain.where_shown(ctx.xml, msg, ctx.retrieved, self._roles(session))
        if self.retrieval:
            out["retrieval"] = explain.explain_hit(query, hits, msg, window_from=since)
        return out

    def _roles(self, session: str) -> Callable[[int], str | None]:
        """The session's message roles by index, read as they are asked for (a line of a minimal
        context without its number is the first message of its role after the line before it,
        `compact.implied`: a few messages on from there), not the whole session."""
        roles: dict[int, str | None] = {}

        def role_of(index: int) -> str | None:
            if index not in roles:
                wanted = range(index, index + ROLES_READ)
                roles.update(dict.fromkeys(wanted))  # None past the session's end
                roles.update((m.index, m.role) for m in self.store.messages_at(session, list(wanted)))
            return roles[index]

        return role_of


ROLES_READ = 8  # messages whose roles `why_message` reads at a time


def _copy(ctx: RenderedContext) -> RenderedContext:
    """A render whose lists its receiver may change without changing the remembered one."""
    return replace(ctx, fields=list(ctx.fields), missing=list(ctx.missing), dropped=list(ctx.dropped),
                   retrieved=list(ctx.retrieved), alerts=[dict(a) for a in ctx.alerts])


def _joined(parts: Iterable[tuple[ContextEditor, str]]) -> list[tuple[ContextEditor, str]]:
    """The (editor, session) parts of one conversation across domains: at least one, each domain once."""
    pairs = list(parts)
    if not pairs:
        raise Errors.NO_DOMAINS()
    names = [editor.domain.name for editor, _ in pairs]
    if len(set(names)) != len(names):
        raise Errors.DUPLICATE_DOMAIN(domains=", ".join(names))
    return pairs


def add_together(parts: Iterable[tuple[ContextEditor, str]], message: dict[str, Any] | Message,
                 now: datetime | str | None = None) -> list[list[Edit]]:
    """Add one message of a conversation that spans several domains to each domain's session
    (the pairs as for `render_together`), in the order given, and carry values between them as
    their `carry:` declarations say (`transform.carry`): each domain is offered what the others
    hold at that moment, so a value said in this message reaches a domain listed after the one
    that read it at once, one listed before it with the next message. Returns each part's edits."""
    pairs = _joined(parts)
    return [editor.add(session, message, now=now, carried=carried_for(editor, pairs)) for editor, session in pairs]


def carried_for(editor: ContextEditor, parts: list[tuple[ContextEditor, str]]) -> list[Carried]:
    """What the other parts of a conversation hold now for `editor`'s `carry:` fields."""
    wanted = {ref.partition(".")[0] for sources in editor.domain.carry.values() for ref in sources}
    others = {e.domain.name: e.state(s) for e, s in parts if e is not editor and e.domain.name in wanted}
    return offered(editor.domain, others) if others else []


def render_together(parts: Iterable[tuple[ContextEditor, str]], action: str, budget: int | str | None = None,
                    as_of_round: int | None = None, model: str | None = None) -> RenderedContext:
    """One context for a conversation that spans several domains.

    A session holds one domain's edit log, so a conversation about a restaurant and a hotel is
    one session per domain (the same messages added to each editor; the same session id when
    the editors have their own stores, e.g. `[(restaurant, "c1"), (hotel, "c1")]`). This renders
    `action` (which every domain must have) for all of them as one envelope: the state grouped
    by domain, each turn and summary line at most once, one budget (the first domain's default
    when not given), one exact token count (`inject.render.render_many`). The render is counted
    in the first session's token account. Retrieval is not used here (a single-domain render has it)."""
    pairs = list(parts)
    if not pairs:
        raise Errors.NO_DOMAINS()
    pieces = [editor._render_part(session, action, as_of_round, model) for editor, session in pairs]
    lead, session = pairs[0]
    ctx = render_many(pieces, action, budget=budget if budget is not None else lead.default_budget)
    lead._check_ratio(session, ctx)
    lead._account(session, ctx)
    return ctx
