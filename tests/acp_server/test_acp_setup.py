"""First-run setup as the agent's auth method: `initialize` offers it in the shape the client takes,
`session/new` and `authenticate` answer -32000 naming `continual-acp setup` until a model is set up,
`continual-acp setup` (run under a real pseudo-terminal, with typed answers) checks the answers the way
`doctor` does and writes config.toml 0600, and then `authenticate`, `session/new` and `doctor` pass."""

from __future__ import annotations

import os
import pty
import select
import stat
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from acp_client import AcpClient, RpcError, server_env
from acp_helpers import initialize, new_session

from acp_server.console.setup import merged_config_text, write_config
from agent_core.testing.scripted_model import ScriptedModelServer, text

SETUP_ID = "continual-acp-setup"
PROMPT_TIMEOUT_S = 60  # a cold start of the setup command on a loaded 2-core machine


def _unconfigured_env(tmp_path: Path) -> dict[str, str]:
    """The suite's server environment without any model setting: nothing set up yet."""
    env = server_env(tmp_path / "home")
    for name in ("CONTINUAL_ACP_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(name, None)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    return env


def _process_env(env: dict[str, str]) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CONTINUAL_ACP_"))}
    return {**inherited, **env}


class PtySession:
    """A command on a real pseudo-terminal: wait for a prompt, type an answer."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, start_new_session=True
        )
        os.close(slave)
        self.output = ""

    def expect(self, wanted: str, timeout: float = PROMPT_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while wanted not in self.output:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"no {wanted!r} on the terminal; it shows:\n{self.output[-3000:]}")
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # EIO: the command exited and closed the terminal
                    chunk = b""
                if not chunk:
                    pytest.fail(f"the terminal closed before {wanted!r}; it shows:\n{self.output[-3000:]}")
                self.output += chunk.decode(errors="replace").replace("\r\n", "\n")
        # What follows the match is the next prompt's concern.
        self.output = self.output[self.output.index(wanted) + len(wanted) :]

    def answer(self, prompt: str, reply: str) -> None:
        self.expect(prompt)
        os.write(self.master, reply.encode() + b"\n")

    def wait(self) -> int:
        try:
            return self.proc.wait(timeout=PROMPT_TIMEOUT_S)
        finally:
            os.close(self.master)


def test_setup_in_a_terminal_is_the_auth_method_doctor_and_a_running_server_then_accept(
    tmp_path: Path,
) -> None:
    env = _unconfigured_env(tmp_path)
    config = tmp_path / "config" / "continual-acp" / "config.toml"
    client = AcpClient(env, cwd=str(tmp_path))
    try:
        answer = initialize(client, auth={"terminal": True})
        method = answer["authMethods"][0]  # type: ignore[index]
        assert answer["authMethods"] == [  # the `terminal` type: this client said it can run one
            {
                "id": SETUP_ID,
                "name": method["name"],
                "description": method["description"],
                "type": "terminal",
                "args": ["setup"],
            }
        ]
        with pytest.raises(RpcError) as before:
            new_session(client, tmp_path)
        assert before.value.code == -32000 and "continual-acp setup" in before.value.message
        assert before.value.data == {"authMethodId": SETUP_ID, "configFile": str(config)}
        with pytest.raises(RpcError) as not_yet:
            client.request("authenticate", {"methodId": SETUP_ID})
        assert not_yet.value.code == -32000 and "continual-acp setup" in not_yet.value.message

        with ScriptedModelServer([], fallback=text("ok")) as model:
            # The launch line plus the method's args: `continual-acp serve setup`.
            term = PtySession(
                [sys.executable, "-m", "acp_server", "serve", "setup"], _process_env(env), tmp_path
            )
            term.answer("Number [1]: ", "6")  # llama.cpp server on this machine
            term.answer("Endpoint URL", "http://127.0.0.1:9/v1")  # nothing listens there
            term.answer("API key (Enter for none): ", "")
            term.answer("Model id", "scripted-model")
            term.expect("FAIL")
            term.answer("Save these settings anyway? (y/N): ", "")
            term.answer("Try again? (Y/n): ", "y")
            term.answer("Number [1]: ", "6")
            term.answer("Endpoint URL", model.base_url)
            term.answer("API key (Enter for none): ", "")
            term.answer("Model id", "scripted-model")
            term.expect("OK")
            term.expect("Wrote")
            assert term.wait() == 0
            assert stat.S_IMODE(config.stat().st_mode) == 0o600
            written = tomllib.loads(config.read_text())
            assert written == {"model": "scripted-model", "base_url": model.base_url}
            assert any(r["model"] == "scripted-model" for r in model.requests)  # checked for real

            assert client.request("authenticate", {"methodId": SETUP_ID}) == {}
            sid, _ = new_session(client, tmp_path)  # the running server took the new settings
            assert sid

            doctor = subprocess.run(
                [sys.executable, "-m", "acp_server", "doctor"],
                capture_output=True,
                text=True,
                timeout=110,
                env=_process_env(env),
                cwd=tmp_path,
            )
            assert doctor.returncode == 0, doctor.stdout + doctor.stderr
            assert f"settings from {config}" in doctor.stdout and "all checks passed" in doctor.stdout
    finally:
        client.close()


@pytest.mark.parametrize("source", ["environment", "config-file"])
def test_a_model_already_given_needs_no_setup_and_authenticate_answers_at_once(
    tmp_path: Path, source: str
) -> None:
    env = server_env(tmp_path / "home")
    if source == "config-file":
        env = _unconfigured_env(tmp_path)
        config = tmp_path / "config" / "continual-acp" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text('model = "m"\nbase_url = "http://127.0.0.1:9/v1"\n')
    client = AcpClient(env, cwd=str(tmp_path))
    try:
        answer = initialize(client, auth={"terminal": True})
        assert [m["id"] for m in answer["authMethods"]] == [SETUP_ID]  # type: ignore[union-attr,index]
        assert client.request("authenticate", {"methodId": SETUP_ID}) == {}
        with pytest.raises(RpcError) as unknown:
            client.request("authenticate", {"methodId": "oauth"})
        assert unknown.value.code == -32602 and SETUP_ID in unknown.value.message
        sid, _ = new_session(client, tmp_path)
        assert sid
    finally:
        client.close()


@pytest.mark.parametrize(
    ("capabilities", "shape"),
    [
        ({}, {"type": None, "meta": False}),
        ({"auth": {"terminal": False}}, {"type": None, "meta": False}),
        ({"_meta": {"terminal-auth": True}}, {"type": None, "meta": True}),
        ({"auth": {"terminal": True}}, {"type": "terminal", "meta": False}),
    ],
    ids=["no-auth-capabilities", "terminal-false", "legacy-terminal-auth-meta", "auth-terminal"],
)
def test_the_setup_method_comes_in_the_one_shape_the_client_takes(
    capabilities: dict[str, object], shape: dict[str, object]
) -> None:
    from acp_server.protocol.initialize import auth_methods

    (method,) = auth_methods(capabilities)
    assert method["id"] == SETUP_ID and "continual-acp setup" in str(method["name"])
    assert method.get("type") == shape["type"]
    assert ("_meta" in method) is shape["meta"]
    if shape["meta"]:
        launch = method["_meta"]["terminal-auth"]  # type: ignore[index]
        assert [launch["command"], *launch["args"]] == [sys.executable, "-m", "acp_server", "setup"]


def test_setup_outside_a_terminal_says_where_to_set_things_and_writes_nothing(tmp_path: Path) -> None:
    env = _unconfigured_env(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "setup"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env=_process_env(env),
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "in a terminal" in done.stderr and "CONTINUAL_ACP_MODEL" in done.stderr
    assert not (tmp_path / "config").exists()


def test_writing_keeps_the_other_settings_and_replaces_the_old_model_lines(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "config.toml"
    path.parent.mkdir()
    path.write_text(
        'model = "old"\nkernel_pool_size = 0\napi_key = "sk-old"\n\n[gateway_env]\nmodel = "kept"\n'
    )
    path.chmod(0o644)
    write_config(path, {"model": 'new "quoted" \u00e9', "base_url": "http://h/v1", "api_key": None})
    data = tomllib.loads(path.read_text())
    assert data == {
        "model": 'new "quoted" \u00e9',
        "base_url": "http://h/v1",
        "kernel_pool_size": 0,
        "gateway_env": {"model": "kept"},
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # Run again: one header, no duplicated keys.
    write_config(path, {"model": "m2", "base_url": "http://h/v1", "api_key": "k"})
    assert path.read_text().count("continual-acp setup") == 1
    assert tomllib.loads(path.read_text())["api_key"] == "k"


def test_a_value_that_would_not_read_back_is_refused_and_the_old_file_kept(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('model = "old"\n')
    with pytest.raises(ValueError):
        write_config(path, {"model": "bad\ud800", "base_url": None, "api_key": None})
    assert path.read_text() == 'model = "old"\n'
    assert merged_config_text("", {"model": "m", "api_key": None}).splitlines()[1:] == ['model = "m"']


def test_a_config_file_that_is_not_toml_is_kept_aside_and_a_fresh_one_written(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("model = gpt-4.1 without quotes\n")
    write_config(path, {"model": "m", "base_url": "http://h/v1", "api_key": None})
    assert tomllib.loads(path.read_text()) == {"model": "m", "base_url": "http://h/v1"}
    (aside,) = tmp_path.glob("config.toml.invalid-*")
    assert aside.read_text() == "model = gpt-4.1 without quotes\n"
    assert stat.S_IMODE(aside.stat().st_mode) == 0o600
