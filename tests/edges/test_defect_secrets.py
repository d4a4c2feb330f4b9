"""From a real cell in a real session: the server's secrets and protocol pipes are out of reach.

As root, CAP_SYS_PTRACE would let any process read any /proc entry, so the
server (and with it the kernel) is started with every capability dropped (`setpriv`): the same
position as an ordinary user's server.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from defect_support import new_session, prompt, served

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux-only")

PROBE = """
import json, os
ppid = os.getppid()
def attempt(action):
    try:
        action()
        return "allowed"
    except PermissionError:
        return "denied"
    except OSError as exc:  # e.g. ENXIO for a socket: not opened, but not refused either
        return f"error {exc.errno}"
report = {
    "ppid": ppid,
    "environ": attempt(lambda: open(f"/proc/{ppid}/environ", "rb").read()),
    "fd1": attempt(lambda: open(f"/proc/{ppid}/fd/1", "wb").close()),
    "fds_opened": [n for n in range(64) if os.path.lexists(f"/proc/{ppid}/fd/{n}") and attempt(lambda: open(f"/proc/{ppid}/fd/{n}", "rb").close()) == "allowed"],
    "api_key": os.environ.get("API_KEY"),
    "openai_key": os.environ.get("OPENAI_API_KEY"),
}
print("REPORT" + json.dumps(report))
"""


def _argv() -> list[str] | None:
    if os.geteuid() != 0:
        return None
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and setpriv (util-linux) is missing: cannot drop CAP_SYS_PTRACE")
    return [setpriv, "--bounding-set", "-all", "--inh-caps", "-all", "--", sys.executable, "-m", "acp_server"]


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One session, one cell that tries every path; yields its report and the server's pid."""
    tmp_path = tmp_path_factory.mktemp("secrets")
    with ScriptedModelServer([tool_call(PROBE, title="probe"), text("done")]) as model:
        with served(
            tmp_path / "home", tmp_path, model.base_url, argv=_argv(), API_KEY="bare-secret"
        ) as client:
            sid, _ = new_session(client, str(tmp_path))
            assert prompt(client, sid, "probe", timeout=120)[0] == "end_turn"
            server_pid = client.proc.pid
        result = json.dumps(model.requests[1]["messages"][-1]["content"])
    found = re.search(r"REPORT(\{[^\n]*?\})", json.loads(result) if result.startswith('"') else result)
    assert found, result
    report = json.loads(found.group(1).replace('\\"', '"'))
    yield {**report, "server_pid": server_pid}


def test_the_cell_runs_as_a_child_of_the_server(probe: dict[str, Any]) -> None:
    assert probe["ppid"] == probe["server_pid"]


def test_a_cell_cannot_read_the_server_environ(probe: dict[str, Any]) -> None:
    assert probe["environ"] == "denied"


def test_a_cell_cannot_open_the_server_protocol_descriptors(probe: dict[str, Any]) -> None:
    assert (probe["fd1"], probe["fds_opened"]) == ("denied", [])


def test_a_bare_api_key_variable_is_not_in_the_kernel_environment(probe: dict[str, Any]) -> None:
    assert (probe["api_key"], probe["openai_key"]) == (None, None)


def test_drop_secret_environment_removes_bare_and_prefixed_keys_from_the_server_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kernel_bridge.environment import drop_secret_environment

    for name in ("API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN", "SECRET", "HARMLESS_SETTING"):
        monkeypatch.setenv(name, "x")
    dropped = drop_secret_environment()
    assert {"API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN", "SECRET"} <= set(dropped)
    assert [
        name
        for name in ("API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN", "SECRET", "HARMLESS_SETTING")
        if name in os.environ
    ] == ["HARMLESS_SETTING"]
