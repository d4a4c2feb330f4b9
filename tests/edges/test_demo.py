"""`continual-acp demo` runs a real session offline and prints a transcript a person can follow."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import uuid
from pathlib import Path

from acp_edge_support import processes_with_env


def test_demo_shows_the_cell_its_output_a_slash_command_and_a_rollback(
    hermetic_env: dict[str, str], tmp_path: Path
) -> None:
    marker = uuid.uuid4().hex
    hermetic_env["CONTINUAL_ACP_TEST_MARK"] = marker  # inherited by the server and its kernel
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "demo"],
        capture_output=True,
        text=True,
        timeout=110,
        env=hermetic_env,
        cwd=tmp_path,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr[-3000:]
    # the cell, with its code and its real kernel output
    assert "[cell] Sum the squares of 1..10" in out
    assert "total = sum(i * i for i in range(1, 11))" in out
    assert "sum of squares: 385" in out
    assert "[cell completed]" in out
    # the harness note written from a cell: an edit card with its diff, listed by /history, undone by /undo
    noted = re.search(r"noted as refinement (\S+)", out)
    assert noted, out
    refinement_id = noted.group(1)
    assert "[harness edit] Refine harness: create memory Test command" in out
    assert "+Run `make check` before committing" in out
    first_history = out.split("you> /history", 1)[1].split("you> /undo", 1)[0]
    assert refinement_id in first_history
    undo = out.split("you> /undo", 1)[1].split("you> /history", 1)[0]
    assert f"Rolled back {refinement_id}" in undo
    second_history = out.split("you> /history")[2]
    assert f"rollback of {refinement_id}" in second_history
    assert "agent> The sum of the squares of 1 to 10 is 385" in out
    assert "the server exited cleanly" in out
    assert processes_with_env("CONTINUAL_ACP_TEST_MARK", marker) == []  # no kernel or server left behind


def test_demo_exits_1_with_a_reason_when_the_server_dies(tmp_path: Path) -> None:
    from acp_server.console.demo import run_demo

    out = io.StringIO()
    code = run_demo(
        out,
        server_argv=[
            sys.executable,
            "-c",
            "import sys; print('boom: cannot start', file=sys.stderr); sys.exit(3)",
        ],
    )
    assert code == 1
    assert "demo failed: " in out.getvalue()
    assert "the server closed its" in out.getvalue()
    assert "boom: cannot start" in out.getvalue()  # the server's stderr says why
