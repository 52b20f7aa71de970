"""A throwaway PostgreSQL server for the tests and the concurrency benchmark.

The PostgreSQL store's locking is what needs testing, so it runs against a real server, but
not the system service: `postgres_url()` starts a private cluster in a temp directory on a free
127.0.0.1 port with trust auth, and deletes it afterwards. Set CONTEXT_EDITOR_TEST_PG to a
postgresql:// URL to use an existing server instead.
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql

ENV_URL = "CONTEXT_EDITOR_TEST_PG"
PG_ROOT = Path("/usr/lib/postgresql")
NOT_INSTALLED = f"PostgreSQL server binaries not found under {PG_ROOT}; apt-get install postgresql"


def find_bindir() -> Path | None:
    """The newest Debian PostgreSQL bin directory that has initdb and pg_ctl."""
    dirs = [p.parent for p in PG_ROOT.glob("*/bin/initdb") if (p.parent / "pg_ctl").exists()]
    return max(dirs, key=lambda d: [int(n) for n in re.findall(r"\d+", d.parent.name)], default=None)


def _is_root() -> bool:
    return os.geteuid() == 0


def unavailable_reason() -> str | None:
    """Why no server can be had here (with how to fix it), or None when one can."""
    if os.environ.get(ENV_URL):
        return None
    if find_bindir() is None:
        return NOT_INSTALLED
    if _is_root():
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root but there is no 'postgres' OS user to run initdb as; apt-get install postgresql creates it"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd: list, log: Path | None = None) -> None:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
        raise RuntimeError(f"{shlex.join(str(c) for c in cmd)} failed ({done.returncode}):\n"
                           f"{done.stdout}{done.stderr}{tail}")


@contextmanager
def postgres_url(dbname: str = "ce_test") -> Iterator[str]:
    """Yield the URL of an empty database on a fresh private server; stop and delete it on exit.

    Raises RuntimeError (saying why) when `unavailable_reason()` is not None or the server fails.
    """
    if os.environ.get(ENV_URL):
        yield os.environ[ENV_URL]
        return
    if reason := unavailable_reason():
        raise RuntimeError(reason)
    bindir = find_bindir()
    # initdb refuses to run as root, so as root the cluster belongs to the `postgres` OS user.
    as_owner = ["runuser", "-u", "postgres", "--"] if _is_root() else []
    tmp = Path(tempfile.mkdtemp(prefix="ce-pg-"))
    data, log, port = tmp / "data", tmp / "server.log", _free_port()
    try:
        if as_owner:
            shutil.chown(tmp, "postgres", "postgres")
        _run(as_owner + [bindir / "initdb", "-D", data, "-U", "postgres", "-A", "trust",
                         "-E", "UTF8", "--locale=C", "--no-sync"])
        options = f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={tmp}"
        _run(as_owner + [bindir / "pg_ctl", "-D", data, "-l", log, "-o", options, "-w", "start"], log)
        try:
            base = f"postgresql://postgres@127.0.0.1:{port}"
            with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
            yield f"{base}/{dbname}"
        finally:
            subprocess.run(as_owner + [str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                           capture_output=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
