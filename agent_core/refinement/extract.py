"""Pull one JSON object out of a model reply, and say precisely why when that is impossible.

Models wrap JSON in prose, in a fenced block, or run out of output budget half-way through it. The
three failures need different fixes from the user (raise the budget, pick a better model, change the
prompt), so each has its own exception and message instead of one generic "could not parse".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

TRUNCATED_MESSAGE = "the model stopped before completing its JSON object; the output budget was exhausted"

ReplyProblem = Literal["truncated", "invalid_json", "no_json"]


class ReplyParseError(Exception):
    """A model reply that does not yield a JSON object; `problem` says which of three ways."""

    problem: ClassVar[ReplyProblem]

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TruncatedReply(ReplyParseError):
    problem = "truncated"

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(TRUNCATED_MESSAGE + (f" ({detail})" if detail else ""))


class InvalidJSONReply(ReplyParseError):
    problem = "invalid_json"


class NoJSONObjectReply(ReplyParseError):
    problem = "no_json"


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n(.*?)(```|\Z)", re.DOTALL)


@dataclass(frozen=True)
class _Scan:
    """Where the first balanced `{...}` starting at `start` ends (None = never closed)."""

    start: int
    end: int | None


def _scan_object(text: str, start: int) -> _Scan:
    depth = 0
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return _Scan(start, i + 1)
    return _Scan(start, None)


def _candidates(text: str) -> tuple[list[str], bool]:
    """Texts that might be the object, most specific first; and whether an object was left open."""
    found: list[str] = []
    left_open = False
    stripped = text.strip()
    if stripped.startswith("{"):
        found.append(stripped)
    for match in _FENCE.finditer(text):
        body = match.group(2).strip()
        if "{" not in body:
            continue
        if not match.group(3):  # the fence never closed: the reply was cut inside it
            left_open = True
        first = body.find("{")
        scan = _scan_object(body, first)
        if scan.end is None:
            left_open = True
            found.append(body[first:])
        else:
            found.append(body[first : scan.end])
    first = text.find("{")
    if first >= 0:
        scan = _scan_object(text, first)
        if scan.end is None:
            left_open = True
        else:
            found.append(text[first : scan.end])
        last = text.rfind("}")
        if last > first:
            found.append(text[first : last + 1])
    unique: list[str] = []
    for c in found:
        if c not in unique:
            unique.append(c)
    return unique, left_open


def extract_json_object(
    text: str, *, finish_reason: str | None = None, reasoning: str = ""
) -> dict[str, Any]:
    """The JSON object in `text` (bare, fenced, or between the outermost braces).

    Raises `TruncatedReply` when the reply was cut (finish_reason "length" or an object left open),
    `InvalidJSONReply` when an object is there but does not parse, `NoJSONObjectReply` otherwise.
    A reply with no content but with reasoning (some servers put the whole answer there) is
    searched in its reasoning text.
    """
    if not text.strip() and reasoning.strip():
        try:
            return extract_json_object(reasoning, finish_reason=finish_reason)
        except NoJSONObjectReply:
            if finish_reason == "length":
                raise TruncatedReply("the budget was spent on reasoning") from None
            raise NoJSONObjectReply(
                "the model replied with reasoning only and no JSON object in its answer"
            ) from None
    candidates, left_open = _candidates(text)
    first_error: str | None = None
    for candidate in candidates:
        try:
            # strict=False: a raw newline or tab inside a string (small models write them) is kept
            # as the character it is rather than failing the whole reply.
            value = json.loads(candidate, strict=False)
        except json.JSONDecodeError as exc:
            first_error = first_error or f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            continue
        if isinstance(value, dict):
            return value
        first_error = first_error or f"expected a JSON object, got {type(value).__name__}"
    if finish_reason == "length" or (left_open and finish_reason is None):
        raise TruncatedReply()
    if left_open:
        # The model said it was done, yet left an object open: malformed, not cut short.
        raise InvalidJSONReply("the model's reply is not valid JSON: an object is never closed")
    if first_error is not None:
        raise InvalidJSONReply(f"the model's reply is not valid JSON: {first_error}")
    if text.strip().startswith("["):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            pass
        else:
            raise InvalidJSONReply(f"expected a JSON object, got {type(value).__name__}")
    if not text.strip():
        raise NoJSONObjectReply("the model's reply was empty; expected a JSON object")
    raise NoJSONObjectReply("the model's reply contains no JSON object")
