"""`resource_link`s to binary files: images reach the model as image parts, other binaries as a note."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from acp_helpers import ClientFactory, initialize, new_session

from agent_core.testing.scripted_model import ScriptedModelServer, text

# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def user_content(model: ScriptedModelServer) -> list[dict[str, Any]]:
    content = model.requests[-1]["messages"][-1]["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def send_links(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path, *links: dict[str, Any]
) -> list[dict[str, Any]]:
    model.push(text("seen"))
    client = spawn(model.base_url)
    initialize(client)
    sid, _ = new_session(client, str(tmp_path))
    blocks = [{"type": "text", "text": "look"}, *links]
    assert client.request("session/prompt", {"sessionId": sid, "prompt": blocks})["stopReason"] == "end_turn"
    return user_content(model)


def test_a_linked_png_reaches_the_model_as_an_image_part_even_without_a_mime_type(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    (tmp_path / "dot.png").write_bytes(PNG)
    content = send_links(
        spawn,
        model,
        tmp_path,
        {"type": "resource_link", "uri": (tmp_path / "dot.png").as_uri(), "name": "dot.png"},
    )
    images = [b for b in content if b["type"] == "image_url"]
    assert images and images[0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert base64.b64decode(images[0]["image_url"]["url"].split(",", 1)[1]) == PNG
    assert "\ufffd" not in str(content)


def test_a_linked_binary_file_is_named_with_its_size_not_inlined(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    blob = bytes(range(256)) * 4
    (tmp_path / "data.bin").write_bytes(blob)
    content = send_links(
        spawn,
        model,
        tmp_path,
        {"type": "resource_link", "uri": (tmp_path / "data.bin").as_uri(), "name": "data.bin"},
    )
    shown = str(content)
    assert f"binary file, not inlined ({len(blob)} bytes)" in shown
    assert "\ufffd" not in shown and "image_url" not in shown
