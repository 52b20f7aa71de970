"""Registries: named extension points filled through entry points, spaCy-style.

A third-party package extends context-editor by declaring entry points in its own metadata,
with no change here; the built-ins are registered the same way in our `pyproject.toml`:

    [project.entry-points."context_editor.stores"]
    redis = "my_package.store:from_url"

Each group names what its objects must be (see the `Registry` instances below). An entry is
loaded on first use and cached. `register()` adds an object for the running process (tests,
notebooks); it wins over an entry point of the same name.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .errors import Errors

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

T = TypeVar("T")

# The commands this package itself registers in the `context_editor.commands` group (see
# pyproject.toml), each with its one-line help, which its register function also uses: the CLI
# lists them in `--help` without scanning every installed distribution's metadata
# (importlib.metadata and the scan are a third of a bare start-up). A test checks this table
# against the entry points.
OWN_COMMANDS = {
    "import": "Write editable domain files from a published dialogue schema.",
    "bench": "Measure accuracy, context size and speed on a real dialogue dataset.",
    "serve": "Run the HTTP service (API under /v1, OpenAPI at /openapi.json, inspector at /ui/sessions).",
    "keys": "API keys of the service: one tenant and role per key; only a hash is stored.",
    "train": "Train a model (NER) for domains to use.",
    "backfill": "Re-run stored sessions under a new version of their domain, in memory, and report what would "
                "change (diff.jsonl, report.md); --apply moves the changed sessions to it.",
}


@lru_cache(maxsize=32)
def _scan(group: str, path: tuple[str, ...]) -> dict[str, EntryPoint]:
    """The group's entry points as installed on `path` (sys.path). Scanning every distribution's
    metadata costs ~10 ms, so it is done once per group and sys.path: a package put on sys.path
    at run time (a test, a notebook) is seen, and hot paths (open_store, lint) pay nothing.
    importlib.metadata (with the email package it reads metadata with) is imported here, on the
    first use of a registry, not when the CLI starts."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=group)}


class Registry(Generic[T]):
    """One entry-point group: name -> object, loaded lazily."""

    def __init__(self, group: str, what: str):
        self.group = group
        self.what = what  # "store URL scheme", "language", … (for error messages)
        self._loaded: dict[str, T] = {}
        self._local: dict[str, T] = {}

    def _entry_points(self) -> dict[str, EntryPoint]:
        return _scan(self.group, tuple(sys.path))

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        return sorted(set(self._entry_points()) | set(self._local))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._local or name in self._entry_points())

    def get(self, name: str) -> T:
        """The object registered as `name`; a CE error naming the known ones otherwise."""
        if name in self._local:
            return self._local[name]
        if name not in self._loaded:
            ep = self._entry_points().get(name)
            if ep is None:
                known = ", ".join(self.names()) or "none"
                raise Errors.NOT_REGISTERED(what=self.what, name=name, group=self.group, known=known)
            self._loaded[name] = ep.load()
        return self._loaded[name]

    def all(self) -> dict[str, T]:
        """Every registered object by name (loads them all)."""
        return {name: self.get(name) for name in self.names()}

    def register(self, name: str, obj: T) -> T:
        """Register `obj` as `name` for this process (it shadows an entry point of that name)."""
        self._local[name] = obj
        return obj

    def unregister(self, name: str) -> None:
        self._local.pop(name, None)
        self._loaded.pop(name, None)


stores: Registry[Any] = Registry("context_editor.stores", "store URL scheme")
"""URL scheme -> a factory `(url: str, create: bool = True) -> Store` (see `store.base.Store`).

`open_store("redis://host/0")` calls the factory registered as `redis` with the whole URL;
`create=False` (read-only commands) must not create a store that does not exist. The store must
pass the contract suite in `tests/test_store_contract.py`. Built-ins: `store/urls.py`."""

extractors: Registry[Any] = Registry("context_editor.extractors", "extractor")
"""Name -> a callable `(text: str) -> list[(start, end, text, label)]`, deterministic, with
spans that index the text exactly (`text[start:end]`); an optional `confidence` attribute
(default 0.8) goes into provenance.

A field's `extract: [caps.WORD]` takes the spans labelled `WORD` from the extractor registered as
`caps` (provenance `caps:WORD`). The built-in `ner` is spaCy's NER (`extract: [ner.GPE]`, English
text only, provenance `ner:<model>:<label>`)."""

scorers: Registry[Any] = Registry("context_editor.scorers", "scorer")
"""Name -> a callable `(message: Message, ctx: dict) -> float` on the articles' 1-5 scale
(relevance of an older message to the action being rendered), optionally with
`score_batch(messages, ctx) -> list[float]`. `ctx` holds `vocabulary` (action words),
`source_indexes` (messages that set shown values), `references` (IDs in state), `round`,
`action`, `description`, `goal` and `subtask`. Any scorer goes through the thresholds (>= 4
keep, 3 fill by recency, <= 2 compress). The built-in `relevance` is `inject.history.rule_score`."""

summarizers: Registry[Any] = Registry("context_editor.summarizers", "summarizer")
"""Name -> a callable `(text: str, ctx: dict) -> str`: distils one trace (a message or a run of
tool output) into one short line. Its result is checked by rules (`llm.distil.check_line`); a
line that fails falls back to the extractive one. The built-in `extractive` is
`memory.summary.extractive_line`."""

tokenizers: Registry[Any] = Registry("context_editor.tokenizers", "tokenizer")
"""Encoding name -> a factory `() -> encoder` whose `encode(text: str) -> list[int]` gives exact
token ids. Built-ins: tiktoken's `o200k_base`, `cl100k_base`, read offline from the `bpe-openai`
package. The one exception to exact counts is a factory returning an `inject.tokens.Tokenizer`
with `estimated = True` (built-in: `claude`, for models without a published tokenizer): its
contexts say `tokens_estimated="true"`. A Hugging Face tokenizer.json is named by its path, not
registered (`inject.tokens.tokenizer_for`)."""

languages: Registry[Any] = Registry("context_editor.languages", "language")
"""Language code -> a `lang.Language` (code, directory of `lexicon.yaml` and rule packs).

Detection, lexicons and rule packs are driven by what is registered: a language added as data
(a `lexicon.yaml` and rule packs) needs only `Language("es", path)` behind an entry point."""

commands: Registry[Any] = Registry("context_editor.commands", "command")
"""CLI subcommand name -> `register(subparsers) -> None`, which adds that command's parser with
`set_defaults(func=handler)`; the handler takes the parsed arguments and returns the exit code.
A command is loaded only when the command line names it (`context-editor bench …`), so the main
CLI does not import the benchmark package at start-up. Built-ins: `import`, `bench`."""

engines: Registry[Any] = Registry("context_editor.engines", "engine")
"""Name -> a factory `(address: str | None, workers: int | None) -> Engine` (see
`backfill.engines.Engine`): where `backfill`, `audit verify --all` and `replay --all` run their
batches. Built-ins: `local` (this process) and `ray` (a Ray cluster, the [ray] extra)."""
