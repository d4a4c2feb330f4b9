"""`--dist loadgroup` keeps a test file on one worker (tests/scheduling.py), so a module-scoped
fixture is set up once: pinned by a real pytest-xdist run on two workers over two small files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scheduling import group_of

TESTS = Path(__file__).resolve().parent

MODULE = """
import os
import pytest

@pytest.fixture(scope="module")
def shared():
    with open({log!r}, "a") as f:
        f.write(__name__ + " " + str(os.getpid()) + "\\n")

@pytest.mark.parametrize("n", range(6))
def test_uses_the_module_fixture(shared, n):
    assert n < 6
"""


def _setups(tmp_path: Path, conftest: str) -> list[str]:
    log = tmp_path / "setups.log"
    for name in ("test_one", "test_two"):
        (tmp_path / f"{name}.py").write_text(MODULE.format(log=str(log)))
    (tmp_path / "conftest.py").write_text(conftest)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return sorted(log.read_text().split("\n")[:-1])


def test_each_file_runs_on_one_worker_so_its_module_fixture_is_set_up_once(tmp_path: Path) -> None:
    conftest = f"import sys\nsys.path.insert(0, {str(TESTS)!r})\nfrom scheduling import pytest_xdist_make_scheduler\n"
    setups = _setups(tmp_path, conftest)
    assert [line.split()[0] for line in setups] == ["test_one", "test_two"]


def test_without_the_hook_the_files_tests_spread_over_the_workers(tmp_path: Path) -> None:
    """The control: xdist's loadgroup on unmarked tests sends each test alone, and each worker
    that runs one of a file's tests sets its module fixture up again."""
    setups = _setups(tmp_path, "")
    assert len(setups) > 2


def test_a_test_file_is_its_group_and_the_boundary_matrix_splits_by_backend() -> None:
    assert group_of("tests/a/test_x.py::test_y[1-2]") == "tests/a/test_x.py"
    assert group_of("tests/a/test_x.py::TestC::test_y") == "tests/a/test_x.py"
    matrix = "tests/referee/test_referee_boundary_matrix.py"
    assert group_of(f"{matrix}::test_a[plain-bubblewrap]") == f"{matrix}[bubblewrap]"
    assert group_of(f"{matrix}::test_b[root-bubblewrap]") == f"{matrix}[bubblewrap]"
    assert group_of(f"{matrix}::test_unparametrized") == matrix
