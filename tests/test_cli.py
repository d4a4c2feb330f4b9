"""The console script routes each subcommand to the package that owns it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def _run(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTINUAL_ACP_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "acp_server", *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_harness_accepts_options_before_its_subcommand(tmp_path: Path) -> None:
    done = _run(["harness", "--json", "list"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_unknown_subcommand_is_a_usage_error_on_stderr(tmp_path: Path) -> None:
    done = _run(["no-such-command"], tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "invalid choice" in done.stderr


HINT = "continual-acp: speaking ACP on stdin/stdout for an editor"


def test_bare_continual_acp_on_a_terminal_says_how_to_start_then_serves_until_end_of_input(
    tmp_path: Path,
) -> None:
    import pty
    import select
    import time

    master, slave = pty.openpty()
    env = {**os.environ, "CONTINUAL_ACP_HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "acp_server"],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(slave)
    try:
        assert proc.stderr is not None
        said = b""
        deadline = time.monotonic() + 60
        while HINT.encode() not in said:
            assert time.monotonic() < deadline, f"no hint within 60 s: {said!r}"
            ready, _, _ = select.select([proc.stderr], [], [], 1.0)
            if ready:
                chunk = os.read(proc.stderr.fileno(), 4096)
                assert chunk, f"stderr closed before the hint: {said!r}"
                said += chunk
        os.write(master, b"\x04")  # Ctrl-D: end of input on the terminal
        assert proc.wait(timeout=60) == 0
        assert proc.stdout is not None and proc.stdout.read() == b""  # stdout stays JSON-RPC only
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


def test_an_editor_launch_on_pipes_gets_no_hint(tmp_path: Path) -> None:
    env = {**os.environ, "CONTINUAL_ACP_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "acp_server"], input="", env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout == ""
    assert HINT not in done.stderr


def test_every_subcommand_help_describes_it_and_harness_help_names_ui_and_sessions(tmp_path: Path) -> None:
    for command, words in (
        ("serve", "Speak the Agent Client Protocol"),
        ("demo", "Run one scripted session"),
        ("doctor", "Check that a kernel starts"),
        ("setup", "Ask for the model endpoint"),
    ):
        done = _run([command, "--help"], tmp_path)
        assert done.returncode == 0 and words in done.stdout.replace("\n", " "), (command, done.stdout)
    harness = _run(["harness", "--help"], tmp_path)
    assert harness.returncode == 0
    assert "    ui " in harness.stdout and "    sessions " in harness.stdout, harness.stdout
    report = _run(["eval", "report", "--help"], tmp_path)
    assert report.returncode == 0 and "usage: continual-acp eval report RUN_DIR" in report.stdout
    assert "results.json" not in report.stderr
