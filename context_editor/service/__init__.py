"""The HTTP face: `context-editor serve` runs an ASGI app (FastAPI on uvicorn) over one store.

Nothing below the faces imports this package; it needs the `service` extra (imported from
`context_editor.service.app` only when the service runs, so the CLI starts without it).
Several service processes may share one store (SQLite file or PostgreSQL): each validates its
cached state against the store on every read.
"""
