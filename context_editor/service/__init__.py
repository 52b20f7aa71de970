"""The HTTP face: `context-editor serve` runs an ASGI app (FastAPI on uvicorn) over one store.

Nothing below the faces imports this package; it needs the `service` extra. Several service
processes may share one store (SQLite file or PostgreSQL): each validates its cached state
against the store on every read.
"""

from __future__ import annotations

from typing import Any

from . import keys
from .app import create_app


def serve(store: str | None, host: str = "127.0.0.1", port: int = 8300, **limits: Any) -> None:
    """Run the service until interrupted (`limits`: max_body_bytes, max_message_bytes)."""
    import uvicorn

    uvicorn.run(create_app(store, **limits), host=host, port=port, log_level="warning")


__all__ = ["create_app", "serve", "keys"]
