"""A missing system dependency skips a test on a developer's machine and fails it under CI."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from system_deps import missing, under_ci

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[1]


def test_a_missing_dependency_skips_with_its_reason_on_a_developers_machine() -> None:
    with pytest.raises(pytest.skip.Exception, match=r"^missing system dependency: no bwrap here$"):
        missing("no bwrap here", env={})


@pytest.mark.parametrize("value", ["true", "1", "TRUE", "yes"])
def test_a_missing_dependency_fails_under_ci(value: str) -> None:
    with pytest.raises(pytest.fail.Exception, match=r"^missing system dependency under CI: no bwrap here$"):
        missing("no bwrap here", env={"CI": value})


def test_ci_false_or_unset_is_a_developers_machine() -> None:
    assert [under_ci(env) for env in ({}, {"CI": ""}, {"CI": "false"}, {"CI": "0"})] == [False] * 4


MODULE = """
import pytest
from system_deps import requires

pytestmark = requires(False, "chromium is not installed")

def test_needs_chromium():
    assert True
"""
CONFTEST = """
import pytest
import system_deps

def pytest_configure(config):
    config.addinivalue_line("markers", "requires_system(available, reason): a system dependency")

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    system_deps.check_marks(item)
"""


@pytest.mark.parametrize(("ci", "outcome"), [("", {"skipped": 1}), ("true", {"errors": 1})])
def test_a_module_marked_with_an_unmet_requirement_skips_or_errors_by_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str, outcome: dict[str, int]
) -> None:
    monkeypatch.setenv("CI", ci)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_browser=MODULE)
    result = pytester.runpytest_inprocess("-ra", "-p", "no:randomly")
    result.assert_outcomes(**outcome)
    result.stdout.fnmatch_lines(["*missing system dependency*chromium is not installed*"])


@pytest.mark.parametrize(
    ("ci", "code", "said"), [("true", 1, "error: could not install"), ("", 0, "warning:")]
)
def test_the_ci_install_step_stops_under_ci_when_it_cannot_install_what_the_tests_need(
    tmp_path: Path, ci: str, code: int, said: str
) -> None:
    """With no chromium, bwrap or apt-get on PATH (an empty dir), as on a machine that cannot install."""
    bash = shutil.which("bash")
    assert bash is not None
    env = {"PATH": str(tmp_path), "CI": ci, "HOME": str(tmp_path)}
    run = subprocess.run(
        [bash, str(ROOT / ".ci" / "system-deps")], env=env, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == code, run.stderr
    assert run.stderr.startswith(said) and "chromium" in run.stderr, run.stderr
