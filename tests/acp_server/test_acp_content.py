"""Rich content: images from cells, file edits through the client's fs, prompt resources."""

from __future__ import annotations

from pathlib import Path

from acp_helpers import ClientFactory, final_card, initialize, new_session, prompt

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

# A 1x1 PNG.
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def test_an_image_displayed_by_a_cell_becomes_an_image_block(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    code = (
        "import base64\nfrom IPython.display import Image, display\n"
        f"display(Image(data=base64.b64decode('{PNG_B64}')))"
    )
    model.push(tool_call(code, title="Show a dot"), text("there it is"))
    client = spawn(model.base_url)
    initialize(client)
    sid, _ = new_session(client, str(tmp_path))
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
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    target = tmp_path / "disk.txt"
    model.push(tool_call(f"editor.write({str(target)!r}, 'on disk\\n')"), text("written"))
    client = spawn(model.base_url)
    initialize(client)
    sid, _ = new_session(client, str(tmp_path))
    assert prompt(client, sid, "edit")[0] == "end_turn"
    assert target.read_text() == "on disk\n"
    assert not [r for r in client.agent_requests if r["method"].startswith("fs/")]
    _, updates = final_card(client, sid)
    assert any(b.get("type") == "diff" and b["newText"] == "on disk\n" for b in updates[-1]["content"])


def test_prompt_accepts_embedded_resources_links_and_images(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(text("read them"))
    client = spawn(model.base_url)
    initialize(client)
    sid, _ = new_session(client, str(tmp_path))
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
    assert "EMBEDDED_MARKER" in str(model.requests[-1]["messages"])
