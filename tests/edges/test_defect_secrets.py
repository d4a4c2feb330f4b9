"""From a real cell in a real session: the server's secrets and protocol pipes are out of reach.

Run twice when the suite runs as root: once with the server as root with every capability (the
kernel must start without them, so CAP_SYS_PTRACE cannot open the non-dumpable server's /proc
entries), and once with the server itself started without capabilities (`setpriv`), the position of
an ordinary user's server. As another user, once, as that user.
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
from system_deps import missing

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux-only")

PROBE = """
import json, os
ppid = os.getppid()
# A local kernel is forked from the kernel template (`<launch file> --template <fd>`), the server's
# child: the server is the template's parent.
if b"--template" in open(f"/proc/{ppid}/cmdline", "rb").read().split(b"\\0"):
    ppid = int(open(f"/proc/{ppid}/stat").read().rsplit(")", 1)[1].split()[1])
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
    "fd1": attempt(lambda: open(f"/proc/{ppid}/fd/1", "wb").write(b'{"jsonrpc":"2.0","method":"session/update","params":{}}\\n')),
    "fds_opened": [n for n in range(64) if os.path.lexists(f"/proc/{ppid}/fd/{n}") and attempt(lambda: open(f"/proc/{ppid}/fd/{n}", "rb").close()) == "allowed"],
    "api_key": os.environ.get("API_KEY"),
    "openai_key": os.environ.get("OPENAI_API_KEY"),
    "status": ";".join(k + "=" + v.strip() for k, v in (l.split(":", 1) for l in open("/proc/self/status")) if k.startswith(("Cap", "NoNewPrivs"))),
}
print("REPORT" + json.dumps(report))
"""


MODES = ["as_root", "capabilities_dropped"] if os.geteuid() == 0 else ["as_user"]


def _argv(mode: str) -> list[str] | None:
    if mode != "capabilities_dropped":
        return None
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        missing("setpriv (util-linux) is missing: cannot start the server without capabilities")
    return [setpriv, "--bounding-set", "-all", "--inh-caps", "-all", "--", sys.executable, "-m", "acp_server"]


@pytest.fixture(scope="module", params=MODES)
def probe(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """One session, one cell that tries every path; yields its report and the server's pid."""
    tmp_path = tmp_path_factory.mktemp("secrets")
    with ScriptedModelServer([tool_call(PROBE, title="probe"), text("done")]) as model:
        with served(
            tmp_path / "home", tmp_path, model.base_url, argv=_argv(request.param), API_KEY="bare-secret"
        ) as client:
            sid, _ = new_session(client, str(tmp_path))
            assert prompt(client, sid, "probe", timeout=120)[0] == "end_turn"
            server_pid = client.proc.pid
            forged = [
                f
                for f in client.frames
                if f.message.get("method") == "session/update" and not f.message.get("params")
            ]
            assert forged == []
        result = json.dumps(model.requests[1]["messages"][-1]["content"])
    found = re.search(r"REPORT(\{[^\n]*?\})", json.loads(result) if result.startswith('"') else result)
    assert found, result
    report = json.loads(found.group(1).replace('\\"', '"'))
    yield {**report, "server_pid": server_pid, "mode": request.param}


def test_the_cell_finds_the_server_above_its_kernel(probe: dict[str, Any]) -> None:
    assert probe["ppid"] == probe["server_pid"]


def test_a_cell_cannot_read_the_server_environ(probe: dict[str, Any]) -> None:
    assert probe["environ"] == "denied"


def test_a_cell_cannot_open_the_server_protocol_descriptors(probe: dict[str, Any]) -> None:
    assert (probe["fd1"], probe["fds_opened"]) == ("denied", [])


def test_the_kernel_holds_no_capability_and_cannot_gain_one(probe: dict[str, Any]) -> None:
    status = dict(item.split("=") for item in probe["status"].split(";"))
    held = {name: int(status[name], 16) for name in ("CapInh", "CapPrm", "CapEff", "CapAmb")}
    assert held == dict.fromkeys(held, 0)
    if probe["mode"] == "as_root":  # root regains its bounding set at exec: it must be empty, and stay so
        assert (int(status["CapBnd"], 16), status["NoNewPrivs"]) == (0, "1")


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
