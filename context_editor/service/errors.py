"""Every error the service returns is JSON with the CLI's code, message and fix:

    {"error": {"code": "CE…", "message": "...", "fix": "..."}}

The HTTP status follows from the kind of error (the codes live in the catalog, `errors.Errors`);
nothing returns a traceback.
"""

from __future__ import annotations

from typing import Any

from ..errors import (AuthError, BudgetError, ContextEditorError, DomainError, Errors, ForbiddenError,
                      MalformedRequestError, NoEndpointError, SessionDomainError, SessionNotFoundError,
                      StoreConflictError, StoreError, TooLargeError)

# Most specific first: the first class an error is an instance of gives its status.
_STATUS: list[tuple[type[ContextEditorError], int]] = [
    (AuthError, 401), (ForbiddenError, 403), (TooLargeError, 413), (MalformedRequestError, 400),
    (NoEndpointError, 404), (SessionNotFoundError, 404), (SessionDomainError, 409), (StoreConflictError, 409),
    (StoreError, 503), (BudgetError, 422), (DomainError, 422),
]


def status_for(exc: ContextEditorError) -> int:
    if exc.code == Errors.NO_DOMAIN.code:  # an unknown domain name: nothing by that name here
        return 404
    return next((status for kind, status in _STATUS if isinstance(exc, kind)), 400)


def error_body(exc: ContextEditorError) -> dict[str, Any]:
    return {"error": {"code": exc.code, "message": exc.message, "fix": exc.fix,
                      **({"line": exc.line} if exc.line else {})}}
