"""Rich content: images from cells, file edits through the client's fs, prompt resources.

The tests share one server (`served`: each its own folder and session, closed at its end, and reads
only what arrived since it began); the client-fs test, whose client advertises fs at initialize,
starts its own (`spawn`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from acp_client import RpcError
from acp_helpers import ClientFactory, final_card, initialize, new_session, prompt
from shared_server import Here, SharedServers, shared_servers

from agent_core.testing.scripted_model import (
    ScriptedModelServer,
    error,
    length_cut,
    reasoning,
    refusal,
    text,
    tool_call,
    usage,
)

Serve = Callable[..., Here]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServers]:
    with shared_servers(tmp_path_factory) as made:
        yield made


@pytest.fixture
def served(servers: SharedServers, tmp_path: Path) -> Iterator[Serve]:
    """A session on the module's server, in the test's own folder."""
    with servers.test(tmp_path) as open_session:
        yield open_session


# A 1x1 PNG.
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def test_an_image_displayed_by_a_cell_becomes_an_image_block(served: Serve, tmp_path: Path) -> None:
    code = (
        "import base64\nfrom IPython.display import Image, display\n"
        f"display(Image(data=base64.b64decode('{PNG_B64}')))"
    )
    here = served()
    client, sid, model = here.client, here.sid, here.model
    model.push(tool_call(code, title="Show a dot"), text("there it is"))
    assert prompt(client, sid, "draw")[0] == "end_turn"
    _, updates = final_card(client, sid)
    images = [
        b["content"]
        for b in updates[-1]["content"]
        if b.get("type") == "content" and b["content"]["type"] == "image"
    ]
    assert images and images[0]["mimeType"] == "image/png"


def test_editor_write_goes_through_client_fs_with_a_diff_and_location(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    target = str(tmp_path / "notes.txt")
    model.push(tool_call(f"editor.write({target!r}, 'new text\\n')", title="Write notes"), text("written"))
    client = spawn(model.base_url)
    initialize(client, fs={"readTextFile": True, "writeTextFile": True})
    client.files[target] = "old text\n"
    sid, _ = new_session(client, str(tmp_path))
    assert prompt(client, sid, "edit the notes")[0] == "end_turn"
    assert client.files[target] == "new text\n"
    assert not Path(target).exists(), "with client fs the server must not write the disk itself"
    _, updates = final_card(client, sid)
    diffs = [b for b in updates[-1]["content"] if b.get("type") == "diff"]
    assert diffs == [{"type": "diff", "path": target, "oldText": "old text\n", "newText": "new text\n"}]
    assert updates[-1]["locations"] == [{"path": target}]
    methods = [r["method"] for r in client.agent_requests]
    assert "fs/write_text_file" in methods and "fs/read_text_file" in methods


def test_without_client_fs_the_edit_lands_on_disk_and_still_shows_a_diff(
    served: Serve, tmp_path: Path
) -> None:
    target = tmp_path / "disk.txt"
    here = served()
    client, sid, model = here.client, here.sid, here.model
    model.push(tool_call(f"editor.write({str(target)!r}, 'on disk\\n')"), text("written"))
    assert prompt(client, sid, "edit")[0] == "end_turn"
    assert target.read_text() == "on disk\n"
    assert not [r for r in here.agent_requests() if r["method"].startswith("fs/")]
    _, updates = final_card(client, sid)
    assert any(b.get("type") == "diff" and b["newText"] == "on disk\n" for b in updates[-1]["content"])


def test_prompt_accepts_embedded_resources_links_and_images(served: Serve, tmp_path: Path) -> None:
    here = served()
    client, sid, model = here.client, here.sid, here.model
    model.push(text("read them"))
    blocks = [
        {"type": "text", "text": "look at these"},
        {
            "type": "resource",
            "resource": {
                "uri": "file:///tmp/a.py",
                "text": "EMBEDDED_MARKER = 1",
                "mimeType": "text/x-python",
            },
        },
        {"type": "resource_link", "uri": "https://example.com/spec", "name": "spec"},
        {"type": "image", "data": PNG_B64, "mimeType": "image/png"},
    ]
    result = client.request("session/prompt", {"sessionId": sid, "prompt": blocks})
    assert result["stopReason"] == "end_turn"
    assert "EMBEDDED_MARKER" in str(here.requests()[-1]["messages"])


def test_large_output_is_coalesced_and_the_card_stays_bounded(served: Serve, tmp_path: Path) -> None:
    # ~2 MB in 1,000 separate flushed writes: the card must get neither 1,000 updates nor 2 MB.
    # (Kept under ipykernel's 1,000-message iopub high-water mark: a bigger flood can drop the
    # kernel's idle message and stall the cell -- a kernel_bridge issue, reported, not tested here.)
    code = "for i in range(1000):\n    print(f'line {i:05d} ' + 'x' * 2000, flush=True)\nprint('THE END')"
    here = served()
    client, sid, model = here.client, here.sid, here.model
    model.push(tool_call(code, title="Print a lot"), text("printed"))
    assert prompt(client, sid, "print a lot", timeout=120)[0] == "end_turn"
    _, updates = final_card(client, sid)
    assert len(updates) < 500, f"{len(updates)} updates: output was not coalesced"
    shown = "".join(b["content"]["text"] for b in updates[-1]["content"] if b.get("type") == "content")
    assert len(shown) < 100_000
    assert "characters omitted" in shown
    assert "line 00000" in shown and "THE END" in shown


def test_reasoning_usage_and_title_become_their_updates(served: Serve, tmp_path: Path) -> None:
    here = served()
    client, sid, model = here.client, here.sid, here.model
    model.push(reasoning("let me think", then="Forty-two.", usage=usage(120, 8)))
    assert prompt(client, sid, "meaning of life?")[0] == "end_turn"
    kinds = {u["sessionUpdate"]: u for u in client.updates(sid)}
    assert kinds["agent_thought_chunk"]["content"]["text"] == "let me think"
    assert kinds["agent_message_chunk"]["content"]["text"] == "Forty-two."
    assert kinds["usage_update"]["used"] > 0 and kinds["usage_update"]["size"] > 0
    assert "meaning of life" in kinds["session_info_update"]["title"]


def test_a_failing_model_endpoint_answers_the_prompt_with_an_actionable_error(
    served: Serve, tmp_path: Path
) -> None:
    here = served()
    client, sid, model = here.client, here.sid, here.model
    model.push(error(400, "no such model"))
    with pytest.raises(RpcError) as info:
        prompt(client, sid, "hello")
    assert info.value.code == -32603
    assert "127.0.0.1" in str(info.value.message)


@pytest.mark.parametrize(
    ("reply", "stop_reason"),
    [(length_cut("cut sh", tool_code="print('never run')"), "max_tokens"), (refusal("no"), "refusal")],
)
def test_truncation_and_refusal_answer_their_stop_reasons(
    served: Serve,
    tmp_path: Path,
    reply: dict[str, object],
    stop_reason: str,
) -> None:
    here = served()
    client, sid, model = here.client, here.sid, here.model
    model.push(reply)
    assert prompt(client, sid, "go")[0] == stop_reason
    assert not [u for u in client.updates(sid) if u["sessionUpdate"] == "tool_call"], (
        "a cut tool call must not run"
    )
