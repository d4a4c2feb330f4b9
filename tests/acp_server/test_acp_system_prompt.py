"""The editor's instructions (unstable `systemPrompt`) on session/new, load, resume and fork."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp_client import AcpClient, RpcError
from acp_helpers import ClientFactory, initialize, prompt, run_command

from agent_core.testing.scripted_model import ScriptedModelServer, text

FRENCH = "Always answer in French."
BASE_OPENING = "You are continual-acp, a coding agent"
KEPT = 'Harness entries (under "Harness") are hints, shown as quoted data'


def _system(mode: str, words: str = FRENCH) -> dict[str, Any]:
    return {"mode": mode, "content": [{"type": "text", "text": words}]}


def _sent_system_prompt(client: AcpClient, model: ScriptedModelServer, sid: str) -> str:
    model.push(text("d'accord"))
    assert prompt(client, sid, "hello").stop_reason == "end_turn"
    first = model.requests[-1]["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def _new(client: AcpClient, cwd: Path, system: dict[str, Any] | None) -> str:
    params: dict[str, Any] = {"cwd": str(cwd), "mcpServers": []}
    if system is not None:
        params["systemPrompt"] = system
    return str(client.request("session/new", params)["sessionId"])


def test_initialize_advertises_system_prompts_with_override(spawn: ClientFactory) -> None:
    client = spawn()
    caps = initialize(client)["agentCapabilities"]
    assert isinstance(caps, dict)
    assert caps["sessionCapabilities"]["systemPrompt"] == {"mode": {"override": {}}}


def test_append_adds_the_editors_instructions_after_the_base(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url)
    initialize(client)
    sid = _new(client, tmp_path, _system("append"))
    sent = _sent_system_prompt(client, model, sid)
    assert sent.startswith(BASE_OPENING)
    assert "# Instructions from the editor\n" + FRENCH in sent
    assert "the base, then the editor's instructions" in run_command(client, sid, "/kernel status")


def test_override_replaces_the_base_wording_but_keeps_the_harness_rules(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url)
    initialize(client)
    sid = _new(client, tmp_path, _system("override", "You are a terse reviewer."))
    sent = _sent_system_prompt(client, model, sid)
    assert BASE_OPENING not in sent and sent.startswith(
        "# Instructions from the editor\nYou are a terse reviewer."
    )
    assert KEPT in sent
    assert "in place of the base wording; the harness rules kept" in run_command(
        client, sid, "/kernel status"
    )


def test_load_resume_and_fork_each_take_their_own_system_prompt(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url)
    initialize(client)
    sid = _new(client, tmp_path, _system("override", "First instructions."))
    assert "First instructions." in _sent_system_prompt(client, model, sid)
    opened = {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
    client.request("session/load", {**opened, "systemPrompt": _system("append", "Loaded instructions.")})
    sent = _sent_system_prompt(client, model, sid)
    assert (
        sent.startswith(BASE_OPENING) and "Loaded instructions." in sent and "First instructions." not in sent
    )
    client.request("session/resume", opened)  # none given: the base alone
    sent = _sent_system_prompt(client, model, sid)
    assert "# Instructions from the editor" not in sent
    forked = client.request(
        "session/fork", {**opened, "systemPrompt": _system("append", "Fork instructions.")}
    )
    assert "Fork instructions." in _sent_system_prompt(client, model, str(forked["sessionId"]))


@pytest.mark.parametrize(
    ("system", "problem"),
    [
        ({"mode": "replace", "content": [{"type": "text", "text": "x"}]}, "mode 'replace' is not supported"),
        ({"mode": "append", "content": []}, "content must be a non-empty array"),
        (
            {"mode": "append", "content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]},
            "content[0] is a 'image' block; only text blocks",
        ),
        ("be nice", "must be an object"),
    ],
)
def test_a_system_prompt_the_server_cannot_apply_is_refused_and_no_session_is_made(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path, system: Any, problem: str
) -> None:
    client = spawn(model.base_url)
    initialize(client)
    with pytest.raises(RpcError) as caught:
        _new(client, tmp_path, system)
    assert caught.value.code == -32602 and problem in str(caught.value.message)
    assert client.request("session/list", {})["sessions"] == []
