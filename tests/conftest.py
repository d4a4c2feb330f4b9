"""Suite-wide setup: the one ACP test client and its helpers are importable from every test directory."""

from __future__ import annotations

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


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Every async test runs under anyio's pytest plugin (`pytestmark = pytest.mark.anyio`) on asyncio:
    kernel_bridge is asyncio (jupyter_client's zmq.asyncio) and the rest is written against anyio."""
    return "asyncio"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, hand out the files with the most tests first.

    `.ci/run` distributes whole files (`--dist loadfile`) in collection order; a long file that
    comes last runs alone on one worker while the other idles. The test count is a rough,
    self-maintaining proxy for a file's length. Within a file the order is kept, and serial runs
    keep the usual order.
    """
    if not hasattr(config, "workerinput"):
        return
    counts = Counter(item.path for item in items)
    items.sort(key=lambda item: -counts[item.path])  # stable: a file's tests stay in their order


@pytest.fixture(scope="session", autouse=True)
def _servers_exit_cleanly() -> Iterator[None]:
    """Servers closed at a test's teardown finish exiting while later tests run (acp_client's
    `close_and_check`); at the end every one must have exited with 0 and kept stdout clean."""
    yield
    from acp_client import reap_closing

    problems = reap_closing()
    assert not problems, "\n".join(problems)
