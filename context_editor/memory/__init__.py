"""Memory beyond the schema: the summary zone over all of a session's history.

Derived data only: everything here can be rebuilt from the raw messages (`SummaryZone.rebuild`).
"""

from ..inject.compact import STAGE_ROUNDS
from .summary import SummaryZone, lines_of

__all__ = ["SummaryZone", "lines_of", "STAGE_ROUNDS"]
