"""The data dir is private and never leads elsewhere.

Every directory the server creates is 0700, walked after a real session that ran a cell with big
output, wrote local and global harness entries and closed (snapshot). A symlink planted under
`<home>/sessions/` is refused, and nothing is written where it points.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from defect_support import RpcError, new_session, prompt, served

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

CELL = (
    "harness.create('memory', 'Local note', 'kept in this session')\n"
    "harness.create('memory', 'Global note', 'kept for every session', global_=True)\n"
    "big = 'y' * 10\n"
    "print('x' * 200_000)\n"
)


def test_every_directory_the_server_creates_is_private(tmp_path: Path) -> None:
    home = tmp_path / "not" / "yet" / "home"
    project = tmp_path / "project"
    project.mkdir()
    with ScriptedModelServer([tool_call(CELL, title="write"), text("done")]) as model:
        client_home = home
        with served(client_home, project, model.base_url, HOME=str(tmp_path / "user")) as client:
            sid, _ = new_session(client, str(project))
            assert prompt(client, sid, "remember things", timeout=120)[0] == "end_turn"
            client.request("session/close", {"sessionId": sid})
    created = [tmp_path / "not", tmp_path / "not" / "yet"]
    created += [Path(root) / name for root, dirs, _ in os.walk(home) for name in dirs]
    created.append(home)
    assert (home / "sessions" / sid / "cells").is_dir() and (home / "harness").is_dir()
    loose = {
        str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.stat().st_mode))
        for p in created
        if stat.S_IMODE(p.stat().st_mode) != 0o700
    }
    assert loose == {}


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_a_symlink_planted_as_a_session_directory_is_refused_and_nothing_is_written_through_it(
    tmp_path: Path, method: str
) -> None:
    home = tmp_path / "home"
    project = tmp_path / "project"
    project.mkdir()
    with served(home, project) as first:
        sid, _ = new_session(first, str(project))
    first.proc.wait(timeout=60)  # its last writes (the session's ended quiescence file) are done
    # Move the real session out of the data dir and leave a link in its place.
    outside = tmp_path / "outside"
    (home / "sessions" / sid).rename(outside)
    (home / "sessions" / sid).symlink_to(outside, target_is_directory=True)
    before = {p.name: p.stat().st_mtime_ns for p in outside.iterdir()}
    with served(home, project) as client:
        with pytest.raises(RpcError) as refused:
            client.request(method, {"sessionId": sid, "cwd": str(project), "mcpServers": []})
    assert (refused.value.code, "symbolic link" in refused.value.message) == (-32602, True)
    assert {p.name: p.stat().st_mtime_ns for p in outside.iterdir()} == before
