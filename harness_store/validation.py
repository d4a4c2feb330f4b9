"""The edit validation rules, in order; the first failing rule wins.

Messages are part of the contract (tests and callers match them verbatim).
"""

from __future__ import annotations

import re

from harness_store.ids import slugify
from harness_store.models import ACTIONS, KINDS, Edit

BASE_PROMPT_ID = "base_system_prompt"


def resolve_id(edit: Edit) -> str | None:
    """The entry id an edit targets: given, or (for a create) derived from the title."""
    if edit.id is not None and edit.id.strip():
        return edit.id.strip()
    if edit.action == "create" and edit.title:
        return slugify(edit.title, edit.kind if edit.kind in KINDS else "entry")
    return None


def validate_edit(edit: Edit) -> str | None:
    """Return the refusal message of the first rule `edit` breaks, or None when it is well formed."""
    action, kind = edit.action, edit.kind
    if action not in ACTIONS:
        return f"unsupported action {action}"
    if kind not in KINDS:
        return f"unsupported kind {kind}"
    # Checked on the resolved id so a title that slugs to the base prompt cannot bypass the rule.
    # Checked on the id as given *or* as derived from the title, and on its slug form, so neither a
    # title like "Base System Prompt" nor an id like "Base-System-Prompt" bypasses the rule.
    if kind == "prompt":
        target = edit.id if edit.id and edit.id.strip() else (edit.title or "")
        if slugify(target, "") == BASE_PROMPT_ID:
            return "base system prompt is not editable"
    if action in ("update", "delete") and not (edit.id and edit.id.strip()):
        return f"{action} requires id"
    if action == "delete":
        return None
    if not (edit.title and edit.title.strip()) or not (edit.content and edit.content.strip()):
        return f"{action} requires title and content"
    if kind == "skill":
        return _validate_skill(edit)
    return None


def _validate_skill(edit: Edit) -> str | None:
    action = edit.action
    if edit.arguments is None:
        return f"{action} skill requires arguments"
    if edit.reference is None:
        return f"{action} skill requires python reference"
    if edit.reference.get("type") != "python":
        return f"{action} skill reference.type must be python"
    module = edit.reference.get("import")
    if not (isinstance(module, str) and module.strip()):
        return f"{action} skill requires python import"
    func = edit.reference.get("callable")
    if not (isinstance(func, str) and func.strip()):
        return f"{action} skill requires callable"
    return None


_NOT_ALNUM = re.compile(r"[\W_]+")


def letters(text: str) -> str:
    """The text's letters and digits only, lowercased: what is left once punctuation, symbols and
    whitespace are stripped (unicode-aware, so a lesson in any script counts)."""
    return _NOT_ALNUM.sub("", text.lower())


def empty_lesson(title: str | None, content: str | None) -> str | None:
    """Why a create/update would write a lesson that says nothing, or None.

    A content of only punctuation and whitespace ("...", "..., ") or one that only repeats its
    title teaches nothing, yet used to be stored and counted as a refinement. Refused for every
    writer and review policy; a rollback or review restoring an existing entry is not a new lesson.
    """
    body = letters(content or "")
    if not body:
        return "empty lesson: the content has nothing but punctuation and whitespace"
    if body == letters(title or ""):
        return "empty lesson: the content only repeats the title"
    return None
