"""A session unbound before its deferred setup ran (session/close right after session/new) still
publishes `ended` in its quiescence file, like a session whose publisher was watching it."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from acp_server.ports import OpenSession
from acp_server.sessions.methods import _unbind
from acp_server.sessions.quiescence_file import read_quiescence


def _never_built() -> Any:
    raise AssertionError("unbinding must not set the session up")


def _opened(directory: Path) -> OpenSession:
    session: Any = SimpleNamespace(id="sess-1", session_dir=directory)
    return OpenSession(session, editor=None, presenter=None, build_harness=_never_built)  # type: ignore[arg-type]


def test_a_session_unbound_before_its_setup_is_published_as_ended(tmp_path: Path) -> None:
    opened = _opened(tmp_path)
    assert not opened.is_set_up
    _unbind(opened)
    reading = read_quiescence(tmp_path, "sess-1", is_open=None, owner_pid=None)
    assert (reading.state, reading.reason) == (
        "not running",
        f"the session was closed by its server (pid {os.getpid()})",
    )


def test_unbinding_a_session_whose_directory_is_gone_writes_nothing(tmp_path: Path) -> None:
    gone = tmp_path / "deleted"
    _unbind(_opened(gone))
    assert not gone.exists()
