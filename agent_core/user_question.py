"""`editor.ask(question, choices=...)` from a cell: a question to the user, as an elicitation form.

The answer is a small record the cell can branch on: `status` is `answered` (with `answer`),
`declined` (the user said no), `cancelled` (dismissed, or the prompt was cancelled), `timeout`
(nobody answered within `timeout` seconds) or `unsupported` (the client did not advertise
`elicitation.form`; nothing was shown). The question never blocks a turn forever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agent_core.ports import EditorPort

if TYPE_CHECKING:
    from kernel_bridge import HostBridge

__all__ = ["DEFAULT_TIMEOUT", "MAX_TIMEOUT", "FormEditor", "UserQuestions", "question_form"]

DEFAULT_TIMEOUT = 300.0
MAX_TIMEOUT = 3600.0
MAX_QUESTION_CHARS = 4_000
MAX_CHOICES = 50


@runtime_checkable
class FormEditor(Protocol):
    """An editor that can show an elicitation form (the ACP editor when the client has forms)."""

    @property
    def can_elicit_forms(self) -> bool: ...

    async def elicit_form(
        self, message: str, schema: Mapping[str, object], *, tool_call_id: str | None = None
    ) -> tuple[str, dict[str, object]] | None: ...


class QuestionHost(Protocol):
    @property
    def editor(self) -> EditorPort: ...


def question_form(choices: Sequence[str] | None) -> dict[str, object]:
    """The form's schema: one string field, a choice among `choices` when given."""
    answer: dict[str, object] = {"type": "string", "title": "Your answer"}
    if choices:
        answer["oneOf"] = [{"const": c, "title": c} for c in choices]
    return {"type": "object", "properties": {"answer": answer}, "required": ["answer"]}


def _arguments(args: dict[str, Any]) -> tuple[str, list[str] | None, float]:
    question = args.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError("editor.ask: `question` must be a non-empty string")
    if len(question) > MAX_QUESTION_CHARS:
        raise ValueError(f"editor.ask: `question` is longer than {MAX_QUESTION_CHARS} characters")
    raw = args.get("choices")
    choices: list[str] | None = None
    if raw is not None:
        if not isinstance(raw, list) or not raw or not all(isinstance(c, str) and c for c in raw):
            raise ValueError("editor.ask: `choices` must be a non-empty list of non-empty strings")
        if len(raw) > MAX_CHOICES:
            raise ValueError(f"editor.ask: at most {MAX_CHOICES} choices")
        choices = list(dict.fromkeys(raw))
    timeout = args.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_TIMEOUT:
        raise ValueError(f"editor.ask: `timeout` must be a number of seconds in (0, {MAX_TIMEOUT:g}]")
    return question.strip(), choices, float(timeout)


class UserQuestions:
    """The `editor.ask` host operation of one session."""

    def __init__(self, session: QuestionHost) -> None:
        self._session = session

    def register(self, host_bridge: HostBridge) -> None:
        host_bridge.register("editor.ask", self.ask)

    async def ask(self, args: dict[str, Any]) -> dict[str, object]:
        question, choices, timeout = _arguments(args)
        editor = self._session.editor
        if not isinstance(editor, FormEditor) or not editor.can_elicit_forms:
            return {"status": "unsupported", "answer": None}
        try:
            answer = await asyncio.wait_for(editor.elicit_form(question, question_form(choices)), timeout)
        except TimeoutError:
            return {"status": "timeout", "answer": None}
        if answer is None:
            return {"status": "cancelled", "answer": None}
        action, content = answer
        if action == "decline":
            return {"status": "declined", "answer": None}
        if action != "accept":
            return {"status": "cancelled", "answer": None}
        value = content.get("answer")
        if not isinstance(value, str) or (choices is not None and value not in choices):
            return {"status": "cancelled", "answer": None}
        return {"status": "answered", "answer": value}
