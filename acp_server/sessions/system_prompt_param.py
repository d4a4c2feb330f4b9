"""The unstable `systemPrompt` param of session/new, load, resume and fork: the editor's instructions.

Advertised as `sessionCapabilities.systemPrompt: {mode: {override: {}}}`. As the schema requires, a
mode this server does not support, an empty content array or a block that is not text is an error
(-32602) and no session is created, loaded, resumed or forked; omitted or null means the base alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from acp_server.protocol.errors import AcpError
from agent_core.turn.system_prompt import ClientSystemPrompt

__all__ = ["MAX_SYSTEM_PROMPT_CHARS", "read_system_prompt"]

MAX_SYSTEM_PROMPT_CHARS = 100_000
_MODES = ("append", "override")


def _refuse(method: str, problem: str) -> AcpError:
    return AcpError.invalid_params(f"Invalid params for {method}: systemPrompt: {problem}")


def read_system_prompt(params: object, method: str) -> ClientSystemPrompt | None:
    """The request's `systemPrompt`, checked; None when it has none."""
    raw = params.get("systemPrompt") if isinstance(params, Mapping) else None
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise _refuse(method, "must be an object {mode, content}")
    mode = raw.get("mode")
    if mode not in _MODES:
        raise _refuse(method, f"mode {mode!r} is not supported (append, override)")
    content = raw.get("content")
    if not isinstance(content, list) or not content:
        raise _refuse(method, "content must be a non-empty array of text blocks")
    texts: list[str] = []
    for index, block in enumerate(content):
        if (
            not isinstance(block, Mapping)
            or block.get("type") != "text"
            or not isinstance(block.get("text"), str)
        ):
            kind = block.get("type") if isinstance(block, Mapping) else type(block).__name__
            raise _refuse(method, f"content[{index}] is a {kind!r} block; only text blocks are supported")
        texts.append(str(block["text"]))
    text = "\n\n".join(texts).strip()
    if not text:
        raise _refuse(method, "content has no text")
    if len(text) > MAX_SYSTEM_PROMPT_CHARS:
        raise _refuse(method, f"content is longer than {MAX_SYSTEM_PROMPT_CHARS} characters")
    return ClientSystemPrompt(str(mode), text)
