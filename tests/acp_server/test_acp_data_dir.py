"""An unusable CONTINUAL_ACP_HOME: session/new says which dir, why, and what to do (no traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp_client import RpcError
from acp_helpers import ClientFactory, initialize, new_session

from agent_core.testing.scripted_model import ScriptedModelServer


@pytest.mark.parametrize("kind", ["under /proc", "a file"])
def test_session_new_names_an_unusable_data_dir_and_the_fix(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path, kind: str
) -> None:
    if kind == "a file":
        home = tmp_path / "home-is-a-file"
        home.write_text("not a directory")
    else:
        home = Path("/proc/continual-acp-nope")
    client = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
    initialize(client)
    with pytest.raises(RpcError) as caught:
        new_session(client, str(tmp_path))
    message = str(caught.value.message)
    assert "CONTINUAL_ACP_HOME" in message and str(home) in message and "writable directory" in message
    assert "FileNotFoundError" not in message and "FileExistsError" not in message
    client.close()
    assert "Traceback" not in client.stderr()
