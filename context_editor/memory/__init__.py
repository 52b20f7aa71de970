"""Memory beyond the schema: the summary zone over all of a session's history.

Derived data only: everything here can be rebuilt from the raw messages (`SummaryZone.rebuild`).
"""

from .summary import STAGE_ROUNDS, SummaryZone, lines_of

__all__ = ["SummaryZone", "lines_of", "STAGE_ROUNDS"]
