"""`continual-acp doctor`: each check says OK or FAIL, a failure says how to fix it, exit 1 on any failure."""

from __future__ import annotations

import socket
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from acp_edge_support import processes_with_env

from acp_server.console.doctor import check_data_dir, check_model
from agent_core import load_config
from agent_core.testing.scripted_model import ScriptedModelServer, text

pytestmark = pytest.mark.anyio


def _closed_port() -> int:
    """A loopback port with nothing listening (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _doctor(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_server", "doctor"],
        capture_output=True,
        text=True,
        timeout=110,
        env=env,
        cwd=cwd,
    )


async def test_model_check_passes_against_a_scripted_endpoint(hermetic_env: dict[str, str]) -> None:
    with ScriptedModelServer([text("ok")]) as model:
        config = load_config({**hermetic_env, "OPENAI_BASE_URL": model.base_url})
        result = await check_model(config)
        assert result.ok, result
        assert model.base_url in result.detail
        assert len(model.requests) == 1  # it really asked the model, through the openai client


async def test_model_check_fails_with_a_hint_when_the_endpoint_is_unreachable(
    hermetic_env: dict[str, str],
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    result = await check_model(load_config({**hermetic_env, "OPENAI_BASE_URL": url}))
    assert not result.ok
    assert url in result.detail
    assert result.fix is not None and "OPENAI_BASE_URL" in result.fix


async def test_model_check_fails_when_no_model_is_configured(hermetic_env: dict[str, str]) -> None:
    env = {k: v for k, v in hermetic_env.items() if k != "CONTINUAL_ACP_MODEL"}
    result = await check_model(load_config(env))
    assert not result.ok
    assert result.fix is not None and "CONTINUAL_ACP_MODEL" in result.fix


async def test_data_dir_check_tightens_a_dir_other_users_can_read_and_says_so(
    hermetic_env: dict[str, str], tmp_path: Path
) -> None:
    home = tmp_path / "loose"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    (home / "sessions").mkdir(mode=0o755)
    (home / "sessions").chmod(0o755)
    result = await check_data_dir(load_config({**hermetic_env, "CONTINUAL_ACP_HOME": str(home)}))
    assert result.ok, result
    assert "tightened" in result.detail and "0755 -> 0700" in result.detail
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "sessions").stat().st_mode) == 0o700


async def test_data_dir_check_accepts_a_private_dir_and_a_missing_one(
    hermetic_env: dict[str, str], tmp_path: Path
) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    for home in (private, tmp_path / "not-yet" / "created"):
        result = await check_data_dir(load_config({**hermetic_env, "CONTINUAL_ACP_HOME": str(home)}))
        assert result.ok, result
    assert not (tmp_path / "not-yet").exists()  # the doctor looks, it does not create


async def test_data_dir_check_fails_when_the_data_dir_is_a_file(
    hermetic_env: dict[str, str], tmp_path: Path
) -> None:
    home = tmp_path / "file"
    home.write_text("not a dir")
    result = await check_data_dir(load_config({**hermetic_env, "CONTINUAL_ACP_HOME": str(home)}))
    assert not result.ok and result.fix


def test_doctor_passes_every_check_with_a_scripted_endpoint_and_warns_of_an_unknown_key(
    hermetic_env: dict[str, str], tmp_path: Path
) -> None:
    marker = uuid.uuid4().hex
    config = Path(hermetic_env["XDG_CONFIG_HOME"]) / "continual-acp" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("max_kernel = 2\n")
    with ScriptedModelServer([], fallback=text("ok")) as model:
        env = {**hermetic_env, "OPENAI_BASE_URL": model.base_url, "CONTINUAL_ACP_TEST_MARK": marker}
        done = _doctor(env, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert processes_with_env("CONTINUAL_ACP_TEST_MARK", marker) == []  # its test kernel is gone
    for name in ("config", "data dir", "model endpoint", "kernel", "event loop"):
        assert f"OK    {name}:" in done.stdout, done.stdout
    assert "FAIL" not in done.stdout
    assert (
        f"  WARN  config: {config}: unknown setting 'max_kernel'; did you mean 'max_kernels'? (it is ignored)\n"
        in done.stdout
    )


def test_doctor_prints_a_launch_line_for_each_editor(hermetic_env: dict[str, str], tmp_path: Path) -> None:
    from acp_server.console.editor_launch import EDITORS

    with ScriptedModelServer([], fallback=text("ok")) as model:
        done = _doctor({**hermetic_env, "OPENAI_BASE_URL": model.base_url}, tmp_path)
    command = str(Path(sys.executable).parent / "continual-acp")
    for entry in EDITORS:
        [line] = [ln for ln in done.stdout.splitlines() if ln.startswith(f"  {entry.editor}")]
        if "{cmd}" in entry.template:
            assert command in line, line
        else:  # an install from the registry: the editor runs the published package, not this one
            assert entry.template.format(cmd=command) in line, line


def test_doctor_exits_1_and_explains_an_unreachable_endpoint(
    hermetic_env: dict[str, str], tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    done = _doctor({**hermetic_env, "OPENAI_BASE_URL": url}, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    failed = [i for i, line in enumerate(lines) if line.strip().startswith("FAIL")]
    assert [lines[i].split(":")[0].split()[-2:] for i in failed] == [["model", "endpoint"]], done.stdout
    assert lines[failed[0] + 1].strip().startswith("fix:") and "OPENAI_BASE_URL" in lines[failed[0] + 1]
    assert "OK    kernel:" in done.stdout  # the other checks still ran
    assert "1 check failed" in done.stdout


async def test_data_dir_check_fails_when_the_data_dir_cannot_be_created(
    hermetic_env: dict[str, str], tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    for home in ("/proc/continual-acp-nope", str(blocker / "home")):
        result = await check_data_dir(load_config({**hermetic_env, "CONTINUAL_ACP_HOME": home}))
        assert not result.ok, result
        assert home in result.detail and "cannot be created" in result.detail
        assert result.fix is not None and "CONTINUAL_ACP_HOME" in result.fix
    assert not Path("/proc/continual-acp-nope").exists()


def test_doctor_fails_the_config_line_of_an_unparsable_config_toml(
    hermetic_env: dict[str, str], tmp_path: Path
) -> None:
    config = Path(hermetic_env["XDG_CONFIG_HOME"]) / "continual-acp" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('model = "gpt-4.1"\nbase_url = http://nope\n')
    done = _doctor(hermetic_env, tmp_path)
    assert done.returncode == 1
    line = next(line for line in done.stdout.splitlines() if "config:" in line)
    assert line.strip().startswith("FAIL") and str(config) in line and "line 2" in line, done.stdout
    assert "fix:" in done.stdout


def test_doctor_fails_the_config_line_naming_a_wrong_typed_setting(
    hermetic_env: dict[str, str], tmp_path: Path
) -> None:
    config = Path(hermetic_env["XDG_CONFIG_HOME"]) / "continual-acp" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('model = "gpt-4.1"\ncontext_window = "big"\n')
    done = _doctor(hermetic_env, tmp_path)
    line = next(line for line in done.stdout.splitlines() if "config:" in line)
    assert (done.returncode, line.strip().split()[0]) == (1, "FAIL")
    assert "context_window = 'big'" in line and str(config) in line and "whole number" in line, done.stdout


def test_doctor_fails_the_config_line_naming_a_kernel_python_that_does_not_exist(
    hermetic_env: dict[str, str], tmp_path: Path
) -> None:
    config = Path(hermetic_env["XDG_CONFIG_HOME"]) / "continual-acp" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'kernel_python = "{tmp_path / "gone" / "python"}"\n')
    done = _doctor(hermetic_env, tmp_path)
    line = next(line for line in done.stdout.splitlines() if "config:" in line)
    assert (done.returncode, line.strip().split()[0]) == (1, "FAIL")
    assert "setting kernel_python = " in line and f"(from {config})" in line and "no such file" in line, line


def test_doctor_fails_the_event_loop_line_when_a_check_blocked_the_loop(
    hermetic_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio
    import time

    from acp_server.console.doctor import CheckResult, run_checks

    monkeypatch.setenv("CONTINUAL_ACP_STALL_SECONDS", "0.5")

    async def blocking_check(config: object) -> CheckResult:
        time.sleep(1.0)  # the deliberate blocking call on the doctor's loop
        return CheckResult("blocking", True, "returned")

    for key, value in hermetic_env.items():
        monkeypatch.setenv(key, value)
    results = asyncio.run(run_checks(load_config(), (blocking_check,)))
    loop = results[-1]
    assert loop.name == "event loop" and not loop.ok, loop
    assert float(loop.detail.split()[2]) >= 1.0, loop.detail


async def test_a_down_endpoint_from_config_toml_names_its_line_and_a_llama_cpp_example(
    hermetic_env: dict[str, str], tmp_path: Path
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    path = tmp_path / "config.toml"
    path.write_text(f'model = "m"\nbase_url = "{url}"\n')
    env = {k: v for k, v in hermetic_env.items() if k != "OPENAI_BASE_URL"}
    result = await check_model(load_config({**env, "CONTINUAL_ACP_CONFIG": str(path)}))
    assert not result.ok and result.fix is not None
    assert f"from `base_url` in {path}, line 2" in result.fix and "OPENAI_BASE_URL" not in result.fix


def test_the_example_url_fits_the_port_the_user_chose() -> None:
    from acp_server.console.doctor import _example_url

    assert _example_url("http://127.0.0.1:8080/v1") == "http://localhost:8080/v1 for llama.cpp's server"
    assert "Ollama" in _example_url("http://localhost:11434/v1")
    assert "llama.cpp" in _example_url("http://gpu-box:9999/v1") and "Ollama" in _example_url(
        "http://gpu-box:9999/v1"
    )
