"""Prompt parts (text, images, embedded resources, resource links) -> model message content.

Text parts pass through; images become `image_url` parts (data URLs) when the model accepts images,
else a note saying one was attached; embedded text resources are inlined with their URI; `file://`
links are read from disk (bounded); other schemes (`zed://`, `https://`, ...) are kept as references
so the model knows about them without the turn failing.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from agent_core.events import ImagePart, PromptPart, ResourceLinkPart, ResourcePart, TextPart
from agent_core.safetext import one_line

log = logging.getLogger(__name__)

IMAGE_NOT_SEEN = "[an image was attached; this model cannot see images]"
LINK_READ_LIMIT = 100_000  # characters read from a file:// link; the rest is noted, not sent
IMAGE_LINK_LIMIT = 20_000_000  # bytes: a bigger linked image is named, not sent


def _fenced(uri: str, body: str) -> str:
    fence = "```"
    while fence in body:
        fence += "`"
    return f'<resource uri="{uri}">\n{fence}\n{body}\n{fence}\n</resource>'


def _file_path(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return Path(unquote(parsed.path))


_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
SNIFF_BYTES = 8192


def _image_mime(declared: str | None, head: bytes) -> str | None:
    """The image type of a linked file: its declared mime type, else what its first bytes say."""
    if declared and declared.startswith("image/"):
        return declared
    for magic, mime in _IMAGE_MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _is_binary(head: bytes) -> bool:
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(head) - 4  # a multi-byte character cut at the sniff boundary is text
    return False


def _link_blocks(part: ResourceLinkPart, images: bool) -> list[dict[str, Any]]:
    """A linked file as model content: an image part for images, a note for other binary files."""
    from harness_store.safe_read import read_bytes, read_prefix  # harness_store: off the startup path

    path = _file_path(part.uri)
    if path is not None:
        try:
            # Regular files only, non-blocking (a FIFO in the workspace must not hang the prompt).
            head = read_prefix(path, SNIFF_BYTES, follow=True)
            size = path.stat().st_size
        except (OSError, ValueError):
            return [{"type": "text", "text": _link_text(part)}]  # says why it could not be read
        mime = _image_mime(part.mime_type, head)
        tag = f'<resource-link uri="{part.uri}" name="{part.name}"/>'
        if mime is not None and images and size <= IMAGE_LINK_LIMIT:
            try:
                raw = read_bytes(path, limit=IMAGE_LINK_LIMIT, follow=True)
            except OSError:
                return [{"type": "text", "text": _link_text(part)}]
            data = base64.b64encode(raw).decode("ascii")
            return [
                {"type": "text", "text": f"{tag} (image, {mime}, {size} bytes):"},
                {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}},
            ]
        if mime is not None:
            why = "this model cannot see images" if not images else f"over {IMAGE_LINK_LIMIT} bytes"
            return [{"type": "text", "text": f"{tag} (image, {mime}, {size} bytes; not attached: {why})"}]
        if _is_binary(head):
            return [{"type": "text", "text": f"{tag} (binary file, not inlined ({size} bytes))"}]
    return [{"type": "text", "text": _link_text(part)}]


def _link_text(part: ResourceLinkPart) -> str:
    path = _file_path(part.uri)
    if path is None:
        return f'<resource-link uri="{part.uri}" name="{part.name}"/> (a reference; not readable from here)'
    from harness_store.safe_read import read_prefix  # harness_store: off the startup path

    try:
        # At most 4 bytes a character: enough bytes for LINK_READ_LIMIT + 1 characters.
        body = read_prefix(path, 4 * (LINK_READ_LIMIT + 1), follow=True).decode("utf-8", errors="replace")
        body = body[: LINK_READ_LIMIT + 1]
    except (OSError, ValueError) as exc:
        return f'<resource-link uri="{part.uri}" name="{part.name}"/> (could not be read: {exc})'
    if len(body) > LINK_READ_LIMIT:
        body = (
            body[:LINK_READ_LIMIT]
            + f"\n[... cut at {LINK_READ_LIMIT} characters; read the rest with a cell ...]"
        )
    return _fenced(part.uri, body)


def _resource_text(part: ResourcePart) -> str:
    if part.text is not None:
        return _fenced(part.uri, part.text)
    size = len(part.blob or "") * 3 // 4
    return f'<resource uri="{part.uri}" mime="{part.mime_type or "application/octet-stream"}"/> (binary, ~{size} bytes, not inlined)'


def to_model_content(parts: Sequence[PromptPart], *, images: bool = True) -> str | list[dict[str, Any]]:
    """The user message content for Chat Completions: a string when it is text only."""
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            if images:
                url = f"data:{part.mime_type};base64,{part.data}"
                blocks.append({"type": "image_url", "image_url": {"url": url}})
            else:
                blocks.append(
                    {
                        "type": "text",
                        "text": f"[an image ({part.mime_type}) was attached; this model cannot see images]",
                    }
                )
        elif isinstance(part, ResourcePart):
            blocks.append({"type": "text", "text": _resource_text(part)})
        elif isinstance(part, ResourceLinkPart):
            blocks.extend(_link_blocks(part, images))
    if all(b["type"] == "text" for b in blocks):
        return "\n\n".join(b["text"] for b in blocks)
    return blocks


def plain_text(parts: Sequence[PromptPart]) -> str:
    """The words of a prompt (for titles and the harness overview's relevance query)."""
    words: list[str] = []
    for part in parts:
        if isinstance(part, TextPart):
            words.append(part.text)
        elif isinstance(part, ResourceLinkPart):
            words.append(part.name)
        elif isinstance(part, ResourcePart):
            words.append(Path(urlparse(part.uri).path).name)
    return " ".join(w.strip() for w in words if w.strip())


def title_from(parts: Sequence[PromptPart], limit: int = 60) -> str:
    """A session title from the first prompt: its first line, whitespace-collapsed and bounded."""
    text = plain_text(parts)
    first = next((line for line in text.splitlines() if line.strip()), "")
    title = one_line(first)
    if len(title) > limit:
        title = title[: limit - 1].rstrip() + "…"
    return title or "Untitled session"
