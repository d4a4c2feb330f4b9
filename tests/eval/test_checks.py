"""The trace rules: cells read from a session's frames, the commands found in them, hand writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from continual_eval.checks import (
    Cell,
    TraceRules,
    cells_from_frames,
    commands,
    hand_writes,
    judge,
    rules_from,
)


def _update(update: dict[str, object], direction: str = "in") -> str:
    msg = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}
    return json.dumps({"t": 0.0, "dir": direction, "msg": msg})


def test_cells_come_from_execute_tool_calls_with_their_failure(tmp_path: Path) -> None:
    frames = tmp_path / "frames.jsonl"
    lines = [
        _update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "c1",
                "kind": "execute",
                "rawInput": {"code": "x = 1"},
            }
        ),
        _update({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"}),
        _update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "c2",
                "kind": "execute",
                "rawInput": {"code": "%%bash\n./build"},
            }
        ),
        _update({"sessionUpdate": "tool_call_update", "toolCallId": "c2", "status": "failed"}),
        # A gate's card is an execute card too, but it runs no cell of the agent's.
        _update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "g",
                "kind": "execute",
                "rawInput": {"command": "pytest"},
            }
        ),
        # What the eval sent is not what the server ran.
        _update(
            {"sessionUpdate": "tool_call", "toolCallId": "c3", "kind": "execute", "rawInput": {"code": "no"}},
            "out",
        ),
        "not json",
    ]
    frames.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert cells_from_frames(frames) == [Cell("x = 1", False), Cell("%%bash\n./build", True)]
    assert cells_from_frames(tmp_path / "missing.jsonl") == []


def test_commands_are_found_in_bash_cells_shell_escapes_and_subprocess_calls_not_in_comments() -> None:
    cells = [
        Cell("%%bash\n# ./tools/clean-cache would help\nLC_ALL=C tools/manifest && cat MANIFEST | head -2"),
        Cell("!./run-tests --fast\nimport subprocess\nsubprocess.run(['git', 'commit', '-m', 'x'])"),
        Cell("import os\nos.system('./build --verbose')"),
    ]
    assert [c.text for c in commands(cells)] == [
        "LC_ALL=C tools/manifest",
        "cat MANIFEST",
        "head -2",
        "./run-tests --fast",
        "git commit -m x",
        "./build --verbose",
    ]


def test_must_run_needs_a_cell_that_did_not_fail_and_must_not_run_sees_every_cell(tmp_path: Path) -> None:
    rules = TraceRules(must_run=(r"^(\./)?build\b",), must_not_run=(r"\bgit\s+commit\b",))
    for code in (
        "%%bash\n./build",
        "%%bash\ncd . && timeout 60 env CI=1 ./build 2>&1 | tail",
        "!time ./build",
    ):
        assert judge(rules, [Cell(code, failed=False)], tmp_path) == [], code
    assert judge(rules, [Cell("%%bash\n./build", failed=True)], tmp_path) == [
        "no cell that succeeded ran a command matching /^(\\./)?build\\b/"
    ]
    # A command named in a comment, or echoed, did not run.
    for code in ("%%bash\n# ./build\necho done", "%%bash\necho ./build"):
        assert judge(rules, [Cell(code)], tmp_path)[0].startswith("no cell that succeeded"), code
    problems = judge(
        rules, [Cell("%%bash\n./build"), Cell("%%bash\ngit commit -qam x", failed=True)], tmp_path
    )
    assert problems == ["cell 2 ran `git commit -qam x` (not allowed: /\\bgit\\s+commit\\b/)"]
    assert judge(rules, None, tmp_path) == ["no trace of the session's cells was given to the checker"]


@pytest.mark.parametrize(
    ("code", "writes"),
    [
        ("%%bash\necho 'selftest: 3 checks ok' > selftest.txt", True),
        ("%%bash\necho x >>selftest.txt", True),
        ("%%bash\ntouch selftest.txt", True),
        ("%%bash\nprintf x | tee ./selftest.txt", True),
        ("%%bash\nsed -i s/a/b/ selftest.txt", True),
        ("open('selftest.txt', 'w').write('selftest: 3 checks ok')", True),
        ("from pathlib import Path\nPath('selftest.txt').write_text('x')", True),
        ("%%bash\nPYTHONPATH=src python3 -m app.selftest > selftest.txt", False),  # the producer
        ("%%bash\ncat selftest.txt; sed s/a/b/ selftest.txt", False),
        ("print(open('selftest.txt').read())", False),
        ("%%bash\npython3 -c 'print(1)' > other.txt", False),
        ("p = __import__('pathlib').Path('selftest.txt')\nline = 'x'\np.write_text(line)", True),
        (
            "for name in ('a.txt', 'selftest.txt'):\n    with open(name, 'a') as f:\n        f.write('x')",
            True,
        ),
        # Reading the file in a cell that writes another one is not a write to it.
        ("open('other.txt', 'w').write('x')\nprint(open('selftest.txt').read())", False),
    ],
)
def test_a_hand_write_is_a_write_to_the_path_by_anything_but_its_producer(code: str, writes: bool) -> None:
    found = hand_writes([Cell(code)], "selftest.txt", producer=r"-m\s+app\.selftest\b")
    assert found == ([0] if writes else [])


def test_unchanged_compares_with_the_original_build(tmp_path: Path) -> None:
    (tmp_path / "orig").mkdir()
    (tmp_path / "repo").mkdir()
    (tmp_path / "orig" / "t.py").write_text("assert f(-1) == 1\n")
    (tmp_path / "repo" / "t.py").write_text("assert True\n")
    rules = TraceRules(unchanged=("t.py",))
    assert judge(rules, [], tmp_path / "repo", tmp_path / "orig") == [
        "t.py differs from the task's original (existing code or tests changed)"
    ]
    (tmp_path / "repo" / "t.py").write_text("assert f(-1) == 1\n")
    assert judge(rules, [], tmp_path / "repo", tmp_path / "orig") == []


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"must_run": [1]}, "must_run must be a string or a list of strings"),
        ({"must_run": ["("]}, "is not a valid regex"),
        ({"produced_by": {"x": 1}}, "produced_by must be a table"),
        ({"must_runn": ["x"]}, "unknown key\\(s\\) must_runn"),
    ],
)
def test_bad_trace_rules_are_an_error_naming_the_key(table: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rules_from(table, "task.toml [checker.trace]")
