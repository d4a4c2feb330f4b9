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
from scheduling import group_of, pytest_xdist_make_scheduler  # noqa: E402,F401  (the hook is registered from here)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{system_deps.MARK}(available, reason): needs a system dependency (fails under CI)"
    )
    config.addinivalue_line(
        "markers", "exec_server: the test's servers are exec'd, never forked from the zygote (EXEC_LAUNCH)"
    )


# The tests whose servers are started with exec, never forked from the suite's pre-imported zygote
# (tests/acp_server/server_zygote.py): the referee's and the hostile repository's that read the
# server's /proc entries or environment block, or count on its parent (a forked server shows the
# zygote's), the tests that start servers as another user, and the tests of the launch itself
# (imports, start-up, the watchdog, exits, stdin kinds, the bytecode cache, the installed wheel). The
# other referee and edge files (gates, guards, tampering, clear errors, the data dir, unicode) look
# only at what the server says and writes: forked, like the rest of the suite. A test elsewhere that
# needs an exec'd server says so with `@pytest.mark.exec_server` (a parameter of it too, through
# `pytest.param(..., marks=...)`); a test whose server command is not `python -m acp_server` (a
# patched server under `-c`, a wrapper) is exec'd whatever it says.
EXEC_LAUNCH = (
    "tests/referee/test_referee_boundary_matrix.py",
    "tests/referee/test_referee_host_calls.py",
    "tests/referee/test_referee_launch_seam.py",
    "tests/referee/test_referee_plain_user.py",
    "tests/referee/test_referee_stdio.py",
    "tests/edges/test_defect_runtime_sweep.py",
    "tests/edges/test_defect_secrets.py",
    "tests/edges/test_doctor.py",
    "tests/edges/test_demo.py",
    "tests/edges/test_editor_config",
    "tests/packaging/",
    "tests/newuser/",
    "tests/acp_server/test_acp_early_initialize.py",
    "tests/acp_server/test_acp_shutdown.py",
    "tests/acp_server/test_acp_startup_imports.py",
    "tests/acp_server/test_acp_unpollable_stdin.py",
    "tests/acp_server/test_bytecode_cache.py",
    "tests/acp_server/test_watchdog.py",
    "tests/acp_server/test_import_costs.py",
)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    system_deps.check_marks(item)
    import server_zygote

    # Before the test's fixtures: a module-scoped server is started by the first test that needs it.
    server_zygote.forking_allowed = not (
        _file_key(item.path).startswith(EXEC_LAUNCH) or item.get_closest_marker("exec_server") is not None
    )


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


def _file_key(path: Path) -> str:
    try:
        return path.relative_to(_ROOT).as_posix()
    except ValueError:
        return path.as_posix()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the longest groups go first.

    The groups (`group_of`) go out in collection order, and a long group that comes last runs alone
    on one worker while the others idle, so the longest go first. A group's length is its file's
    measured seconds (tests/file_durations.json) shared among the file's groups by test count; a file
    not measured yet counts 0.5 s per test. Within a group the order is kept, and serial runs keep
    the usual order.
    """
    if not hasattr(config, "workerinput"):
        return
    measured = _file_seconds()
    groups = {item.nodeid: group_of(item.nodeid) for item in items}
    per_file = Counter(item.path for item in items)
    per_group = Counter(groups.values())
    lengths: dict[str, float] = {}
    for item in items:
        group = groups[item.nodeid]
        if group not in lengths:
            share = per_group[group] / per_file[item.path]
            lengths[group] = measured.get(_file_key(item.path), 0.5 * per_file[item.path]) * share
    items.sort(key=lambda item: (-lengths[groups[item.nodeid]], groups[item.nodeid]))  # stable within a group


@pytest.fixture(scope="session", autouse=True)
def _servers_exit_cleanly() -> Iterator[None]:
    """Servers closed at a test's teardown finish exiting while later tests run (acp_client's
    `close_and_check`); at the end every one must have exited with 0 and kept stdout clean."""
    yield
    from acp_client import reap_closing

    problems = reap_closing()
    assert not problems, "\n".join(problems)
