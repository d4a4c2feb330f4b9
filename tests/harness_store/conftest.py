"""Shared fixture for the harness_store tests: a fresh store in a temp dir (builders: harness_edits.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness_store import HarnessStore


@pytest.fixture
def store(tmp_path: Path) -> HarnessStore:
    return HarnessStore(tmp_path / "harness")
