"""Through the server: a damaged state file (global and local) does not hide a single entry.

The store is written, the server stops, both state files are damaged, and a
new server's session (loaded over real stdio) still sees every entry with its trust.
"""

from __future__ import annotations

from pathlib import Path

from defect_support import new_session, served

from harness_store import HarnessStore, local_root


def _write(store: HarnessStore, scope: str, prefix: str) -> None:
    for index in range(5):
        store.apply(
            {
                "edits": [
                    {
                        "action": "create",
                        "kind": "memory",
                        "title": f"{prefix}{index}",
                        "content": f"{prefix} note {index}",
                    }
                ]
            },
            scope=scope,
            trigger="user",
        )


def test_a_session_over_stdio_sees_every_entry_after_both_state_files_are_damaged(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with served(home, tmp_path) as client:
        sid, _ = new_session(client, str(tmp_path))
    global_store = HarnessStore(home / "harness")
    local_store = HarnessStore(local_root(home, sid))
    _write(global_store, "global", "g")
    _write(local_store, "local", "l")
    global_store.state_path.write_bytes(global_store.state_path.read_bytes()[:40])
    local_store.state_path.write_bytes(b"[]")
    with served(home, tmp_path) as client:
        client.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        seen = {
            scope: sorted(
                e["id"]
                for e in client.request("_harness/state", {"sessionId": sid, "scope": scope})["entries"]
            )
            for scope in ("global", "local")
        }
    assert seen == {"global": [f"g{i}" for i in range(5)], "local": [f"l{i}" for i in range(5)]}
