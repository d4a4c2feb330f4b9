"""`sessions/<id>/quiescence.json`: the writer (atomic, 0600) and the reader's one outcome per file."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from acp_server.sessions.quiescence_file import (
    FILE,
    MAX_BYTES,
    QuiescenceReading,
    process_start,
    read_quiescence,
    write_quiescence,
)

SID = "sess-1"
BUSY_STATE = {
    "quiescent": False,
    "pending": 1,
    "in_flight": 1,
    "background": [
        {"type": "refinement", "id": "running-1", "title": "Refining the harness"},
        {"type": "refinement", "id": "queued-1", "title": "Harness refinement queued"},
    ],
}
SETTLED_STATE = {"quiescent": True, "pending": 0, "in_flight": 0, "background": []}


def _read(directory: Path, *, is_open: bool | None = True, owner: int | None = None) -> QuiescenceReading:
    return read_quiescence(directory, SID, is_open=is_open, owner_pid=os.getpid() if owner is None else owner)


def _edit(directory: Path, **changes: Any) -> None:
    """Rewrite fields of a written file (as another, maybe hostile, writer would)."""
    path = directory / FILE
    body = json.loads(path.read_text(encoding="utf-8"))
    body.update(changes)
    path.write_text(json.dumps(body), encoding="utf-8")


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()  # reaped: the pid names no process now
    return child.pid


def test_a_busy_session_written_by_a_live_server_reads_busy_with_its_background_work(tmp_path: Path) -> None:
    write_quiescence(tmp_path, SID, BUSY_STATE)
    reading = _read(tmp_path)
    assert (reading.state, reading.pending, reading.in_flight, reading.background, reading.pid) == (
        "busy",
        1,
        1,
        BUSY_STATE["background"],
        os.getpid(),
    )


def test_a_settled_session_reads_settled(tmp_path: Path) -> None:
    write_quiescence(tmp_path, SID, SETTLED_STATE)
    assert (_read(tmp_path).state, _read(tmp_path).quiescent) == ("settled", True)


def test_the_file_is_private_and_no_temp_file_is_left(tmp_path: Path) -> None:
    write_quiescence(tmp_path, SID, BUSY_STATE)
    write_quiescence(tmp_path, SID, SETTLED_STATE)
    assert stat.S_IMODE(os.stat(tmp_path / FILE).st_mode) == 0o600
    assert os.listdir(tmp_path) == [FILE]


def test_the_file_names_the_writing_process_and_its_start_time(tmp_path: Path) -> None:
    write_quiescence(tmp_path, SID, SETTLED_STATE)
    body = json.loads((tmp_path / FILE).read_text(encoding="utf-8"))
    assert (body["pid"], body["pid_start"], body["session_id"]) == (
        os.getpid(),
        process_start(os.getpid()),
        SID,
    )


def test_a_reader_never_sees_a_partly_written_file(tmp_path: Path) -> None:
    write_quiescence(tmp_path, SID, SETTLED_STATE)
    stop = threading.Event()
    seen: set[str] = set()

    def read_all_the_time() -> None:
        while not stop.is_set():
            reading = _read(tmp_path)
            seen.add(reading.state if reading.reason is None else f"{reading.state}: {reading.reason}")

    reader = threading.Thread(target=read_all_the_time)
    reader.start()
    try:
        for n in range(400):
            write_quiescence(tmp_path, SID, BUSY_STATE if n % 2 else SETTLED_STATE)
    finally:
        stop.set()
        reader.join(10)
    assert seen <= {"busy", "settled"} and seen


def test_a_file_that_says_the_session_ended_reads_not_running(tmp_path: Path) -> None:
    write_quiescence(tmp_path, SID, SETTLED_STATE, ended=True)
    reading = _read(tmp_path)
    assert (reading.state, reading.reason) == (
        "not running",
        f"the session was closed by its server (pid {os.getpid()})",
    )


def test_a_busy_file_of_a_dead_server_reads_not_running_not_busy(tmp_path: Path) -> None:
    write_quiescence(tmp_path, SID, BUSY_STATE)
    pid = _dead_pid()
    _edit(tmp_path, pid=pid, pid_start=None)
    reading = _read(tmp_path, owner=pid)
    assert (reading.state, reading.quiescent, reading.reason) == (
        "not running",
        None,
        f"the server that wrote it (pid {pid}) has exited",
    )


@pytest.mark.skipif(process_start(os.getpid()) is None, reason="needs /proc/<pid>/stat (Linux)")
def test_a_live_pid_that_started_after_the_writer_is_not_taken_for_it(tmp_path: Path) -> None:
    write_quiescence(tmp_path, SID, BUSY_STATE)
    _edit(tmp_path, pid_start=int(process_start(os.getpid()) or 0) - 1)  # the pid was reused since
    assert _read(tmp_path).state == "not running"


def test_a_busy_file_of_a_closed_session_reads_not_running(tmp_path: Path) -> None:
    write_quiescence(tmp_path, SID, BUSY_STATE)
    reading = _read(tmp_path, is_open=False)
    assert (reading.state, reading.reason) == (
        "not running",
        f"the session is not open (its file from pid {os.getpid()} is stale)",
    )


def test_a_file_of_another_pid_than_the_sessions_owner_reads_unknown(tmp_path: Path) -> None:
    write_quiescence(tmp_path, SID, BUSY_STATE)
    reading = _read(tmp_path, owner=os.getppid())
    assert (reading.state, reading.reason) == (
        "unknown",
        f"the session is open in pid {os.getppid()}, which publishes no quiescence (the file is pid {os.getpid()}'s)",
    )


def test_no_file_for_a_closed_session_reads_not_running(tmp_path: Path) -> None:
    assert _read(tmp_path, is_open=False).state == "not running"


def test_no_file_for_an_open_session_reads_unknown_with_the_reason(tmp_path: Path) -> None:
    reading = _read(tmp_path)
    assert (reading.state, reading.reason) == (
        "unknown",
        "no quiescence file: the process that has it open publishes none (a subagent, an older server)",
    )


HOSTILE: list[tuple[str, Any, str]] = [
    ("not json", b"{not json", "it is not valid JSON"),
    ("not utf-8", b"\xff\xfe{}", "it is not valid JSON"),
    ("a list", b"[1, 2]", "it is not a JSON object"),
    ("truncated", b'{"version": 1, "session_id": "sess-1", "pid": ', "it is not valid JSON"),
    ("future version", {"version": 2}, "its version is 2, not 1"),
    ("another session", {"session_id": "sess-2"}, "it names another session"),
    ("pid 0 (the process group)", {"pid": 0}, "it names no valid pid"),
    ("pid -1 (every process)", {"pid": -1}, "it names no valid pid"),
    ("pid true", {"pid": True}, "it names no valid pid"),
    ("huge pid", {"pid": 10**30}, "it names no valid pid"),
    ("pid as text", {"pid": "1"}, "it names no valid pid"),
    ("quiescent as text", {"quiescent": "yes"}, "ended and quiescent must be true or false"),
    ("negative count", {"pending": -3}, "pending is not a count"),
    ("background not a list", {"background": "x"}, "background is not a list"),
    ("background item not an object", {"background": [1]}, "a background item is not an object"),
    ("background item without type", {"background": [{"title": "x"}]}, "a background item has no type"),
    ("no time", {"written_at": None}, "it has no written_at time"),
]


@pytest.mark.parametrize(
    ("content", "reason"), [(c, r) for _, c, r in HOSTILE], ids=[n for n, _, _ in HOSTILE]
)
def test_a_corrupt_or_hostile_file_reads_unknown_with_the_reason(
    tmp_path: Path, content: Any, reason: str
) -> None:
    if isinstance(content, bytes):
        (tmp_path / FILE).write_bytes(content)
    else:
        write_quiescence(tmp_path, SID, BUSY_STATE)
        _edit(tmp_path, **content)
    reading = _read(tmp_path)
    assert (reading.state, reading.reason) == ("unknown", f"{FILE} is unusable: {reason}")


def test_a_symlinked_file_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    write_quiescence(tmp_path, SID, BUSY_STATE)
    os.replace(tmp_path / FILE, elsewhere)
    os.symlink(elsewhere, tmp_path / FILE)
    reading = _read(tmp_path)
    assert reading.state == "unknown" and reading.reason is not None and "cannot open it" in reading.reason


def test_a_fifo_in_place_of_the_file_reads_unknown_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / FILE)
    assert _read(tmp_path).reason == f"{FILE} is unusable: it is not a regular file"


def test_an_oversized_file_is_not_read(tmp_path: Path) -> None:
    (tmp_path / FILE).write_bytes(b" " * (MAX_BYTES + 1))
    assert (
        _read(tmp_path).reason == f"{FILE} is unusable: it is {MAX_BYTES + 1} bytes (more than {MAX_BYTES})"
    )


def test_background_items_keep_only_known_text_fields_cut_to_length(tmp_path: Path) -> None:
    write_quiescence(tmp_path, SID, BUSY_STATE)
    _edit(tmp_path, background=[{"type": "refinement", "title": "x" * 5000, "id": 7, "script": "<b>"}])
    assert _read(tmp_path).background == [{"type": "refinement", "title": "x" * 200}]


def test_a_write_replaces_a_symlink_instead_of_writing_through_it(tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    target.write_text("keep me", encoding="utf-8")
    os.symlink(target, tmp_path / FILE)
    write_quiescence(tmp_path, SID, SETTLED_STATE)
    assert target.read_text(encoding="utf-8") == "keep me" and not (tmp_path / FILE).is_symlink()


def _settled() -> Any:
    """The harness's settled rule for a session with nothing running (what the snapshot reads)."""
    from agent_core.refinement import Quiescence

    return Quiescence(refinement_idle=True, pending=0, in_flight=0, children=0, last_refinement_id=None)


def _opened(directory: Path) -> Any:
    """A bound session as the server holds it, without an agent: what `watch` touches."""
    from types import SimpleNamespace

    listeners: list[Any] = []

    def subscribe(listener: Any) -> Any:
        listeners.append(listener)
        return lambda: listeners.remove(listener)

    session = SimpleNamespace(id=SID, session_dir=directory, subagents=None)
    harness = SimpleNamespace(quiescence=_settled, subscribe=subscribe, listeners=listeners)
    return SimpleNamespace(session=session, harness=harness, unsubscribe=None)


@pytest.mark.anyio
async def test_the_server_shutdown_marks_the_files_of_sessions_still_open_ended(tmp_path: Path) -> None:
    from acp_server.ports import SessionBound
    from acp_server.protocol.registry import MethodRegistry
    from acp_server.sessions.methods import AcpServer
    from acp_server.sessions.quiescence_publisher import install

    server = AcpServer(MethodRegistry())
    install(server)
    opened = _opened(tmp_path)
    server.bus.emit(SessionBound(opened))
    server.sessions[SID] = opened
    assert _read(tmp_path).state == "settled"
    server._agent_ready.set()  # no agent was built: nothing to close but the sessions
    await server.shutdown()
    assert (_read(tmp_path).state, opened.harness.listeners) == ("not running", [])
