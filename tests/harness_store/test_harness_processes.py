"""Real processes: two writers sharing one global store, and kill -9 in the middle of saves."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness_store import HarnessStore
from harness_store.statefile import load_state

WORKER = Path(__file__).with_name("harness_worker.py")
ROOT_DIR = Path(__file__).resolve().parents[2]


def spawn(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT_DIR)}
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.slow
def test_two_processes_applying_200_proposals_each_lose_nothing(tmp_path: Path) -> None:
    root = tmp_path / "harness"
    store = HarnessStore(root)
    store.apply(
        {"edits": [{"action": "create", "kind": "memory", "id": "shared", "title": "S", "content": "0"}]},
        scope="global",
        trigger="user",
    )
    stop = tmp_path / "stop-reader"
    reader = spawn("reader", str(root), str(stop))
    writers = [spawn("writer", str(root), "200", tag) for tag in ("a", "b")]
    try:
        for proc in writers:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in writers:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = [proc.communicate(timeout=110)[0] for proc in writers]
    finally:
        stop.touch()
    reader_out, reader_err = reader.communicate(timeout=30)
    for proc in writers:
        assert proc.returncode == 0, outputs
    ids = [rid for out in outputs for rid in json.loads(out.strip().splitlines()[-1])["ids"]]
    assert len(ids) == 400

    history = HarnessStore(root).history()
    assert len(history) == 401
    assert set(ids) <= {r.id for r in history}
    state = HarnessStore(root).load()
    for tag in ("a", "b"):
        assert all(state.get("memory", f"{tag}_{i}") is not None for i in range(200))
    shared = state.get("memory", "shared")
    # Every one of the 400 updates was applied on top of the previous one: no lost update.
    assert shared is not None and shared.version == 401
    report = json.loads(reader_out.strip().splitlines()[-1])
    assert reader.returncode == 0 and report["bad"] == [], (report, reader_err)
    assert report["reads"] > 0


@pytest.mark.slow
def test_kill_9_in_the_middle_of_saves_leaves_a_state_that_history_explains(tmp_path: Path) -> None:
    root = tmp_path / "harness"
    rng = random.Random(20261130)
    for _ in range(20):
        child = spawn("saver", str(root))
        assert child.stdout is not None
        target = rng.randint(1, 6)
        seen = 0
        while seen < target:
            line = child.stdout.readline()
            assert line, child.stderr.read() if child.stderr else "saver exited"
            if line.startswith("saving"):
                seen += 1
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        child.stdout.close()
        if child.stderr:
            child.stderr.close()
        if child.stdin:
            child.stdin.close()

        loaded = load_state(root / "harness_state.json")
        assert not loaded.damaged
        raw = loaded.state
        store = HarnessStore(root)
        history_ids = [r.id for r in store.history()]
        if raw.head is not None:
            # The file on disk is exactly the state after some prefix of the history...
            assert raw.head in history_ids
            assert store.state_as_of(raw.head).entries == raw.entries
        # ...and what a reader sees (rolled forward) is the state after the whole history.
        if history_ids:
            assert store.load().entries == store.state_as_of(history_ids[-1]).entries
