"""context-editor: conversations -> provenance-tagged state -> minimal per-action XML context.

Public API: `ContextEditor`, `load_domain`, `Message`, `State`.
"""

from .domain import load_domain
from .model import Message, State, session_key
from .pipeline import ContextEditor

__all__ = ["ContextEditor", "load_domain", "Message", "State", "session_key"]
__version__ = "0.1.0"
