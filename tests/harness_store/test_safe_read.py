"""harness_store.safe_read: a workspace file is read only if it is a regular file, never blocking,
never past its cap; and the project store reads its repository files through it."""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness_store import ProjectStore
from harness_store.safe_read import Refused, is_regular, read_bytes, read_prefix, read_text, warn_once

FINISH_SECONDS = 60.0  # generous: a call that blocks fails the test instead of hanging it


def _finishes(call: Callable[[], Any]) -> Any:
    """`call()`'s result, run in a thread; fails (not hangs) when it does not return."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(FINISH_SECONDS)
    assert not thread.is_alive(), "the read blocked"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _link(path: Path, target: str) -> Path:
    path.symlink_to(target)
    return path


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda p: _fifo(p), "a FIFO"),
        (lambda p: _link(p, "/dev/zero"), "a device"),
        (lambda p: _link(p, p.name), "a symlink loop"),
        (lambda p: _link(p, "/proc/self/environ"), "a kernel pseudo-file"),
    ],
    ids=["fifo", "dev_zero", "symlink_loop", "proc_environ"],
)
def test_a_path_that_is_not_a_regular_file_is_refused_without_blocking(
    tmp_path: Path, make: Callable[[Path], Path], reason: str
) -> None:
    path = make(tmp_path / "SKILL.md")
    with pytest.raises(Refused, match=reason):
        _finishes(lambda: read_bytes(path, limit=1024, follow=True))
    with pytest.raises(Refused, match=reason):
        _finishes(lambda: read_prefix(path, 64, follow=True))


def test_a_final_symlink_is_refused_unless_following_is_asked_for(tmp_path: Path) -> None:
    (tmp_path / "real.md").write_text("hello", encoding="utf-8")
    link = _link(tmp_path / "link.md", "real.md")
    with pytest.raises(Refused, match="a symlink"):
        read_text(link, limit=1024)
    assert read_text(link, limit=1024, follow=True) == "hello"
    assert not is_regular(link) and is_regular(link, follow=True)


def test_a_file_over_the_cap_is_refused_from_its_size_and_a_prefix_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "big.md"
    with path.open("wb") as fh:
        fh.write(b"---\nname: big\n---\n")
        fh.truncate(60 * 1024 * 1024)
    with pytest.raises(Refused, match="over the 1024-byte cap"):
        read_bytes(path, limit=1024)
    assert read_prefix(path, 8) == b"---\nname"


def test_a_read_from_an_offset_counts_the_cap_from_there(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_bytes(b"0123456789")
    assert read_bytes(path, limit=4, offset=6) == b"6789"
    with pytest.raises(Refused, match="over the 4-byte cap"):
        read_bytes(path, limit=4, offset=5)


def test_warn_once_logs_a_path_one_time(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "once.md"
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            warn_once(path, "a FIFO, not read")
    assert [r.getMessage() for r in caplog.records].count(f"skipped {path}: a FIFO, not read") == 1


def test_the_project_store_skips_a_fifo_entry_and_a_fifo_history(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    harness = repo / ".continual-acp" / "harness"
    (harness / "entries" / "prompt").mkdir(parents=True)
    _fifo(harness / "entries" / "prompt" / "trap.md")
    _fifo(harness / "history.jsonl")
    _fifo(harness / "tombstones.jsonl")
    state = _finishes(lambda: ProjectStore(repo).state)
    assert state.entries["prompt"] == {}
