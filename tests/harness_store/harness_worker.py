"""A child process for the multi-process tests (run as a script, never imported by pytest).

writer ROOT N TAG   after reading "go" on stdin, apply N proposals (one new entry each plus an
                    update of the shared entry); print one JSON line of result ids at the end
reader ROOT STOP    read the state file in a loop until the STOP file exists; every read must be
                    valid JSON; print {"reads": n, "bad": [...]} and exit 1 if any read was bad
saver ROOT          apply proposals forever, printing "saving <n>" before each one (the parent
                    kills it at a random one of those moments)
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

from harness_store import HarnessStore


def writer(root: Path, count: int, tag: str) -> int:
    store = HarnessStore(root, lock_timeout=60)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 2
    ids = []
    for i in range(count):
        edits = [
            {
                "action": "create",
                "kind": "memory",
                "id": f"{tag}_{i}",
                "title": f"{tag} {i}",
                "content": f"fact {i}",
            },
            {
                "action": "update",
                "kind": "memory",
                "id": "shared",
                "title": "Shared",
                "content": f"{tag} {i}",
            },
        ]
        result = store.apply({"summary": f"{tag} {i}", "edits": edits}, scope="global", trigger="model")
        if not all(e.applied for e in result.applied_edits):
            print(json.dumps({"refused": result.errors}), flush=True)
            return 1
        ids.append(result.id)
    print(json.dumps({"ids": ids}), flush=True)
    return 0


def reader(root: Path, stop: Path) -> int:
    path = root / "harness_state.json"
    reads, bad = 0, []
    while not stop.exists():
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        reads += 1
        try:
            value = json.loads(data)
            assert isinstance(value, dict) and isinstance(value["entries"], dict)
        except (ValueError, AssertionError, KeyError) as exc:
            bad.append(f"{type(exc).__name__}: {data[:80]!r}")
    print(json.dumps({"reads": reads, "bad": bad[:5]}), flush=True)
    return 1 if bad else 0


def saver(root: Path) -> int:
    store = HarnessStore(root, lock_timeout=60)
    rng = random.Random(os.getpid())
    n = 0
    while True:
        n += 1
        entry_id = f"e{rng.randrange(30)}"
        # Random sizes so the kill lands at different points of the write.
        content = f"save {n} " + "x" * rng.randrange(10, 20000)
        exists = store.state.get("memory", entry_id) is not None
        action = rng.choice(["update", "delete"]) if exists else "create"
        edit = {"action": action, "kind": "memory", "id": entry_id, "title": entry_id, "content": content}
        print(f"saving {n}", flush=True)
        store.apply({"summary": f"save {n}", "edits": [edit]}, scope="global", trigger="model")


def main() -> int:
    mode, root = sys.argv[1], Path(sys.argv[2])
    if mode == "writer":
        return writer(root, int(sys.argv[3]), sys.argv[4])
    if mode == "reader":
        return reader(root, Path(sys.argv[3]))
    if mode == "saver":
        return saver(root)
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    raise SystemExit(main())
