"""Crafted session ids are bad input on every method that takes one: -32602 or -32002 naming the id,
never an internal error, over real stdio against one shared server.

The methods are read from the server's own method table (with every extension installed, as the
console script does), so a method added later is swept too, or this test says it must be classified.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp_client import AcpClient, RpcError, server_env
from acp_helpers import initialize, new_session

INVALID_PARAMS = -32602
RESOURCE_NOT_FOUND = -32002
# Methods that take no session id (they make one, or come before any session).
NO_SESSION = {"initialize", "authenticate", "auth/login", "session/new", "session/list"}


def _table() -> Any:
    from acp_server.cli import EXTENSIONS
    from acp_server.protocol.registry import MethodRegistry
    from acp_server.sessions.methods import AcpServer

    table = MethodRegistry()
    server = AcpServer(table)
    for install in EXTENSIONS:
        install(server)
    return table


def _takes_session_id(spec: Any) -> bool:
    """Whether a method's params carry `sessionId`: its schema model says so, or (a method read by
    its own reader) reading its other params without one is refused naming `sessionId`."""
    import asyncio

    import acp.schema

    from acp_server.protocol.errors import AcpError
    from acp_server.protocol.registry import RequestContext

    model = spec.params_model
    if isinstance(model, str) or model is not None:
        names = [model] if isinstance(model, str) else [model({}), model({"type": "boolean"})]
        return all("session_id" in getattr(acp.schema, name).model_fields for name in names)
    ctx = RequestContext(connection=None, method=spec.name, request_id=1, is_notification=False)  # type: ignore[arg-type]

    async def probe() -> bool:
        try:
            await spec.call(ctx, dict(EXTRA.get(spec.name, {})))
        except AcpError as exc:
            return "sessionId" in exc.message
        except Exception:
            return False
        return False

    return asyncio.run(probe())


def _session_methods() -> list[str]:
    table = _table()
    methods = []
    for name in table.names():
        if not _takes_session_id(table.get(name)):
            assert name in NO_SESSION, f"{name}: classify it (does it take a sessionId?)"
            continue
        methods.append(name)
    return methods


# The other params each method needs to reach its session lookup (valid, so only the id is wrong).
EXTRA: dict[str, dict[str, object]] = {
    "session/prompt": {"prompt": [{"type": "text", "text": "hi"}]},
    "session/load": {"cwd": "/", "mcpServers": []},
    "session/resume": {"cwd": "/"},
    "session/fork": {"cwd": "/", "mcpServers": []},
    "session/set_mode": {"modeId": "ask"},
    "session/set_config_option": {"configId": "mode", "value": "ask"},
    "_harness/show": {"refinementId": "ref_1"},
    "_harness/rollback": {"refinementId": "ref_1"},
    "_harness/review": {"proposalId": "prop_1", "decision": "reject"},
    "_harness/why": {"entryId": "entry_1"},
    "_harness/await_quiescence": {"timeoutMs": 0},
    "_session/steer": {"prompt": [{"type": "text", "text": "hi"}]},
    "session/set_title": {"title": "a title"},
}
SESSION_METHODS = _session_methods()
CRAFTED = {
    "too_long": "s" * 300,
    "dot_dot": "..",
    "traversal": "../../etc",
    "absolute": "/etc/passwd",
    "nul": "sess\x00evil",
    "symlinked": "sess_symlinked",
    "file_not_dir": "sess_a_file",
}
# Ids whose directory is unsafe: refused as bad params (the others are unknown sessions).
UNSAFE = {"symlinked", "file_not_dir"}


ROOTS: dict[int, Path] = {}


def server_root(client: AcpClient) -> Path:
    return ROOTS[id(client)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AcpClient]:
    root = tmp_path_factory.mktemp("crafted-ids")
    home = root / "home"
    sessions = home / "sessions"
    sessions.mkdir(parents=True)
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "transcript.jsonl").write_text('{"type": "session"}\n')
    (sessions / "sess_symlinked").symlink_to(elsewhere, target_is_directory=True)
    (sessions / "sess_a_file").write_text("not a directory\n")
    client = AcpClient(server_env(home, None), cwd=str(root))
    ROOTS[id(client)] = root
    initialize(client)
    yield client
    client.close()
    assert not client.garbage and not client.violations, (client.garbage, client.violations)


def test_the_sweep_covers_the_session_methods_of_the_method_table() -> None:
    assert {"session/prompt", "session/load", "_harness/state", "session/set_mode"} <= set(SESSION_METHODS)
    assert set(EXTRA) - set(SESSION_METHODS) == set()


@pytest.mark.parametrize("crafted", sorted(CRAFTED))
@pytest.mark.parametrize("method", SESSION_METHODS)
def test_a_crafted_session_id_is_refused_naming_the_id_never_an_internal_error(
    server: AcpClient, method: str, crafted: str
) -> None:
    session_id = CRAFTED[crafted]
    params = {"sessionId": session_id, **EXTRA.get(method, {})}
    if method == "session/cancel":  # a notification: no answer; the server must keep serving
        server.notify(method, params)
        assert server.request("session/list", {})["sessions"] == []
        return
    if method == "session/delete" and crafted not in UNSAFE:  # deleting what does not exist: a no-op
        assert server.request(method, params) == {}
        return
    with pytest.raises(RpcError) as caught:
        server.request(method, params)
    error = caught.value
    assert error.code == (INVALID_PARAMS if crafted in UNSAFE else RESOURCE_NOT_FOUND), (method, error)
    # The id as the message shows it (at least its first 40 characters).
    assert repr(session_id[:40])[1:-1] in str(error.message), (method, error)


def test_the_server_still_serves_a_real_session_after_the_sweep(server: AcpClient, tmp_path: Path) -> None:
    session_id, _ = new_session(server, str(tmp_path))
    assert server.request("session/set_mode", {"sessionId": session_id, "modeId": "ask"}) == {}
    # Nothing the crafted ids pointed at was followed or removed.
    assert (server_root(server) / "elsewhere" / "transcript.jsonl").is_file()
    assert (server_root(server) / "home" / "sessions" / "sess_a_file").is_file()
