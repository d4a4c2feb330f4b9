"""The one way a test says a system dependency (chromium, bubblewrap, sshd, node, ...) is missing.

On a developer's machine the test skips and the reason is printed (`-ra`); with `CI` set (`CI=true`,
as `.ci/run` and CI services run the suite) it fails instead, so a run that could not install what
the tests drive for real is never green with those tests skipped.

    pytestmark = requires(shutil.which("node") is not None, "node is not installed")
    ...
    missing("bubblewrap tier unavailable: ...")   # inside a test or fixture
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NoReturn

import pytest

MARK = "requires_system"


def under_ci(env: Mapping[str, str] | None = None) -> bool:
    """Whether the suite runs under CI (`CI` set to a true value, as CI services and `.ci/run` do)."""
    value = (os.environ if env is None else env).get("CI", "")
    return value.strip().lower() in ("1", "true", "yes", "on")


def missing(reason: str, env: Mapping[str, str] | None = None) -> NoReturn:
    """End the current test for a missing system dependency: fail under CI, else skip with `reason`."""
    if under_ci(env):
        pytest.fail(f"missing system dependency under CI: {reason}", pytrace=False)
    pytest.skip(f"missing system dependency: {reason}")


def requires(available: bool, reason: str) -> pytest.MarkDecorator:
    """A mark for a test (or `pytestmark`) that needs a system dependency; see `missing`."""
    return getattr(pytest.mark, MARK)(available=available, reason=reason)


def check_marks(item: pytest.Item) -> None:
    """Run from `pytest_runtest_setup`: every unmet `requires(...)` mark of `item` ends it."""
    for mark in item.iter_markers(MARK):
        if not mark.kwargs["available"]:
            missing(str(mark.kwargs["reason"]))
