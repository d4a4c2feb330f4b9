"""Suite-wide setup: the one ACP test client and its helpers are importable from every test directory."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

# tests/acp_server holds acp_client.py (the stdio client) and acp_helpers.py (initialize, new_session,
# prompt, command replies); stdio tests elsewhere (refinement, edges) use the same ones.
_ACP_SUPPORT = str(Path(__file__).resolve().parent / "acp_server")
if _ACP_SUPPORT not in sys.path:
    sys.path.insert(0, _ACP_SUPPORT)
# tests/system_deps.py: the one skip-or-fail for a missing system dependency.
_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

import system_deps  # noqa: E402  (importable once the path above is set)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{system_deps.MARK}(available, reason): needs a system dependency (fails under CI)"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    system_deps.check_marks(item)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Every async test runs under anyio's pytest plugin (`pytestmark = pytest.mark.anyio`) on asyncio:
    kernel_bridge is asyncio (jupyter_client's zmq.asyncio) and the rest is written against anyio."""
    return "asyncio"


# Seconds per test file from a recent run (tests/update_file_durations.py writes it).
_DURATIONS = Path(__file__).resolve().parent / "file_durations.json"
_ROOT = Path(__file__).resolve().parent.parent


def _file_seconds() -> dict[str, float]:
    try:
        data = json.loads(_DURATIONS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # no figures: the order below falls back to test counts
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, hand out the longest files first.

    `.ci/run` distributes whole files (`--dist loadfile`) in collection order; a long file that
    comes last runs alone on one worker while the others idle. A file's length is its measured
    seconds (tests/file_durations.json); a file not measured yet counts 0.5 s per test. Within a file
    the order is kept, and serial runs keep the usual order.
    """
    if not hasattr(config, "workerinput"):
        return
    measured = _file_seconds()
    counts = Counter(item.path for item in items)

    def length(path: Path) -> float:
        try:
            key = path.relative_to(_ROOT).as_posix()
        except ValueError:
            key = path.as_posix()
        return measured.get(key, 0.5 * counts[path])

    lengths = {path: length(path) for path in counts}
    items.sort(key=lambda item: -lengths[item.path])  # stable: a file's tests stay in their order


@pytest.fixture(scope="session", autouse=True)
def _servers_exit_cleanly() -> Iterator[None]:
    """Servers closed at a test's teardown finish exiting while later tests run (acp_client's
    `close_and_check`); at the end every one must have exited with 0 and kept stdout clean."""
    yield
    from acp_client import reap_closing

    problems = reap_closing()
    assert not problems, "\n".join(problems)
