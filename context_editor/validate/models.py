"""Validate, part 1: Pydantic types generated from the domain file.

Each field gets a TypeAdapter for its type with the domain's constraints (bounds, lengths,
patterns, enum membership). A value that fails is rejected with the field's `error_code`, or a
code derived from the field and the failed check, so an auditor sees *why* in the log.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, TypeAdapter, ValidationError

from ..domain import Domain, FieldSpec
from ..model import is_no_preference


class Money(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    amount: float
    currency: Annotated[str, Field(pattern=r"^[A-Z]{3}$")]


def _bounds(c: dict[str, Any]) -> dict[str, Any]:
    return {k: c[k] for k in ("gt", "ge", "lt", "le") if k in c}


def _lengths(c: dict[str, Any]) -> dict[str, Any]:
    return {k: c[k] for k in ("min_length", "max_length") if k in c}


def _item_type(items: dict[str, Any]) -> Any:
    if items.get("values"):
        return Literal[tuple(items["values"])]
    if items.get("pattern"):
        return Annotated[str, Field(pattern=items["pattern"])]
    return str


def field_type(spec: FieldSpec) -> Any:
    """The Pydantic type of a field, constraints included."""
    c = spec.constraints
    if spec.type == "money":
        bounded = Annotated[float, Field(**_bounds(c))]
        return type(f"Money_{spec.name}", (Money,), {"__annotations__": {"amount": bounded}})
    if spec.type == "int":
        return Annotated[int, Field(strict=True, **_bounds(c))]
    if spec.type in ("float", "percent", "duration"):
        return Annotated[float, Field(**_bounds(c))]
    if spec.type == "bool":
        return StrictBool
    if spec.type == "enum":
        return Literal[tuple(spec.values)]
    if spec.type == "date":
        return date
    if spec.type == "datetime":
        return datetime
    if spec.type == "time":
        return Annotated[str, Field(pattern=r"^(?:[01][0-9]|2[0-3]):[0-5][0-9]$")]
    if spec.type == "list":
        return Annotated[list.__class_getitem__(_item_type(spec.items)), Field(**_lengths(c))]
    pattern: dict[str, Any] = {"pattern": spec.pattern} if spec.pattern else {}
    return Annotated[str, Field(min_length=1, **_lengths(c), **pattern)]


def error_code(spec: FieldSpec, err: ValidationError) -> str:
    """The domain's code for this field, else VALIDATION_ERROR_<FIELD>_<CHECK>."""
    if spec.constraints.get("error_code"):
        return str(spec.constraints["error_code"])
    kind = err.errors()[0]["type"].upper().replace("-", "_")
    return f"VALIDATION_ERROR_{spec.name.upper()}_{kind}"


class FieldValidator:
    """Validates candidate values of every field of a domain."""

    def __init__(self, domain: Domain):
        self.specs = domain.fields
        self.adapters = {name: TypeAdapter(field_type(spec)) for name, spec in domain.fields.items()}

    def check(self, field: str, value: Any) -> tuple[str, str] | None:
        """None when valid, else (error code, human message). No preference is a value of every type."""
        if is_no_preference(value):
            return None
        try:
            self.adapters[field].validate_python(value)
        except ValidationError as err:
            first = err.errors()[0]
            return error_code(self.specs[field], err), f"{field}: {first['msg']} (got {value!r})"
        return None
