"""Shared fixtures: the bundled sample conversation and editors on real stores."""

from __future__ import annotations

import hashlib
import itertools
import os
import uuid
from pathlib import Path
from typing import Callable

import psycopg
import pytest
from psycopg import sql

import pg_server

from context_editor import ContextEditor
from context_editor.conversation import read_conversation

ROOT = Path(__file__).resolve().parents[1]


def seeded_salts(seed: str) -> Callable[[], str]:
    """Salts for the commitments of text and values (what erasure keeps): random in use, drawn
    from a counter here, for tests that compare hashes or stored bytes across runs or stores."""
    counter = itertools.count()
    return lambda: hashlib.sha256(f"{seed}/{next(counter)}".encode()).hexdigest()[:32]
SAMPLE = ROOT / "domains" / "samples" / "ecommerce_headphones.jsonl"


@pytest.fixture(scope="session")
def pg_url():
    if reason := pg_server.unavailable_reason():
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set: the PostgreSQL store must be tested there)")
        pytest.skip(reason)
    with pg_server.postgres_url() as url:
        yield url


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_url(request, tmp_path) -> str:
    """A fresh, empty store of every kind in turn: the contract suite and every test that must
    hold on each backend take it."""
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return str(request.getfixturevalue("pg_schema_url"))


@pytest.fixture
def pg_schema_url(pg_url):
    """A URL whose search_path is a fresh schema: every test gets empty tables, and a database
    given through CONTEXT_EDITOR_TEST_PG is never touched outside that schema."""
    schema = f"t_{uuid.uuid4().hex}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    yield f"{pg_url}{'&' if '?' in pg_url else '?'}options=-csearch_path%3D{schema}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def headphones() -> list[dict]:
    return read_conversation(str(SAMPLE))


@pytest.fixture(params=["memory", "sqlite"])
def editor(request, tmp_path) -> ContextEditor:
    store = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'ce.db'}"
    return ContextEditor("ecommerce", store)
