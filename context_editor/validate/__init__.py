"""Validate: typed field checks (Pydantic) and business rules, turning bad edits into rejections."""

from .models import FieldValidator
from .rules import violations

__all__ = ["FieldValidator", "violations"]
