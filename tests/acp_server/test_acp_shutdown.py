"""Orderly shutdown: EOF or SIGTERM cancel the turn, stop the kernels and exit 0."""

from __future__ import annotations

import os
import select
import signal
from pathlib import Path

from acp_client import AcpClient
from acp_helpers import ClientFactory, initialize, new_session

from agent_core.testing.scripted_model import ScriptedModelServer, tool_call


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def _wait_gone(pid: int, timeout: float) -> bool:
    """Wait (on a pidfd, no polling) until `pid` has exited."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready)
    finally:
        os.close(fd)


def _start_long_cell(client: AcpClient, model: ScriptedModelServer, cwd: Path) -> tuple[str, object]:
    model.push(tool_call("import time\nprint('started', flush=True)\ntime.sleep(120)"))
    initialize(client)
    sid, _ = new_session(client, str(cwd))
    rid = client.start_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "wait"}]}
    )
    client.wait_for(
        lambda m: (
            m.get("method") == "session/update" and "started" in str(m["params"]["update"].get("content", ""))
        )
    )
    return sid, rid


def test_eof_during_a_running_cell_answers_cancelled_stops_the_kernel_and_exits_zero(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    # The product defaults: a warm pool, and the kernel started at session/new.
    client = spawn(model.base_url, CONTINUAL_ACP_KERNEL_POOL="1", CONTINUAL_ACP_EAGER_KERNEL="1")
    _, rid = _start_long_cell(client, model, tmp_path)
    kernels = _children(client.proc.pid)
    assert kernels, "expected a kernel child process"
    assert client.close(timeout=60) == 0
    assert client.response_frame(rid).message["result"]["stopReason"] == "cancelled"
    assert all(_wait_gone(pid, 30) for pid in kernels)


def test_sigterm_gets_the_same_orderly_shutdown(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    # The product defaults: a warm pool, and the kernel started at session/new.
    client = spawn(model.base_url, CONTINUAL_ACP_KERNEL_POOL="1", CONTINUAL_ACP_EAGER_KERNEL="1")
    _start_long_cell(client, model, tmp_path)
    kernels = _children(client.proc.pid)
    client.proc.send_signal(signal.SIGTERM)
    assert client.proc.wait(60) == 0
    assert all(_wait_gone(pid, 30) for pid in kernels)
