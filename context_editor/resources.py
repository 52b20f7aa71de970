"""Where the bundled files live: the one module that resolves domains, rule packs and templates.

The top-level `domains/`, `rules/` and `templates/` folders of the checkout are shipped as
package data under `context_editor/_bundled/` (symbolic links in the source tree, copied as
files into a wheel), and every reader finds them here through `importlib.resources`, so an
editable install, a wheel in a fresh virtualenv and a zip-free site-packages all work the same.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

_BUNDLED = files("context_editor") / "_bundled"


def _dir(kind: str) -> Path:
    # A regular (unzipped) install: the traversable is a real directory on disk, which the rule
    # loader and Jinja's FileSystemLoader need.
    return Path(str(_BUNDLED / kind)).resolve()


def domains_dir() -> Path:
    """Bundled domain files (`<name>.yaml`) and their sample conversations (`samples/`)."""
    return _dir("domains")


def rules_dir() -> Path:
    """Bundled rule packs: `rules/<lang>/<pack>.yaml`, `rules/<lang>/lexicon.yaml`, `rules/common/`."""
    return _dir("rules")


def templates_dir() -> Path:
    """Bundled Jinja XML templates (`default.xml.j2`, one per action where one exists)."""
    return _dir("templates")


def data_path(name: str) -> Path:
    """A file of the package's own data folder (`context_editor/data/`)."""
    return Path(str(files("context_editor") / "data" / name))


def schema_path() -> Path:
    """The JSON Schema of the domain file."""
    return data_path("domain.schema.json")


def sample_conversation(name: str) -> Path:
    """A bundled sample conversation (`domains/samples/<name>.jsonl`)."""
    return domains_dir() / "samples" / f"{name}.jsonl"
