"""Shared fixtures: the bundled sample conversation and editors on real stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from context_editor import ContextEditor
from context_editor.conversation import read_conversation

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "domains" / "samples" / "ecommerce_headphones.jsonl"


@pytest.fixture
def headphones() -> list[dict]:
    return read_conversation(str(SAMPLE))


@pytest.fixture(params=["memory", "sqlite"])
def editor(request, tmp_path) -> ContextEditor:
    store = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'ce.db'}"
    return ContextEditor("ecommerce", store)
