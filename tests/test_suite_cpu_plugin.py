"""benchmarks/suite_cpu.py counts a test file's CPU, the processes its tests start included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

BUSY_CHILD = """
import subprocess, sys

def test_a_child_burns_cpu():
    burn = "import time\\nend = time.process_time() + 0.6\\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", burn], check=True)
"""

IDLE = """
import threading

def test_waits_without_cpu():
    threading.Event().wait(0.6)
"""


def test_a_file_whose_child_burns_cpu_costs_it_and_a_waiting_file_does_not(tmp_path: Path) -> None:
    (tmp_path / "test_busy.py").write_text(BUSY_CHILD)
    (tmp_path / "test_idle.py").write_text(IDLE)
    out = tmp_path / "cpu"
    out.mkdir()
    # Not a worker of this run's xdist: the plugin names its file after the worker it runs in.
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}
    env = {
        **inherited,
        "CONTINUAL_ACP_SUITE_CPU_DIR": str(out),
        "PYTHONPATH": str(BENCHMARKS),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "suite_cpu",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            "--rootdir",
            str(tmp_path),
            "-c",
            os.devnull,
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    seconds = json.loads((out / "main.json").read_text())
    busy_cpu, _busy_wall = seconds["test_busy.py"]
    idle_cpu, idle_wall = seconds["test_idle.py"]
    assert busy_cpu >= 0.5, seconds  # the child's 0.6 s, reaped within the test
    assert idle_wall >= 0.5 and idle_cpu < 0.3, seconds
