"""Unstable ACP v1 frames only for clients that advertise them: the plan goes as `plan_update` by id to
a client with `plan`, as the stable `plan` to one without; every frame is checked (the unstable ones
against the schema the npm SDK ships)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp_client import AcpClient
from acp_helpers import ClientFactory, initialize, new_session, run_command


def plan_updates(client: AcpClient, sid: str) -> list[dict[str, Any]]:
    return [u for u in client.updates(sid) if u["sessionUpdate"] in ("plan", "plan_update", "plan_removed")]


def test_a_client_that_advertises_plan_gets_plan_update_by_id_and_one_that_does_not_gets_plan(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    seen: dict[str, list[dict[str, Any]]] = {}
    for name, capabilities in (("plan", {"plan": {}}), ("plain", {})):
        client = spawn()
        initialize(client, **capabilities)
        sid, _ = new_session(client, tmp_path)
        reply = run_command(client, sid, "/goal make the import tests pass")
        assert "make the import tests pass" in reply, reply
        seen[name] = plan_updates(client, sid)
        assert client.violations == [], client.violations
    [by_id] = seen["plan"]
    assert by_id["sessionUpdate"] == "plan_update" and by_id["plan"]["planId"] == "session"
    assert "make the import tests pass" in by_id["plan"]["entries"][0]["content"]
    assert [u["sessionUpdate"] for u in seen["plain"]] == ["plan"]
    assert seen["plain"][0]["entries"] == by_id["plan"]["entries"]
