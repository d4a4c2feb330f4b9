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
