"""The server runs as a plain user on every backend: the identity the boundary matrix relies on.

A real server over stdio, started as the test user `continual-acp-test` (or as root), runs one real
cell on each kernel backend; the cell reports the uid and the effective capabilities it runs with.
"""

from __future__ import annotations

import pytest
from acp_helpers import initialize, new_session, prompt
from boundary_support import MATRIX, calc_project
from conftest import Boundary

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

PROBE = (
    "import os\n"
    "caps = [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff:')][0]\n"
    "print('UID=%d CAPEFF=%s' % (os.getuid(), caps))\n"
)


@pytest.mark.parametrize(("user", "backend"), MATRIX)
def test_a_cell_runs_as_the_user_who_started_the_server_on_every_backend(
    boundary: Boundary, model: ScriptedModelServer, user: str, backend: str
) -> None:
    place = boundary.area(user)
    repo = calc_project(place)
    model.push(tool_call(PROBE, title="who am I"), text("done"))
    client = boundary.spawn(place, backend, model.base_url)
    initialize(client)
    sid, _ = new_session(client, str(repo))
    stop, _ = prompt(client, sid, "who runs this cell?", timeout=120)
    assert stop == "end_turn"
    told = "\n".join(str(m.get("content")) for m in model.requests[-1]["messages"] if m.get("role") == "tool")
    uid = int(told.split("UID=")[1].split()[0])
    if user == "plain":
        assert uid == place.who.uid != 0, told
        assert "CAPEFF=0000000000000000" in told, told
    else:
        assert uid == 0, told
