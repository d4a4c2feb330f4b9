"""A pytest plugin: the CPU seconds each test file costs, its processes included.

Loaded by `bench_suite_time.py` (`-p suite_cpu`, this directory on the import path). The suite's wall
time is CPU-bound on 2 cores (its workers keep both busy), so the seconds a file spends in its tests
say less than the CPU it makes the machine spend: a file that waits costs little, one whose servers
and kernels work costs a lot. Per test, around the whole protocol (set-up, call, teardown), it adds up
the change in the worker's own CPU and that of the processes it has reaped (`/proc/self/stat`: utime,
stime, cutime, cstime), plus the same of the suite's server zygote (tests/acp_server/server_zygote.py),
whose forked servers are reaped by the zygote, not the worker. A server's kernels and helpers count
once the server has reaped them; a process still running when its test ends counts for the test in
which it is reaped. Each worker writes `<worker>.json` ({file: [cpu seconds, wall seconds]}) into the
directory named by `CONTINUAL_ACP_SUITE_CPU_DIR`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

_TICKS = os.sysconf("SC_CLK_TCK")
_seconds: dict[str, list[float]] = {}


def _cpu(pid: int) -> float:
    """utime + stime + cutime + cstime of `pid`, in seconds (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(value) for value in fields[11:15]) / _TICKS


def _spent() -> float:
    total = _cpu(os.getpid())
    zygote_module = sys.modules.get("server_zygote")
    zygote: Any = getattr(zygote_module, "_zygote", None)
    if zygote is not None:
        total += _cpu(zygote.proc.pid)
    return total


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    cpu, wall = _spent(), time.monotonic()
    yield
    name = str(Path(item.path).relative_to(item.config.rootpath))
    spent = _seconds.setdefault(name, [0.0, 0.0])
    spent[0] += _spent() - cpu
    spent[1] += time.monotonic() - wall


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get("CONTINUAL_ACP_SUITE_CPU_DIR")
    if out:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        Path(out, f"{worker}.json").write_text(json.dumps(_seconds), encoding="utf-8")
