"""The shared process-group watch, as a script and as the in-process thread a kernel embeds.

Real processes and real signals: a stand-in parent starts the watched group, the test SIGKILLs the
parent and waits (pidfds, bounded) for every member of the group to be gone.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from system_deps import missing

from kernel_bridge import group_watch
from kernel_bridge.launcher import _LAUNCH_CODE, _SPEC_NAME, _write_spec

WAIT = 20.0

# Stands in for continual-acp (it leads a group of its own): starts its argv in a new session, or in
# its own group after a first argument "same-group"; "{parent}" becomes its pid. The test SIGKILLs
# it, so nothing of it runs afterwards.
PARENT = (
    "import os, subprocess, sys\n"
    "argv = [a.replace('{parent}', str(os.getpid())) for a in sys.argv[1:]]\n"
    "same_group = argv[0] == 'same-group'\n"
    "subprocess.Popen(argv[same_group:], start_new_session=not same_group).wait()\n"
)
# A shell reporting its process group, its own pid and a background child's: "<pgid> <sh> <sleep>".
REPORT = "sleep 300 & echo $(cut -d' ' -f5 /proc/$$/stat) $$ $!; wait"
# The kernel's path: the embedded watch source, then code that starts a child and watches.
IN_PROCESS = (
    "import subprocess\n"
    "ParentWatch(os.getppid()).start()\n"  # before the report: the test kills the parent on reading it
    "child = subprocess.Popen(['sleep', '300'])\n"
    "print(os.getpgrp(), os.getpid(), child.pid, flush=True)\n"
    "child.wait()\n"
)


def _members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group `pgid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def _dying(pid: int) -> bool:
    """`pid` has a SIGKILL pending or has begun to exit (PF_EXITING): a signal it got is fatal now."""
    status = Path(f"/proc/{pid}/status").read_text()
    pending = [
        int(line.split()[1], 16) for line in status.splitlines() if line.startswith(("SigPnd:", "ShdPnd:"))
    ]
    flags = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[6])
    return any(mask & (1 << (signal.SIGKILL - 1)) for mask in pending) or bool(flags & 0x4)


def _wait_exited(pids: list[int], timeout: float = WAIT) -> list[int]:
    """Wait (pidfds: readable once the process has exited) until every pid is gone; the ones left."""
    fds = {}
    for pid in pids:
        try:
            fds[os.pidfd_open(pid)] = pid
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + timeout
    try:
        while fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            ready, _, _ = select.select(list(fds), [], [], remaining)
            for fd in ready:
                del fds[fd]
                os.close(fd)
        return sorted(fds.values())
    finally:
        for fd in fds:
            os.close(fd)


@pytest.fixture
def strays() -> Iterator[list[int]]:
    """Pids to SIGKILL after the test, so a failure leaves nothing running."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _start_parent(argv: list[str], strays: list[int]) -> tuple[subprocess.Popen[str], list[int]]:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, *argv], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    strays.append(parent.pid)
    assert parent.stdout is not None
    ready, _, _ = select.select([parent.stdout], [], [], WAIT)
    assert ready, "the watched command did not report its pids"
    pids = [int(word) for word in parent.stdout.readline().split()]
    strays.extend(pids)
    return parent, pids


def _sigkill(parent: subprocess.Popen[str]) -> None:
    parent.kill()
    parent.wait(WAIT)
    assert parent.stdout is not None
    parent.stdout.close()


def test_sigkill_of_the_parent_kills_the_scripts_whole_group(strays: list[int]) -> None:
    watched = [
        sys.executable,
        "-I",
        "-S",
        group_watch.script_path(),
        "{parent}",
        "--",
        "/bin/sh",
        "-c",
        REPORT,
    ]
    parent, (pgid, sh, sleep) = _start_parent(watched, strays)
    assert pgid not in (sh, os.getpgrp())  # the watch script leads the group, the shell is its child
    _sigkill(parent)
    assert _wait_exited([pgid, sh, sleep]) == []
    assert _members(pgid) == []


def test_sigkill_of_the_parent_kills_the_group_of_a_process_running_the_embedded_watch(
    strays: list[int],
) -> None:
    code = group_watch.embeddable_source() + IN_PROCESS
    parent, (pgid, watching, sleep) = _start_parent([sys.executable, "-c", code], strays)
    assert pgid == watching  # leads its group, as a kernel does
    _sigkill(parent)
    assert _wait_exited([watching, sleep]) == []
    assert _members(pgid) == []


def test_the_embedded_watch_exits_alone_when_it_does_not_lead_its_group(strays: list[int]) -> None:
    """A kernel under a sandbox wrapper: the group is the wrapper's, so only the kernel ends."""
    code = group_watch.embeddable_source() + IN_PROCESS
    parent, (pgid, watching, sleep) = _start_parent(["same-group", sys.executable, "-c", code], strays)
    assert pgid == parent.pid != watching
    _sigkill(parent)
    assert _wait_exited([watching]) == []
    # A group kill would have been sent before the watch exited: the child would be dying now.
    assert _members(pgid) == [sleep] and not _dying(sleep)


def test_sigterm_of_the_script_kills_its_whole_group(strays: list[int]) -> None:
    # The shell and its child ignore SIGTERM: only the watch's group kill can end them.
    proc = subprocess.Popen(
        group_watch.watched_argv(["/bin/sh", "-c", "trap '' TERM; " + REPORT]),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    strays.append(proc.pid)
    assert proc.stdout is not None
    pgid, sh, sleep = (int(word) for word in proc.stdout.readline().split())
    strays.extend([sh, sleep])
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(WAIT) == -signal.SIGKILL
    assert _wait_exited([sh, sleep]) == []
    assert _members(pgid) == []


@pytest.mark.parametrize(
    ("script", "code"), [("exit 3", 3), ("kill -TERM $$", 128 + signal.SIGTERM), ("kill -KILL $$", 137)]
)
def test_the_scripts_exit_code_is_the_commands_and_128_plus_n_for_signal_n(script: str, code: int) -> None:
    run = subprocess.run(group_watch.watched_argv(["/bin/sh", "-c", script]), timeout=WAIT, check=False)
    assert run.returncode == code


def test_the_script_leads_a_group_of_its_own_when_not_started_in_a_new_session() -> None:
    run = subprocess.run(
        group_watch.watched_argv(["/bin/sh", "-c", "cut -d' ' -f5 /proc/$PPID/stat"]),
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=True,
    )
    assert int(run.stdout) not in (os.getpgrp(), 0)


def test_the_script_holds_no_copy_of_the_commands_stdout(strays: list[int]) -> None:
    """An MCP server's stdout closing is EOF for the host, though the watch is still running."""
    proc = subprocess.Popen(
        group_watch.watched_argv(["/bin/sh", "-c", "exec 1>&-; cat >/dev/null"]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    strays.append(proc.pid)
    assert proc.stdin is not None and proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], WAIT)
    assert ready and proc.stdout.read() == b""
    assert proc.poll() is None
    proc.stdin.close()
    assert proc.wait(WAIT) == 0


def test_the_script_reports_a_command_it_cannot_start_with_exit_code_127() -> None:
    run = subprocess.run(
        group_watch.watched_argv(["/nonexistent/server"]), capture_output=True, text=True, timeout=WAIT
    )
    assert run.returncode == 127
    assert "cannot start '/nonexistent/server'" in run.stderr


def test_the_kernel_launch_code_runs_the_shared_watch() -> None:
    assert _LAUNCH_CODE.startswith(group_watch.embeddable_source())
    assert "self.poller = ParentWatch(parent)" in _LAUNCH_CODE


def test_a_local_kernel_command_line_names_its_launch_file_instead_of_its_source(tmp_path: Path) -> None:
    spec = json.loads((_write_spec(tmp_path, Path(sys.executable)) / _SPEC_NAME / "kernel.json").read_text())
    argv: list[str] = spec["argv"]
    assert [a for a in argv if "\n" in a] == [] and len(" ".join(argv)) < 1000  # one line in `ps`
    launch = Path(argv[argv.index("-f") - 1])
    assert launch.read_text() == _LAUNCH_CODE and launch.stat().st_mode & 0o777 == 0o600


def test_a_sandboxed_kernel_keeps_its_launch_code_in_the_command(tmp_path: Path) -> None:
    # Its spec directory is one the sandboxed kernel may write: a file there is not trusted.
    root = _write_spec(tmp_path, Path(sys.executable), "boxed", ("bwrap", "--"))
    argv: list[str] = json.loads((root / "boxed" / "kernel.json").read_text())["argv"]
    assert argv[argv.index("-f") - 2 : argv.index("-f")] == ["-c", _LAUNCH_CODE]
    assert not list((root / "boxed").glob("*.py"))


def _status_lines(argv: list[str]) -> list[str]:
    run = subprocess.run(argv, capture_output=True, text=True, timeout=WAIT, check=True)
    return run.stdout.splitlines()


# The command's own capability lines, then its parent's (the watch's).
STATUS = [
    "/bin/sh",
    "-c",
    "grep -hE '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/$$/status /proc/$PPID/status",
]
NOTHING_HELD = [
    *(f"{name}:\t0000000000000000" for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")),
    "NoNewPrivs:\t1",
]


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0, reason="root's capabilities, on Linux"
)
def test_as_root_the_watched_command_and_the_watch_hold_no_capability_and_cannot_gain_one() -> None:
    """What gates and stdio MCP servers run under (`watched_argv`): a root server's CAP_SYS_PTRACE
    must not reach them, or they could read its /proc entries (its secrets, its protocol pipes)."""
    assert group_watch.holds_capabilities()  # this test process: root with its capabilities
    assert _status_lines(group_watch.watched_argv(STATUS)) == NOTHING_HELD * 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/<pid>/status is Linux's")
def test_a_process_without_capabilities_is_left_as_it_is() -> None:
    """An ordinary user's gate may use sudo: nothing is dropped where nothing is held."""
    setpriv = ["setpriv", "--bounding-set", "-all", "--inh-caps", "-all", "--"] if os.geteuid() == 0 else []
    if setpriv and not shutil.which("setpriv"):
        missing("setpriv (util-linux) is missing: cannot start a process without capabilities")
    lines = _status_lines([*setpriv, *group_watch.watched_argv(STATUS)])
    assert [line for line in lines if line.startswith("NoNewPrivs")] == ["NoNewPrivs:\t0"] * 2
