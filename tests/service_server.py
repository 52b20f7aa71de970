"""Start the real service (`context-editor serve`) on 127.0.0.1 for the tests and the load benchmark."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout

import httpx

from context_editor.cli import main


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def create_key(store: str, tenant: str, role: str = "writer") -> str:
    """A key made by the CLI's own command, in this process (printed once on stdout)."""
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        assert main(["keys", "create", "--tenant", tenant, "--role", role, "--store", store]) == 0
    return out.getvalue().strip()


@contextmanager
def running_service(store: str, *extra: str, timeout: float = 30.0) -> Iterator[str]:
    """`context-editor serve --store STORE` on a free loopback port; yields its base URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "context_editor", "serve", "--store", store, "--host", "127.0.0.1",
                             "--port", str(port), *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the service exited: {proc.stderr.read().decode() if proc.stderr else ''}")
            try:
                if httpx.get(f"{base}/healthz", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the service did not answer /healthz in time")
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
