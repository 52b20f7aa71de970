"""Every error the service returns is JSON with the CLI's code, message and fix:

    {"error": {"code": "CE501", "message": "...", "fix": "..."}}

The HTTP status follows from the code; nothing returns a traceback.
"""

from __future__ import annotations

from typing import Any

from ..errors import ContextEditorError, SessionNotFoundError, StoreConflictError


class TooLargeError(ContextEditorError):
    code = "CE805"  # HTTP 413


class MalformedRequestError(ContextEditorError):
    code = "CE806"  # HTTP 400: not JSON, or not the documented shape


class DomainMismatchError(ContextEditorError):
    code = "CE807"  # HTTP 409: a session stays with the domain it was created with


class NotFoundError(ContextEditorError):
    code = "CE808"  # HTTP 404: no such endpoint


INTERNAL = "CE809"  # HTTP 500: a bug; logged, never shown as a traceback

# Status by exact code first, then by the code's hundred.
_BY_CODE = {"CE002": 400, "CE103": 404, "CE801": 401, "CE802": 403, "CE805": 413, "CE806": 400, "CE807": 409,
            "CE808": 404, "CE300": 400, "CE301": 400, "CE400": 422}
_BY_FAMILY = {"CE0": 400, "CE1": 422, "CE2": 400, "CE3": 400, "CE4": 400, "CE5": 503, "CE6": 503, "CE7": 400, "CE8": 400}


def status_for(exc: ContextEditorError) -> int:
    if isinstance(exc, SessionNotFoundError):
        return 404
    if isinstance(exc, StoreConflictError):
        return 409
    return _BY_CODE.get(exc.code) or _BY_FAMILY.get(exc.code[:3], 400)


def error_body(exc: ContextEditorError) -> dict[str, Any]:
    return {"error": {"code": exc.code, "message": exc.message, "fix": exc.fix,
                      **({"line": exc.line} if exc.line else {})}}
