"""Errors with a code, a location and a fix, in the spirit of spaCy's `Errors` catalog.

Every error a user can cause says what is wrong, where (file and line when there is one) and
how to fix it. The CLI prints `str(error)` and exits non-zero; nothing is half-written.

Every error is raised from the catalog `Errors` at the end of this module: an entry holds the
code, a message template and a fix template, and builds the exception (or the lint problem) with
the values filled in, so the same situation always reads the same way:

    raise Errors.NO_SESSION(session=key, store=store.url, known=known)

docs/errors.md is generated from the catalog (`python scripts/errors_table.py`); a test checks it
is current, and that no code is written anywhere else.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar


class ContextEditorError(Exception):
    """Base class: `code` is stable and documented, the message is for humans."""

    code = "CE000"

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 fix: str | None = None, code: str | None = None):
        self.message, self.file, self.line, self.fix = message, file, line, fix
        if code:
            self.code = code
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        text = f"{where}[{self.code}] {self.message}"
        return f"{text}\n  fix: {self.fix}" if self.fix else text


class MissingExtraError(ContextEditorError):
    """An optional dependency is not installed: the fix names the extra that brings it."""

    code = "CE003"

    def __init__(self, package: str, extra: str, needed_for: str):
        self.package, self.extra = package, extra
        message, fix = Errors.MISSING_EXTRA.text(package=package, extra=extra, needed_for=needed_for)
        super().__init__(message, fix=fix, code=Errors.MISSING_EXTRA.code)


class DomainError(ContextEditorError):
    """The domain file is invalid (lint finds these; loading refuses them)."""

    code = "CE100"

    def __init__(self, problems: list["DomainProblem"], file: str | None):
        self.problems = problems
        first = problems[0]
        more = f" (and {len(problems) - 1} more problem(s); run `context-editor lint`)" if len(problems) > 1 else ""
        super().__init__(first.message + more, file=file, line=first.line, fix=first.fix, code=first.code)


class DomainProblem:
    """One lint finding: where, what, how to fix. A warning does not stop a domain from loading
    (`lint --strict` counts it as an error)."""

    __slots__ = ("line", "path", "message", "fix", "code", "severity")

    def __init__(self, message: str, *, line: int | None, path: str = "", fix: str = "", code: str = "CE100",
                 severity: str = "error"):
        self.message, self.line, self.path, self.fix, self.code = message, line, path, fix, code
        self.severity = severity

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def format(self, file: str) -> str:
        loc = f"{file}:{self.line}" if self.line else file
        where = f" (at {self.path})" if self.path else ""
        fix = f"\n  fix: {self.fix}" if self.fix else ""
        label = "warning " if self.severity == "warning" else ""
        return f"{loc}: {label}[{self.code}] {self.message}{where}{fix}"


class ConversationError(ContextEditorError):
    """A conversation file or message is malformed."""

    code = "CE200"


class UnknownActionError(ContextEditorError):
    code = "CE300"


class UnknownFieldError(ContextEditorError):
    code = "CE301"


class BudgetError(ContextEditorError):
    """The required part of a context does not fit in the token budget."""

    code = "CE400"


class StoreError(ContextEditorError):
    code = "CE500"


class StoreConflictError(StoreError):
    """Another writer appended to the session first: reload its state and try again."""


class SessionNotFoundError(StoreError):
    code = "CE501"


class SessionDomainError(StoreError):
    """A session belongs to one domain, and moves to a new version of it only when told to."""

    code = "CE505"


class AuthError(ContextEditorError):
    """The service got no key, an unknown key or a revoked one (HTTP 401)."""

    code = "CE901"


class ForbiddenError(ContextEditorError):
    """The key's role may not do this (HTTP 403)."""

    code = "CE902"


class TooLargeError(ContextEditorError):
    """A request body or a message in it is over the service's limit (HTTP 413)."""

    code = "CE905"


class MalformedRequestError(ContextEditorError):
    """A request is not JSON, not the documented shape, or has a bad parameter (HTTP 400)."""

    code = "CE906"


class NoEndpointError(ContextEditorError):
    """No such endpoint or method (HTTP 404 / 405)."""

    code = "CE908"


class BackfillError(ContextEditorError):
    """A job over many sessions (backfill, verify --all, replay --all) cannot start as asked."""

    code = "CE530"


class AuditError(ContextEditorError):
    """A signing key or a checkpoint file cannot be used."""

    code = "CE520"


class DatasetError(ContextEditorError):
    """The input of an importer is missing or not in the published format."""

    code = "CE700"


class TestCaseError(ContextEditorError):
    """A domain test case file (`context-editor test`) is not in the documented format."""

    __test__ = False  # not a pytest class
    code = "CE800"


class NerModelError(ContextEditorError):
    """A trained NER model a domain names is missing or not a model."""

    code = "CE601"


class TrainingDataError(ContextEditorError):
    """The input of `context-editor train ner` is missing, malformed or inconsistent."""

    code = "CE900"


E = TypeVar("E", bound=ContextEditorError)


class Entry(Generic[E]):
    """One catalog entry: a code, what went wrong and how to fix it, as `str.format` templates.
    (A plain class: the CLI imports this module at start-up, where `dataclasses` and what it
    imports would cost more than the whole catalog.)"""

    __slots__ = ("code", "message", "fix", "kind")

    def __init__(self, code: str, message: str, fix: str, kind: type[E]):
        self.code, self.message, self.fix, self.kind = code, message, fix, kind

    def __repr__(self) -> str:
        return f"Entry({self.code!r}, {self.message!r}, {self.fix!r}, {self.kind.__name__})"

    def text(self, **values: Any) -> tuple[str, str]:
        """(message, fix) with `values` filled in."""
        return self.message.format(**values), self.fix.format(**values)

    def __call__(self, *, file: str | None = None, line: int | None = None, **values: Any) -> E:
        """The exception, ready to raise."""
        message, fix = self.text(**values)
        return self.kind(message, file=file, line=line, fix=fix, code=self.code)

    def problem(self, *, line: int | None, path: str = "", severity: str = "error", **values: Any) -> DomainProblem:
        """A lint finding (domain files, rule packs); a warning does not stop a domain from loading."""
        message, fix = self.text(**values)
        return DomainProblem(message, line=line, path=path, fix=fix, code=self.code, severity=severity)


def _e(code: str, message: str, fix: str) -> Entry[ContextEditorError]:
    return Entry(code, message, fix, ContextEditorError)


class Errors:
    """The catalog of every error a user can meet. Codes by hundreds: 0xx the basics (CLI input,
    session keys, extras, registries, lexicons), 1xx domain files and rule packs, 2xx
    conversations, 3xx actions and fields, 4xx rendering and tokens, 5xx stores and audit (CE530–CE532: jobs over many sessions), 6xx NER models,
    7xx importers, 8xx domain test cases, 9xx training data (CE900) and the HTTP service (CE901–CE909:
    keys, limits, requests).
    Entries whose message is `{problem}` cover a family of checks that each say what they found."""

    BAD_NOW = _e("CE001", "--now {value!r} is not ISO 8601", "write it like 2024-05-01T10:00:00+08:00")
    BAD_SESSION_KEY = _e("CE002", "invalid session key part {part!r}",
                         "use 1-200 characters without '/', control characters or lone surrogates for tenant, user and session")
    MISSING_EXTRA = _e("CE003", "{needed_for} needs {package}, which is not installed", 'pip install "context-editor[{extra}]"')
    NOT_REGISTERED = _e("CE010", "no {what} '{name}' is registered (entry-point group {group}; known: {known})",
                        'install the package that provides it, or register it under [project.entry-points."{group}"]'
                        " (a source checkout must be installed: pip install -e .)")
    NOT_A_LANGUAGE = _e("CE011", "the entry point of language '{code}' is not a Language",
                        "point it at a context_editor.lang.Language, or at a package holding lexicon.yaml")
    LEXICON_SYNTAX = _e("CE012", "invalid lexicon: {detail}", "fix the YAML syntax of the lexicon")
    LEXICON_NOT_MAPPING = _e("CE013", "a lexicon must be a YAML mapping",
                             "write keys such as `currency:`, `yes_words:`, `negation:` (see rules/en/lexicon.yaml)")
    LEXICON_NOT_A_WORD = _e("CE014", "lexicon entry {entry} is not a word (YAML reads bare yes/no/on/off as booleans)",
                            "quote it: 'no'")

    DUPLICATE_KEY = _e("CE101", "duplicate key '{key}' (YAML would silently keep only the last one)",
                       "remove or rename one of the '{key}' entries")
    YAML_SYNTAX = _e("CE102", "YAML syntax error: {detail}",
                     "check indentation and quoting on this line (quote strings containing ': ' or '#')")
    NOT_UTF8 = _e("CE102", "not UTF-8 text: {reason} at byte {byte}", "save the file as UTF-8")
    NO_DOMAIN = _e("CE103", "no domain file '{domain}'", "pass a path to a .yaml file or one of the bundled domains: {names}")
    DOMAIN_FILE_NOT_FOUND = _e("CE103", "file not found", "check the path")
    NOT_A_DOMAIN_MAPPING = _e("CE104", "a domain file must be a YAML mapping (domain:, version:, fields:, actions:)",
                              "start from domains/ecommerce.yaml")
    UNKNOWN_KEY = _e("CE104", "unknown key '{key}'",
                     "remove it, or check its spelling against the domain format (docs/domain-format.md)")
    SCHEMA = _e("CE104", "{problem}", "{fix}")
    REFERENCE = _e("CE105", "{problem}", "{fix}")
    UNKNOWN_EXTRACTOR = _e("CE106", "{problem}", "{fix}")
    BAD_EXPRESSION = _e("CE107", "{problem}", "{fix}")
    PLUGIN_MODULE = _e("CE108", "{problem}", "{fix}")
    PLUGINS_REFUSED = _e("CE109", "this domain declares Python plugin rules, which run code; they are not loaded unless enabled",
                         "pass --allow-plugins (CLI) or allow_plugins=True (Python) if you trust this domain's plugin modules")
    BAD_RULE = _e("CE110", "{problem}", "{fix}")
    RULE_ID_TWICE = _e("CE111", "rule id '{rule}' is defined twice (also in {other})", "{fix}")
    RULE_PACK_NOT_FOUND = _e("CE112", "rule pack '{entry}' not found (looked for {where})",
                             "create {where} (a directory of pack files, or one .yaml pack) or fix the path; "
                             "paths are relative to the domain file")
    GAZETTEER = _e("CE113", "{problem}", "{fix}")
    TEMPLATES_DIR = _e("CE114", "templates directory '{entry}' not found (looked for {where})",
                       "create it with your .xml.j2 files or remove `templates`")
    CATASTROPHIC_REGEX = _e("CE115", "rule '{rule}' ({source}) takes seconds on a {length}-character input: its "
                            "pattern backtracks catastrophically",
                            "avoid nested repetition such as (a+)+ or (\\w|\\d)*: make the alternatives exclusive "
                            "or the inner part fixed-length")
    NEVER_FIRES = _e("CE116", "{problem}", "{fix}")
    EXPRESSION_BUDGET = _e("CE117", "{problem}", "compare field values; do not build huge numbers or strings")
    SUPERLINEAR_RULE = _e("CE118", "{problem}", "anchor the value to its cue, bound the quantifiers ({{0,3}}, not *), "
                          "or split the rule")

    UNKNOWN_KEY_IGNORED = _e("CE120", "{problem}", "{fix}")
    NEVER_FILLED = _e("CE121", "{problem}", "{fix}")
    DUPLICATE_SYNONYM = _e("CE122", "{problem}", "{fix}")
    YAML_BOOLEAN = _e("CE123", "unquoted {role} '{value}' is a boolean in YAML 1.1; it is kept as the text '{value}'",
                      "quote it ('{value}') to say you mean the text, or write true/false if a boolean is meant")
    POLICY_TYPE = _e("CE124", "{problem}", "{fix}")
    MONEY_VS_NUMBER = _e("CE125", "{problem}", "{fix}")
    CARRY = _e("CE126", "{problem}", "{fix}")

    BAD_CONVERSATION = Entry("CE200", "{problem}", "{fix}", ConversationError)
    UNKNOWN_ACTION = Entry("CE300", "unknown action {action!r} in domain {domain!r}", "use one of: {known}", UnknownActionError)
    UNKNOWN_FIELD = Entry("CE301", "unknown field {field!r} in domain {domain!r}", "use one of: {known}", UnknownFieldError)
    UNKNOWN_MESSAGE = _e("CE302", "session {session!r} has no message {ref!r} ({known})",
                         "name a message as the context's src does (m0 is the first message), or a field of the domain")
    NO_DOMAINS = _e("CE303", "a context of several domains needs at least one (editor, session) part",
                    "pass the conversation's domains, e.g. render_together([(restaurant, 's1'), (hotel, 's1')], 'track')")
    DUPLICATE_DOMAIN = _e("CE304", "a context of several domains names a domain twice: {domains}",
                          "pass each domain of the conversation once")

    OVER_BUDGET = Entry("CE400", "action {action!r}: the required part of the context needs {tokens} tokens, the budget "
                        "allows {limit} (required and critical fields: {protected}; missing: {missing}; alerts: {alerts})",
                        "raise --budget to at least {needed}, or declare fewer required fields for this action",
                        BudgetError)
    NO_BPE_PACKAGE = _e("CE401", "the bpe-openai package is not installed",
                        "pip install -e . (it is a pinned dependency in pyproject.toml)")
    BPE_HASH = _e("CE401", "packaged BPE file {name} has sha256 {actual}, tiktoken expects {expected}",
                  "reinstall bpe-openai at the version pinned in pyproject.toml")
    UNKNOWN_ENCODING = _e("CE402", "unknown encoding {name!r}", "use one of: {known}")
    UNKNOWN_MODEL = _e("CE403", "unknown model {model!r}",
                       "pass a model tiktoken knows (gpt-4o, gpt-4, …), an encoding (o200k_base, cl100k_base), the "
                       "path of a Hugging Face tokenizer.json (Qwen, Llama, DeepSeek …), or a claude-… model (estimated)")
    BAD_BUDGET = Entry("CE404", "{problem}", "{fix}", BudgetError)
    TOKENIZER_FILE = _e("CE405", "cannot load tokenizer {path}: {detail}",
                        "pass a Hugging Face tokenizer.json (as saved by tokenizers or transformers)")
    CRITICAL_LOST = _e("CE410", "CRITICAL_COMPRESSION_FAILURE: protected (required or critical) fields {lost} are not in the context",
                       "check templates/default.xml.j2 renders every field it is given")
    TOKENS_UNSETTLED = _e("CE411", "could not settle the token count of the context",
                          "report this with the conversation that caused it")
    COMPACTION_RATIO_OUT_OF_BAND = _e(
        "CE412", "COMPACTION_RATIO_OUT_OF_BAND: the context of action {action!r} is {ratio} times the {source} tokens "
                 "of raw history it stands for, outside the band {low}-{high}",
        "above the band the context costs more than the history it replaces: lower the action's history_rounds, "
        "max_history or budget, or check its template; below it too little is kept: raise the budget. "
        "If this is expected, widen the band: ContextEditor(compaction_band=(low, high))")

    STORE = Entry("CE500", "{problem}", "{fix}", StoreError)
    STORE_CONFLICT = Entry("CE500", "{problem}", "{fix}", StoreConflictError)
    NO_SESSION = Entry("CE501", "no session {session!r} in {store}",
                       "ingest a conversation first (`context-editor ingest DOMAIN FILE --session {session}`); "
                       "known sessions: {known}", SessionNotFoundError)
    EDIT_WITHOUT_FIELD = Entry("CE502", "edit {seq} of session {session!r} ({op}) names no field",
                               "run `context-editor audit verify`: the stored log was altered", StoreError)
    DOMAIN_VERSION_MISSING = Entry("CE503", "session {session!r} was processed with domain {domain!r} version {version}, "
                                   "which is missing from {store}",
                                   "restore the store's domains table from a backup; `context-editor audit verify` checks the rest",
                                   StoreError)
    SESSION_OTHER_DOMAIN = Entry("CE505", "session {session!r} belongs to domain {stored!r}, not {domain!r}",
                                 "use a new session id for domain {domain!r}, or ingest with the domain {stored!r}",
                                 SessionDomainError)
    SESSION_OLD_VERSION = Entry("CE505", "session {session!r} was processed with version {version} of domain {domain!r}; "
                                "the domain file is now version {current}",
                                "pass --upgrade (upgrade=True) to move the session to the new version (recorded as an "
                                "edit), or ingest with the domain version the session was processed with",
                                SessionDomainError)
    DERIVED_UNUSED = _e("CE509", "the stored {kind} of session {session!r} was not used: {why}",
                        "nothing to do: it is derived data, recomputed from the log and stored again; if this "
                        "repeats for every session, something else writes the store's derived rows")
    NO_STORE = Entry("CE504", "no store at {path}",
                     "check --store (or $CONTEXT_EDITOR_STORE); `context-editor ingest` creates a store", StoreError)

    DOMAIN_DOCUMENT_CHANGED = Entry("CE506", "the stored document of domain version {version} does not match its SHA-256 "
                                    "(it was changed after it was written)",
                                    "restore the store from a backup and run `context-editor audit verify`", StoreError)
    SCHEMA_NEWER = Entry("CE507", "{store} was written by another version of context-editor (schema {found}, newer than "
                         "this one's {current})",
                         "open it with the version that wrote it or a newer one (pip install -U context-editor); "
                         "nothing was changed", StoreError)
    SCHEMA_TOO_OLD = Entry("CE507", "{store} was written by another version of context-editor (schema {found}); this one "
                           "upgrades schemas {oldest} to {current} in place",
                           "export its sessions with the version that wrote it, or use a new --store", StoreError)
    MIGRATION_FAILED = Entry("CE508", "upgrading {store} from schema {found} to {current} failed at step {step} ({why}): "
                             "{detail}",
                             "nothing was changed (the upgrade is one transaction); check that the database user may "
                             "create tables and indexes, then open the store again", StoreError)
    SIGNING_KEY = Entry("CE520", "{problem}",
                        "write a key with `context-editor audit keygen --out key.hex` and pass --key key.hex, or set "
                        "CONTEXT_EDITOR_SIGNING_KEY_FILE to its path (or CONTEXT_EDITOR_SIGNING_KEY to its 64 hex digits)",
                        AuditError)
    CHECKPOINT = Entry("CE521", "{problem}", "{fix}", AuditError)
    ERASE = Entry("CE522", "cannot erase: {problem}", "{fix}", AuditError)

    RAY_ADDRESS = Entry("CE530", "cannot reach a Ray cluster at {address}: {detail}",
                        "start one (`ray start --head`) or check the address (ray://HOST:10001 for Ray Client, "
                        "HOST:6379 for the head node); nothing was run", BackfillError)
    OUT_OF_ANOTHER_JOB = Entry("CE531", "{out} holds the results of another run (another command, store, domain "
                               "version or selection), or files that are not a run's",
                               "pass a new --out directory, or repeat the exact command that wrote it to resume it",
                               BackfillError)
    BAD_ENGINE_OPTION = Entry("CE532", "{problem}", "{fix}", BackfillError)

    BAD_DATASET = Entry("CE700", "{problem}", "{fix}", DatasetError)
    BAD_TEST_CASE = Entry("CE800", "{problem}", "{fix}", TestCaseError)
    NER_MODEL = Entry("CE601", "{problem}", "{fix}", NerModelError)
    TRAINING_DATA = Entry("CE900", "{problem}", "{fix}", TrainingDataError)
    IMPORTER_BUG = _e("CE701", "the importer wrote a domain that does not lint:\n{detail}",
                      "this is a bug in context_editor/importers; please report it with the input schema")

    NO_KEY = Entry("CE901", "{problem}",
                   "send `Authorization: Bearer KEY` with a key from `context-editor keys create --tenant T`", AuthError)
    KEY_REVOKED = Entry("CE901", "key {key_id} was revoked at {when}", "create a new key (context-editor keys create)",
                        AuthError)
    ROLE_FORBIDDEN = Entry("CE902", "key {key_id} has role {role!r}, which may not {permission}",
                           "use a key with role {allowed} (context-editor keys create --tenant T --role ROLE)",
                           ForbiddenError)
    BAD_KEY_REQUEST = _e("CE903", "{problem}", "{fix}")
    NO_ACTIVE_KEY = _e("CE904", "no active key {key_id!r}", "pass the key id printed by `keys create` (active: {known})")
    TOO_LARGE = Entry("CE905", "{problem}", "{fix}", TooLargeError)
    MALFORMED_REQUEST = Entry("CE906", "{problem}", "{fix}", MalformedRequestError)
    NO_ENDPOINT = Entry("CE908", "{method} {path}: {detail}", "see GET /openapi.json for the endpoints and their methods",
                        NoEndpointError)
    INTERNAL = _e("CE909", "internal error ({kind})", "this is a bug: report it with the request; nothing was half-stored")

    @classmethod
    def entries(cls) -> dict[str, Entry[Any]]:
        """Name -> entry, in catalog order."""
        return {name: value for name, value in vars(cls).items() if isinstance(value, Entry)}
