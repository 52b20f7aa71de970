"""context-editor: conversations -> provenance-tagged state -> minimal per-action XML context.

Public API: `ContextEditor`, `add_together` and `render_together` (a conversation across domains), `load_domain`,
`Message`, `State`.

The names are imported on first use (PEP 562), so `context-editor --help` and the light modules
(`errors`, `registry`) don't pay for the whole pipeline's imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .domain import load_domain
    from .model import Message, State, session_key
    from .pipeline import ContextEditor, add_together, render_together

_HOME = {"ContextEditor": ".pipeline", "render_together": ".pipeline", "add_together": ".pipeline", "load_domain": ".domain", "Message": ".model", "State": ".model",
         "session_key": ".model"}

__all__ = ["ContextEditor", "add_together", "render_together", "load_domain", "Message", "State", "session_key"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'context_editor' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name], __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value
