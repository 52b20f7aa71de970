"""What the renderer keeps on disk between processes, so a fresh process renders soon.

Everything here is derived from files that ship with the package or a domain (BPE ranks, Jinja
templates), keyed by their contents, and checked on read: a missing, stale or damaged entry
costs only the work it would have saved. The directory is `$CONTEXT_EDITOR_CACHE` (default
`~/.cache/context-editor`); an unwritable one disables the cache.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import jinja2
from jinja2 import FileSystemBytecodeCache


def cache_dir() -> Path:
    return Path(os.environ.get("CONTEXT_EDITOR_CACHE") or Path.home() / ".cache" / "context-editor")


def template_bytecode(settings: str) -> FileSystemBytecodeCache | None:
    """Jinja's compiled templates, cached (compiling the bundled ones costs ~30-80 ms per process).

    Jinja keys an entry by the template's name and checks it against a checksum of its source and
    its own version and Python's; the compiled code also depends on the environment's settings
    (autoescape, sandbox, finalize), which Jinja does not check, so each set of `settings` gets
    its own folder."""
    tag = hashlib.sha256(f"{settings}|{jinja2.__version__}|{sys.version}".encode()).hexdigest()[:16]
    folder = cache_dir() / f"jinja-{tag}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(folder, os.W_OK):
        return None
    return FileSystemBytecodeCache(str(folder))
