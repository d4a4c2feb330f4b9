"""A new user's path, end to end, from the built wheel: run as its own CI step (`.ci/run`).

    .venv/bin/python -m pytest -q -n 0 tests/newuser/new_user_path.py

Not collected by the main test run (the file name is not `test_*.py`): it builds the wheel and a
fresh virtualenv, which the packaging tests already pay for once, and it is one story in order:
the wheel is installed into a fresh venv in a temp dir outside the repository, with a home of its
own and nothing of ours in the environment; `continual-acp setup` is answered on a real
pseudo-terminal against a scripted OpenAI-compatible endpoint on loopback; `doctor` passes every
check; `demo` runs; one real prompt (a cell runs in a kernel) goes through the console script over
stdio as an editor sends it; `harness ui` answers HTTP.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from acp_client import AcpClient
from acp_helpers import final_card, initialize, new_session, prompt, texts
from test_acp_setup import PtySession

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

ROOT = Path(__file__).resolve().parents[2]
IGNORED = (".git", ".venv", "node_modules", "__pycache__", "*.egg-info", "build", "dist", "*.pyc")
IGNORED += (".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", "tests", "benchmarks", "docs")
STEP_TIMEOUT_S = 300


@dataclass
class NewUser:
    venv: Path
    home: Path
    project: Path
    env: dict[str, str]
    model: ScriptedModelServer

    @property
    def script(self) -> str:
        return str(self.venv / "bin" / "continual-acp")

    @property
    def config(self) -> Path:
        return self.home / ".config" / "continual-acp" / "config.toml"

    def run(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.script, *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.project,
            timeout=timeout,
        )


def _wheelhouse() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    default = cache / "continual-acp-tests" / f"wheelhouse-py{sys.version_info.major}{sys.version_info.minor}"
    return Path(os.environ.get("CONTINUAL_ACP_TEST_WHEELHOUSE") or default)


def _build_and_install(tmp: Path) -> Path:
    """The wheel of this tree (built in isolation from a copy), installed into a fresh venv."""
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*IGNORED))
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(
        [*pip, "wheel", "--quiet", "--no-deps", "--wheel-dir", str(tmp / "dist"), str(src)],
        check=True,
        timeout=STEP_TIMEOUT_S,
    )
    (wheel,) = (tmp / "dist").glob("continual_acp-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    install = [*pip, "--python", str(venv / "bin" / "python"), "install", "--quiet", "--no-compile"]
    house = _wheelhouse()
    offline = [*install, "--no-index", "--find-links", str(house), str(wheel)]
    if not house.is_dir() or subprocess.run(offline, capture_output=True, timeout=STEP_TIMEOUT_S).returncode:
        subprocess.run([*install, str(wheel)], check=True, timeout=STEP_TIMEOUT_S)  # from the index
    return venv


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NewUser]:
    tmp = tmp_path_factory.mktemp("new-user")
    assert ROOT not in tmp.parents, "the new user's files must be outside the repository"
    venv = _build_and_install(tmp)
    home, project = tmp / "home", tmp / "project"
    home.mkdir()
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    env = {
        "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "xterm",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    with ScriptedModelServer([], fallback=text("ok")) as model:
        yield NewUser(venv, home, project, env, model)


def test_setup_answered_in_a_terminal_writes_the_model_settings(user: NewUser) -> None:
    term = PtySession([user.script, "setup"], user.env, user.project)
    term.answer("Number [1]: ", "6")  # a llama.cpp server on this machine: asks for its URL
    term.answer("Endpoint URL", user.model.base_url)
    term.answer("API key (Enter for none): ", "")
    term.answer("Model id", "scripted-model")
    term.expect("OK")
    term.expect("Wrote")
    assert term.wait() == 0
    assert tomllib.loads(user.config.read_text()) == {
        "model": "scripted-model",
        "base_url": user.model.base_url,
    }


def test_doctor_says_every_check_is_ok(user: NewUser) -> None:
    done = user.run("doctor")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert f"settings from {user.config}" in done.stdout and "all checks passed" in done.stdout


def test_the_demo_runs(user: NewUser) -> None:
    done = user.run("demo", timeout=STEP_TIMEOUT_S)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "the server exited cleanly" in done.stdout


def test_one_real_prompt_runs_a_cell_over_stdio(user: NewUser) -> None:
    user.model.push(tool_call("print(6 * 7)", title="Multiply"), text("The answer is 42."))
    # Only the new user's environment: AcpClient adds the caller's, so it is emptied of ours first.
    ours = ("OPENAI_", "CONTINUAL_ACP_", "PYTHON", "VIRTUAL_ENV", "XDG_")
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith(ours)}
    try:
        client = AcpClient(user.env, argv=[user.script], cwd=str(user.project))
    finally:
        os.environ.update(saved)
    try:
        initialize(client)
        sid, _ = new_session(client, user.project)
        assert prompt(client, sid, "what is 6 times 7?", timeout=STEP_TIMEOUT_S).stop_reason == "end_turn"
        _start, updates = final_card(client, sid)
        assert updates[-1]["status"] == "completed"
        assert "42" in texts(updates[-1].get("content") or [])
    finally:
        assert client.close() == 0, client.stderr()
    assert client.violations == []


def test_harness_ui_answers_http(user: NewUser) -> None:
    proc = subprocess.Popen(
        [user.script, "harness", "ui", "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=user.env,
        cwd=user.project,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the panel prints its URL once it listens
        match = re.search(r"(http://127\.0\.0\.1:\d+)/\S*token=([\w-]+)", line)
        assert match, line + (proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        base, token = match.groups()
        with urllib.request.urlopen(f"{base}/?token={token}", timeout=30) as page:
            assert page.status == 200 and b"panel.js" in page.read()
        request = urllib.request.Request(f"{base}/api/overview", headers={"X-Panel-Token": token})
        with urllib.request.urlopen(request, timeout=30) as answer:
            overview = json.loads(answer.read())
        assert overview["home"] == str(user.home / ".local" / "share" / "continual-acp")
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
