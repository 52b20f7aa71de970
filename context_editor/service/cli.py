"""`context-editor serve` and `context-editor keys create|revoke|list`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import Errors, MissingExtraError
from ..registry import OWN_COMMANDS
from ..store import open_store
from . import keys


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from .app import create_app
    except ImportError as exc:
        raise MissingExtraError(exc.name or "fastapi", "service", "context-editor serve") from None
    app = create_app(args.store, max_body_bytes=args.max_body_bytes, max_message_bytes=args.max_message_bytes)
    print(f"context-editor service on http://{args.host}:{args.port} (store {app.state.service.store.url}); "
          "OpenAPI at /openapi.json, inspector at /ui/sessions", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def cmd_keys_create(args: argparse.Namespace) -> int:
    if not args.tenant:
        raise Errors.BAD_KEY_REQUEST(problem="a key needs a tenant", fix="pass --tenant T")
    key, record = keys.create_key(open_store(args.store), args.tenant, args.role)
    print(key)
    print(f"key {record.key_id}: tenant {record.tenant}, role {record.role}. This is the only time the key is "
          "shown; the store keeps its hash.", file=sys.stderr)
    return 0


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    keys.revoke_key(open_store(args.store, create=False), args.key_id)
    print(f"key {args.key_id} revoked", file=sys.stderr)
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    for k in open_store(args.store, create=False).keys():
        revoked = f"  REVOKED {k.revoked}" if k.revoked else ""
        print(f"{k.key_id}  {k.tenant}  {k.role:<8} created {k.created}{revoked}")
    return 0


_FORMAT = argparse.RawDescriptionHelpFormatter


def register_serve(sub: Any) -> None:
    """`context-editor serve` (entry point in the context_editor.commands group)."""
    help_ = OWN_COMMANDS["serve"]
    p = sub.add_parser("serve", help=help_, description=help_, formatter_class=_FORMAT)
    p.set_defaults(func=cmd_serve)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8300, help="port (default 8300)")
    p.add_argument("--max-body-bytes", type=int, default=8_000_000, metavar="N",
                   help="larger requests get 413 (default 8 MB)")
    p.add_argument("--max-message-bytes", type=int, default=1_000_000, metavar="N",
                   help="a larger message in a request gets 413 (default 1 MB)")


def register_keys(sub: Any) -> None:
    """`context-editor keys create|revoke|list` (entry point in the context_editor.commands group)."""
    help_ = OWN_COMMANDS["keys"]
    p = sub.add_parser("keys", help=help_, description=help_, formatter_class=_FORMAT)
    keys_sub = p.add_subparsers(dest="keys_command", required=True, metavar="SUBCOMMAND")
    k = keys_sub.add_parser("create", help="print a new key once (stdout) for --tenant T; the store keeps its hash")
    k.add_argument("--role", default="writer", choices=list(keys.ROLES),
                   help="writer: add, read, verify, export; reader: read; auditor: read, verify, export")
    k.set_defaults(func=cmd_keys_create)
    k = keys_sub.add_parser("revoke", help="revoke a key by its id (the part between ce_ and the next _)")
    k.add_argument("key_id")
    k.set_defaults(func=cmd_keys_revoke)
    k = keys_sub.add_parser("list", help="key ids, tenants, roles and revocations (never the keys)")
    k.set_defaults(func=cmd_keys_list)
