"""The suite's forked servers behave as exec'd ones where the suite looks: the exit status after
EOF, a kill's status, their own environment and working directory, and exec for the tests that
must see a real launch."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import server_zygote
from acp_client import AcpClient, server_env
from acp_helpers import initialize, new_session


@pytest.fixture(autouse=True)
def _forking(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are of the forked launch: on even where the run asks for exec everywhere."""
    monkeypatch.delenv("CONTINUAL_ACP_TEST_LAUNCH", raising=False)
    monkeypatch.setattr(server_zygote, "forking_allowed", True)


def test_a_forked_server_answers_and_exits_with_zero_after_eof(tmp_path: Path) -> None:
    client = AcpClient(server_env(tmp_path / "home"), cwd=str(tmp_path))
    assert isinstance(client.proc, server_zygote.ZygoteProcess)
    assert initialize(client)["protocolVersion"] == 1
    assert client.close() == 0


def test_a_killed_forked_server_reports_the_signal_as_popen_does(tmp_path: Path) -> None:
    client = AcpClient(server_env(tmp_path / "home"), cwd=str(tmp_path))
    initialize(client)
    client.proc.kill()
    assert client.proc.wait(30) == -signal.SIGKILL


def test_a_forked_server_runs_with_the_tests_environment_and_cwd(tmp_path: Path) -> None:
    home = tmp_path / "home"
    client = AcpClient(server_env(home), cwd=str(tmp_path))
    initialize(client)
    assert Path(f"/proc/{client.proc.pid}/cwd").resolve() == tmp_path.resolve()
    sid, _ = new_session(client, str(tmp_path))
    assert (home / "sessions" / sid).is_dir()  # CONTINUAL_ACP_HOME as the test set it
    assert client.close() == 0


def test_the_exec_launch_tests_start_real_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_zygote, "forking_allowed", False)
    assert not server_zygote.uses_zygote(None)
    monkeypatch.setattr(server_zygote, "forking_allowed", True)
    assert server_zygote.uses_zygote(None)
    assert not server_zygote.uses_zygote([sys.executable, "-c", "pass"])
    monkeypatch.setenv("CONTINUAL_ACP_TEST_LAUNCH", "exec")
    assert not server_zygote.uses_zygote(None)


# The launcher (zygote_launch.py): the server command of clients that start servers themselves.


def _launch(tmp_path: Path, *args: str, **popen: object) -> subprocess.Popen[bytes]:
    env = {**os.environ, **server_env(tmp_path / "home")}
    return subprocess.Popen(
        [*server_zygote.server_command(), *args],
        env=env,
        cwd=tmp_path,
        **popen,  # type: ignore[call-overload]
    )


def _zygote_children() -> set[int]:
    pid = server_zygote._the_zygote().proc.pid
    return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def _ended_within(pid: int, seconds: float) -> bool:
    """True once the (non-child) process `pid` has exited, within `seconds`."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([pidfd], [], [], seconds)[0])
    finally:
        os.close(pidfd)


def test_the_launcher_exits_with_the_servers_status_and_passes_its_output_through(tmp_path: Path) -> None:
    assert server_zygote.server_command()[-2].endswith("zygote_launch.py")
    done = _launch(tmp_path, "--version", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, _ = done.communicate(timeout=60)
    assert (done.returncode, out.decode().split()[0]) == (0, "continual-acp")
    done = _launch(tmp_path, "no-such-command", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = done.communicate(timeout=60)
    assert done.returncode == 2  # argparse's, from the forked server
    assert "invalid choice: 'no-such-command'" in err.decode()  # its stderr, copied through


def test_the_launchers_server_runs_in_its_cwd_and_ends_at_stdin_eof(tmp_path: Path) -> None:
    before = _zygote_children()
    client = AcpClient(server_env(tmp_path / "home"), argv=server_zygote.server_command(), cwd=str(tmp_path))
    assert isinstance(client.proc, subprocess.Popen)  # the launcher is exec'd, its server forked
    assert initialize(client)["protocolVersion"] == 1
    (server,) = _zygote_children() - before
    assert Path(f"/proc/{server}/cwd").resolve() == tmp_path.resolve()
    assert client.close() == 0
    assert _ended_within(server, 0)


def test_sigterm_to_the_launcher_is_the_servers_orderly_shutdown(tmp_path: Path) -> None:
    client = AcpClient(server_env(tmp_path / "home"), argv=server_zygote.server_command(), cwd=str(tmp_path))
    initialize(client)
    new_session(client, str(tmp_path))
    # Answered by the full server, not its early path: its own SIGTERM handler is in place by now.
    client.response_frame(client.start_request("session/list", {}))
    client.proc.send_signal(signal.SIGTERM)
    assert client.proc.wait(60) == 0  # not -15: the launcher forwarded it and reports the server's exit


def test_a_server_killed_by_a_signal_kills_its_launcher_with_that_signal(tmp_path: Path) -> None:
    before = _zygote_children()
    client = AcpClient(server_env(tmp_path / "home"), argv=server_zygote.server_command(), cwd=str(tmp_path))
    initialize(client)  # answered: the server exists
    (server,) = _zygote_children() - before
    os.kill(server, signal.SIGKILL)
    assert client.proc.wait(60) == -signal.SIGKILL  # what a parent of an exec'd server would read


def test_a_killed_launcher_takes_its_server_with_it(tmp_path: Path) -> None:
    before = _zygote_children()
    client = AcpClient(server_env(tmp_path / "home"), argv=server_zygote.server_command(), cwd=str(tmp_path))
    initialize(client)
    (server,) = _zygote_children() - before
    client.proc.kill()  # SIGKILL: nothing to forward; the zygote sees the connection close
    assert client.proc.wait(60) == -signal.SIGKILL
    assert _ended_within(server, 60)
    assert client.proc.stdin is not None
    client.proc.stdin.close()


def test_the_launcher_without_its_zygote_says_so_and_fails(tmp_path: Path) -> None:
    command = [*server_zygote.server_command()[:-1], str(tmp_path / "gone.sock")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr == (
        f"zygote_launch: no server zygote at {tmp_path / 'gone.sock'} (No such file or directory); "
        "is the pytest worker that owns it gone?\n"
    )


def test_the_launcher_is_the_server_command_only_where_servers_are_forked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONTINUAL_ACP_TEST_LAUNCH", "exec")
    assert server_zygote.server_command() == [sys.executable, "-m", "acp_server"]
