"""`@pytest.mark.exec_server` (tests/conftest.py): a marked test, or a marked parameter of one, execs
its servers; the rest of a file that is not in `EXEC_LAUNCH` forks them from the zygote."""

from __future__ import annotations

import os

import pytest
import server_zygote


@pytest.mark.exec_server
def test_a_test_marked_exec_server_execs_its_servers() -> None:
    # The mark is read before the test's fixtures start any server.
    assert not server_zygote.uses_zygote(None)


@pytest.mark.parametrize(
    "marked",
    [pytest.param(True, marks=pytest.mark.exec_server, id="marked"), pytest.param(False, id="unmarked")],
)
def test_the_exec_server_mark_reaches_one_parameter_of_a_test(marked: bool) -> None:
    forks = os.environ.get("CONTINUAL_ACP_TEST_LAUNCH") != "exec"  # the stall benchmark execs all
    assert server_zygote.uses_zygote(None) is (forks and not marked)
