"""Deleting a session with local harness entries over real stdio: the reply lists them and says
where they were saved so they can still be promoted."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "acp_server"))

from acp_client import AcpClient, server_env
from acp_helpers import initialize, new_session

from harness_store import HarnessStore, local_root


def test_session_delete_reply_lists_local_entries_and_where_they_were_saved(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    client = AcpClient(server_env(home, None), cwd=str(tmp_path))
    try:
        initialize(client)
        sid, _ = new_session(client, str(tmp_path))
        HarnessStore(local_root(home, sid)).apply(
            {"edits": [{"action": "create", "kind": "memory", "title": "Build", "content": "make all"}]},
            scope="local",
            trigger="model",
            session_id=sid,
        )
        reply = client.request("session/delete", {"sessionId": sid})
        meta = reply["_meta"]["continual-acp"]
        assert meta["localEntries"] == [{"kind": "memory", "id": "build", "title": "Build"}]
        assert meta["savedTo"] == str(home / "harness" / "deleted-sessions" / f"{sid}.json")
        assert Path(meta["savedTo"]).is_file()
        assert "continual-acp harness import" in meta["message"]
        assert client.request("session/delete", {"sessionId": sid}) == {}  # gone: nothing to list
    finally:
        assert client.close() == 0
    assert client.garbage == [] and client.violations == []
