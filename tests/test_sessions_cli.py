"""`continual-acp sessions` lists the ids `--session` takes; `harness --help` names `--json`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agent_core import SessionStore


def _run(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTINUAL_ACP_HOME": str(home), "XDG_CONFIG_HOME": str(home / "xdg")}
    return subprocess.run(
        [sys.executable, "-m", "acp_server", *args], env=env, capture_output=True, text=True, timeout=60
    )


def _two_sessions(home: Path, tmp_path: Path) -> tuple[Path, Path]:
    store = SessionStore(home)
    first, second = tmp_path / "proj-a", tmp_path / "proj-b"
    first.mkdir()
    second.mkdir()
    for sid, cwd, title in (("sess-a", first, "Plot the data"), ("sess-b", second, None)):
        store.create(sid, str(cwd))
        store.write_meta(
            sid, cwd=str(cwd.resolve()), title=title, created_at="2026-12-01T09:00:00Z", updated_at="x"
        )
    return first, second


def test_harness_help_lists_the_json_option(tmp_path: Path) -> None:
    done = _run(["harness", "--help"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "--json" in done.stdout and "continual-acp sessions" in done.stdout


def test_sessions_lists_each_session_with_its_cwd_and_title(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first, _ = _two_sessions(home, tmp_path)
    done = _run(["sessions", "--json"], home)
    assert done.returncode == 0, done.stderr
    rows = {row["sessionId"]: row for row in json.loads(done.stdout)}
    assert set(rows) == {"sess-a", "sess-b"}
    assert rows["sess-a"]["cwd"] == str(first.resolve()) and rows["sess-a"]["title"] == "Plot the data"
    assert rows["sess-b"]["title"] is None and rows["sess-b"]["updatedAt"]


def test_sessions_cwd_keeps_one_projects_sessions(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first, _ = _two_sessions(home, tmp_path)
    done = _run(["sessions", "--cwd", str(first)], home)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("sess-a  ") and "sess-b" not in done.stdout


def test_harness_sessions_is_the_same_listing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _two_sessions(home, tmp_path)
    done = _run(["harness", "sessions", "--json"], home)
    assert done.returncode == 0, done.stderr
    assert sorted(row["sessionId"] for row in json.loads(done.stdout)) == ["sess-a", "sess-b"]


def test_sessions_with_no_data_dir_says_there_are_none(tmp_path: Path) -> None:
    done = _run(["sessions"], tmp_path / "never-made")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("no sessions in ")
    assert not (tmp_path / "never-made").exists()
