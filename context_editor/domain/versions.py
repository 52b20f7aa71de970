"""What a process compiles once per domain version (enum matchers, extractors), kept for a few versions.

Every editor of a version shares one compiled copy (a new editor, say one reopening a session,
compiles nothing again); a long-running process that sees many versions keeps only the newest few,
the oldest dropped first (first in, first out: a version stops being used, it does not come back).
"""

from __future__ import annotations

from typing import Callable, Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

VERSIONS = 32  # domain versions whose compiled parts are kept (a process serves a few)


class PerVersion(Generic[K, V]):
    """A bounded map from a domain version's key to what was compiled for it."""

    def __init__(self, limit: int = VERSIONS) -> None:
        self.limit = limit
        self._kept: dict[K, V] = {}

    def get(self, key: K, make: Callable[[], V]) -> V:
        """The value kept for `key`, made (and kept, dropping the oldest past the limit) if there is none."""
        known = self._kept.get(key)
        if known is None:
            if len(self._kept) >= self.limit:
                self._kept.pop(next(iter(self._kept)))
            known = self._kept[key] = make()
        return known

    def __len__(self) -> int:
        return len(self._kept)
