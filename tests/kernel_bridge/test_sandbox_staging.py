"""The host copies a sandboxed kernel's staged snapshot: what the kernel planted there is data."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from kernel_bridge.sandbox import _copy_private


def test_a_staged_symlink_is_not_followed_into_the_servers_own_files(tmp_path: Path) -> None:
    secret = tmp_path / "server-only"
    secret.write_text("OPENAI_API_KEY=sk-test")
    staged = tmp_path / "staging" / "kernel-state.json"
    staged.parent.mkdir()
    staged.symlink_to(secret)
    target = tmp_path / "session" / "kernel-state.json"
    target.parent.mkdir()
    with pytest.raises(OSError):
        _copy_private(staged, target)
    assert not target.exists()
    assert not list(target.parent.iterdir())  # no temp file left


def test_a_staged_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    staged = tmp_path / "kernel-state.dill"
    os.mkfifo(staged)
    done = threading.Event()
    failure: list[BaseException] = []

    def copy() -> None:
        try:
            _copy_private(staged, tmp_path / "out")
        except BaseException as exc:
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=copy, daemon=True).start()
    assert done.wait(10), "the copy blocked on the FIFO"
    assert failure and isinstance(failure[0], OSError)


def test_a_regular_staged_file_is_copied_private(tmp_path: Path) -> None:
    staged = tmp_path / "kernel-state.json"
    staged.write_text('{"saved": {}}')
    target = tmp_path / "copy.json"
    _copy_private(staged, target)
    assert target.read_text() == '{"saved": {}}' and (target.stat().st_mode & 0o777) == 0o600
