"""What some real clients do with cards, and how a card is shaped so it still reads well there.

CodeCompanion.nvim titles a tool card by the path of its first `diff` content (or of its first
location) - `Edit: <path>` - and cuts any other title at its first colon ("Refine harness: x" shows
as "Refine harness"). A refinement card's diffs are of files in the data dir (`harness/view/...`),
so that title says nothing. For such clients (known by `clientInfo.name`) the refinement card and
the review card of a pending proposal keep their words (`path_free_card`): no colon in the title,
the diffs as unified-diff text, and the title repeated as the first block (CodeCompanion's
`verbose_output` shows a completed edit card's content, not its title).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

from acp_server.protocol import frames
from acp_server.protocol.frames import Frame

# `clientInfo.name`s (lower-cased substrings) of clients that title edit cards by the diff's path.
PATH_TITLED_EDIT_CLIENTS = ("codecompanion",)


def titles_edit_cards_by_path(client_name: str) -> bool:
    """Whether the client named `client_name` titles a card by its diff path (CodeCompanion)."""
    name = client_name.lower()
    return any(known in name for known in PATH_TITLED_EDIT_CLIENTS)


def colon_free(title: str) -> str:
    """The title with its first `": "` as `" - "` (so a client that cuts at the colon keeps it all)."""
    return title.replace(": ", " - ", 1)


def diff_text(path: str, old_text: str | None, new_text: str) -> Frame:
    """A file change as a unified diff in a ```diff block (text content, no `diff` path to title by)."""
    lines = difflib.unified_diff(
        (old_text or "").splitlines(keepends=True),
        new_text.splitlines(keepends=True),
        fromfile=path if old_text is not None else "/dev/null",
        tofile=path,
    )
    body = "".join(line if line.endswith("\n") else line + "\n" for line in lines).rstrip("\n")
    return frames.tool_text(f"```diff\n{body or f'(no change to {path})'}\n```")


def diff_block_as_text(block: Mapping[str, object]) -> Frame:
    """A `diff` content block as `diff_text`; any other block unchanged."""
    if block.get("type") != "diff":
        return dict(block)
    path, old, new = block.get("path"), block.get("oldText"), block.get("newText")
    return diff_text(str(path), old if isinstance(old, str) else None, new if isinstance(new, str) else "")


def path_free_card(title: str, content: Sequence[Mapping[str, object]]) -> tuple[str, list[Frame]]:
    """`(title, content)` of an edit card for a client that titles edit cards by diff path: the
    title without its colon, repeated as the first block, and every diff as text."""
    kept = colon_free(title)
    return kept, [frames.tool_text(kept), *(diff_block_as_text(block) for block in content)]
