"""Transform: candidates -> edits (conflict policies, TTL expiry, the state machine)."""

from .fields import edit, expiry_edits, field_edits
from .machine import PhaseMachine

__all__ = ["edit", "expiry_edits", "field_edits", "PhaseMachine"]
