"""Two processes refining one project store at once lose nothing (the store lock + re-read)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness_store.project import ProjectStore

WRITER = """
import sys
from harness_store.project import ProjectStore
store = ProjectStore(sys.argv[1])
for i in range(int(sys.argv[3])):
    edit = {"action": "create", "kind": "memory", "id": f"{sys.argv[2]}{i}", "title": "t", "content": f"c{i}"}
    assert store.apply({"edits": [edit]}, trigger="user").applied
"""


def test_two_processes_applying_to_one_project_store_lose_nothing(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(repo), prefix, "40"]) for prefix in ("a", "b")
    ]
    assert [w.wait(timeout=300) for w in writers] == [0, 0]
    store = ProjectStore(repo)
    assert len(store.load().entries["memory"]) == 80
    assert len(store.history()) == 80
    assert store.conflicts() == []
