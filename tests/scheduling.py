"""How `--dist loadgroup` hands the suite's tests to pytest-xdist's workers: by group.

A group is a test file, so its module-scoped kernel or server starts once, or a part of one
(`SPLIT_BY_ID_PART`). tests/conftest.py registers the hook below and orders the groups longest
first. The groups are read off the test ids the workers collected, not off xdist's own
`xdist_group` marks: xdist regroups marked tests by rewriting each item's node id, which pytest 9.2
no longer reads, and then every test went out alone and a file's module-scoped fixtures were set
up again on each worker that ran one of its tests.
"""

from __future__ import annotations

from typing import Any

import pytest

# A test file whose module-scoped servers are keyed by a parameter may split into one scheduling
# group per value of that parameter (each worker starts only the servers its group needs): the file
# name, and which "-"-separated part of a test's parameter id is that value (the boundary matrix's
# ids are "<user>-<backend>": one group per backend).
SPLIT_BY_ID_PART: dict[str, int] = {
    "tests/referee/test_referee_boundary_matrix.py": -1,
}


def group_of(nodeid: str) -> str:
    """The scheduling group of the test `nodeid`: its file, or its file and the part of its
    parameter id that `SPLIT_BY_ID_PART` names for the file."""
    file, _, rest = nodeid.partition("::")
    part = SPLIT_BY_ID_PART.get(file)
    if part is None or not rest.endswith("]") or "[" not in rest:
        return file
    parameters = rest[rest.index("[") + 1 : -1].split("-")
    return f"{file}[{parameters[part]}]"


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under `--dist loadgroup`: xdist's scope scheduler, with `group_of` as the scope."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return GroupScheduling(config, log)
