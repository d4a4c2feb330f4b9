"""Tamper evidence without a loop: which files a gates' pass is judged by, and what changed."""

from __future__ import annotations

from pathlib import Path

from agent_core.autonomy.gates import Gate
from agent_core.autonomy.tamper import TamperWatch, looks_like_test, restore
from agent_core.config.referee_defaults import DEFAULT_TEST_PATTERNS


def test_the_default_patterns_match_tests_and_ci_files_at_any_depth_and_nothing_else() -> None:
    hits = ["tests/a.py", "pkg/tests/deep/b.py", "test_x.py", "src/test_y.py", "conftest.py", "a/conftest.py"]
    hits += ["calc_test.go", "ui/button.spec.ts", ".github/workflows/ci.yml", "tox.ini"]
    misses = ["calc.py", "src/contest.py", "testing.md", "docs/tests.md"]
    assert [p for p in hits if not looks_like_test(p, DEFAULT_TEST_PATTERNS)] == []
    assert [p for p in misses if looks_like_test(p, DEFAULT_TEST_PATTERNS)] == []


def test_changes_list_tests_files_a_gate_names_and_protected_paths_with_line_counts(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_a():\n    assert f() == 1\n")
    (tmp_path / "check.sh").write_text("exit 1\n")
    (tmp_path / "calc.py").write_text("x = 1\n")
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "lib.py").write_text("y = 1\n")
    gates = (Gate("sh check.sh"),)
    watch = TamperWatch.start(tmp_path, patterns=DEFAULT_TEST_PATTERNS, gates=gates, protected=("vendor",))
    (tmp_path / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    (tmp_path / "check.sh").write_text("exit 0\n")
    (tmp_path / "calc.py").write_text("x = 2\n")  # ordinary source: not evidence
    (tmp_path / "vendor" / "lib.py").write_text("y = 2\n")
    (tmp_path / "conftest.py").write_text("collect_ignore = ['tests']\n")  # a new file counts too
    evidence = watch.changes()
    lines = {c.path: (c.line(), c.why) for c in evidence.changed}
    assert lines == {
        "check.sh": ("check.sh | +1 -1", "gate"),
        "conftest.py": ("conftest.py | +1 -0", "test"),
        "tests/test_a.py": ("tests/test_a.py | +1 -1", "test"),
        "vendor/lib.py": ("vendor/lib.py | +1 -1", "protected"),
    }
    assert "Tests changed while the loop ran — review before trusting this pass" in evidence.message()
    assert restore(watch, evidence.protected) == []
    assert (tmp_path / "vendor" / "lib.py").read_text() == "y = 1\n"


def test_nothing_changed_is_no_evidence(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text("assert True\n")
    watch = TamperWatch.start(tmp_path, patterns=DEFAULT_TEST_PATTERNS, gates=(), protected=())
    assert watch.changes().changed == () and watch.changes().message() == ""
