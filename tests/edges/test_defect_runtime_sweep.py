"""Runtime dirs of killed servers are swept at the next start; live ones are left alone."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from defect_support import new_session, served

from kernel_bridge import runtime_sweep


def _wait_for(predicate, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def _runtime_dirs(tmp: Path) -> set[Path]:
    return {p for p in tmp.iterdir() if p.name.startswith(runtime_sweep.PREFIX)}


def test_a_sigkilled_servers_runtime_dir_is_swept_by_the_next_server_and_live_dirs_stay(
    tmp_path: Path,
) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    live = tmp / "cacp-live-test"
    live.mkdir(mode=0o700)
    runtime_sweep.claim(live)  # owned by this (live) test process
    unowned = tmp / "cacp-no-owner"
    unowned.mkdir(mode=0o700)
    home = tmp_path / "home"
    # An eager kernel (the product default) makes the session's runtime dir at session/new.
    with served(home, tmp_path, TMPDIR=str(tmp), CONTINUAL_ACP_EAGER_KERNEL="1") as first:
        new_session(first, str(tmp_path))
        _wait_for(lambda: len(_runtime_dirs(tmp)) == 3)
        (dead,) = _runtime_dirs(tmp) - {live, unowned}
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(timeout=30)
    assert dead.is_dir() and (dead / runtime_sweep.OWNER_FILE).is_file()
    with served(home, tmp_path, TMPDIR=str(tmp), CONTINUAL_ACP_EAGER_KERNEL="1") as second:
        new_session(second, str(tmp_path))
        _wait_for(lambda: not dead.exists())
        remaining = _runtime_dirs(tmp)
    assert {live, unowned} < remaining and len(remaining) == 3


def test_a_runtime_dir_whose_pid_was_reused_by_another_process_is_swept(tmp_path: Path) -> None:
    stale = tmp_path / "cacp-reused"
    stale.mkdir()
    # This process's pid, but a start time it never had: the owner died and the pid was reused.
    (stale / runtime_sweep.OWNER_FILE).write_text(f"{os.getpid()} 1\n", encoding="ascii")
    assert runtime_sweep.sweep_dead(tmp_path) == [stale]


def test_a_runtime_dir_appears_only_with_its_complete_owner_file(tmp_path: Path) -> None:
    """Made under a name the sweep ignores and renamed into place: a server killed while making it
    cannot leave a `cacp-*` dir with an empty owner file (which no sweep could ever judge)."""
    made = runtime_sweep.create_runtime_dir(tmp_path)
    assert made.name.startswith(runtime_sweep.PREFIX) and made.stat().st_mode & 0o777 == 0o700
    pid, start = (made / runtime_sweep.OWNER_FILE).read_text(encoding="ascii").split()
    assert int(pid) == os.getpid() and start != ""
    assert sorted(p.name for p in tmp_path.iterdir()) == [made.name]  # no staging dir left behind
    assert runtime_sweep.sweep_dead(tmp_path) == []  # its owner (this process) is alive
