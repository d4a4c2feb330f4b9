"""The suite's forked servers behave as exec'd ones where the suite looks: the exit status after
EOF, a kill's status, their own environment and working directory, and exec for the tests that
must see a real launch."""

from __future__ import annotations

import signal
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
