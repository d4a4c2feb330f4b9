"""Rewind and fork in the editor: `/rewind [n] [--files]`, `/rewind list`, `_session/rewind`, `/fork [n]`.

agent_core does the rewind (agent_core/history/rewind.py); this module asks what must be asked: before a
file revert, the diff it would undo; after the rewind, whether the refinements made since that
point go too (listed, never rolled back without a yes). Both questions are
`session/request_permission` with a card showing what would change.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acp_server.protocol import frames

if TYPE_CHECKING:
    from acp_server.ports import CommandContext, ForkHost, OpenSession
    from agent_core import RefinementResult
    from agent_core.history.rewind import RewindPlan

JsonObject = dict[str, object]
DIFF_SHOWN = 20_000  # characters of a file diff put in the question's card


@dataclass
class RewindReport:
    """What one rewind did, for the command's reply and the method's answer."""

    rewound: bool
    turn: int = 0
    prompts: int = 0
    aside: str = ""
    kernel: dict[str, Any] = field(default_factory=dict)
    kernel_note: str = ""
    files: str = ""  # what happened to the workspace files ("" when not asked)
    refinements: list[str] = field(default_factory=list)  # offered for rollback
    rolled_back: list[str] = field(default_factory=list)
    refinement_note: str = ""

    def to_wire(self) -> JsonObject:
        return frames.rewind_response(
            self.rewound,
            self.turn,
            self.prompts,
            self.aside,
            self.kernel,
            self.kernel_note,
            self.files,
            self.refinements,
            self.rolled_back,
        )

    def text(self) -> str:
        if not self.rewound:
            return self.files or "Nothing rewound."
        lines = [
            f"Rewound {self.prompts} prompt(s): the conversation is back to before prompt {self.turn}. "
            f"The cut part is kept in {self.aside} (`/rewind list`)."
        ]
        if self.kernel:
            restored = ", ".join(self.kernel.get("restored", [])) or "none"
            removed = ", ".join(self.kernel.get("removed", [])) or "none"
            lines.append(f"Kernel variables restored: {restored}; removed (defined later): {removed}.")
            failed = self.kernel.get("failed") or {}
            if failed:
                lines.append("Not restored: " + "; ".join(f"{k} ({v})" for k, v in failed.items()) + ".")
            skipped = self.kernel.get("skipped") or {}
            if skipped:
                lines.append("Left as they are (never saved): " + ", ".join(skipped) + ".")
        if self.kernel_note:
            lines.append(self.kernel_note)
        if self.files:
            lines.append(self.files)
        if self.refinement_note:
            lines.append(self.refinement_note)
        return "\n".join(lines)


async def rewind(
    opened: OpenSession,
    *,
    turns: int | None = None,
    message_id: str | None = None,
    files: bool = False,
    rollback: bool | None = None,
) -> RewindReport:
    """Plan, ask, rewind. `rollback`: None asks the user about later refinements, True/False decides.

    Raises `agent_core.history.rewind.RewindError` when there is nothing to rewind to or a turn runs."""
    import anyio

    from agent_core.history.rewind import RewindError, files_diff, plan_rewind, revert_files
    from agent_core.history.rewind import rewind as do_rewind

    session = opened.session
    if session.busy:
        raise RewindError("a turn is running: cancel it first, then rewind")
    plan = plan_rewind(session, turns=turns, message_id=message_id)
    files_text = ""
    revert = False
    if files:
        diff = await anyio.to_thread.run_sync(files_diff, plan)
        if diff is None:
            files_text = "Files not reverted: the workspace was not a git repository at that point."
        elif not diff.strip():
            files_text = "Files: no tracked file changed since then."
        else:
            answer = await opened.editor.ask(
                _files_card(plan, diff), frames.permission_options(frames.REWIND_FILES_OPTIONS)
            )
            if answer != "revert":
                return RewindReport(False, files="Nothing rewound: the file revert was not accepted.")
            revert = True
    outcome = await do_rewind(session, plan)
    report = RewindReport(
        True,
        turn=plan.checkpoint.turn,
        prompts=plan.prompts,
        aside=str(outcome.aside),
        kernel=outcome.kernel,
        kernel_note=outcome.kernel_note,
        files=files_text,
    )
    if revert:
        try:
            report.files = await anyio.to_thread.run_sync(revert_files, plan)
        except RewindError as exc:
            report.files = f"Files not reverted: {exc}"
    await _offer_refinements(opened, plan, report, rollback)
    return report


async def _offer_refinements(
    opened: OpenSession, plan: RewindPlan, report: RewindReport, rollback: bool | None
) -> None:
    later = await refinements_since(opened, plan.since)
    if not later:
        return
    report.refinements = [r.id for r in later]
    if rollback is None:
        card = _refinements_card(later)
        answer = await opened.editor.ask(card, frames.permission_options(frames.REWIND_REFINEMENTS_OPTIONS))
        rollback = answer == "rollback"
    if not rollback:
        ids = ", ".join(report.refinements)
        report.refinement_note = f"Refinements made since then are kept ({ids}); `/rollback <id>` undoes one."
        return
    refused: list[str] = []
    for record in later:  # newest first: a later edit of the same entry goes before an earlier one
        outcome = await opened.harness.rollback(record.id)
        result = outcome.result
        if outcome.rolled_back_by is not None or (result is not None and result.applied):
            report.rolled_back.append(record.id)
        else:
            refused.append(
                f"{record.id} ({'; '.join(result.errors) if result is not None else 'not applied'})"
            )
    report.refinement_note = f"Rolled back: {', '.join(report.rolled_back) or 'none'}."
    if refused:
        report.refinement_note += " Not rolled back: " + "; ".join(refused) + "."


async def refinements_since(opened: OpenSession, since: str) -> list[RefinementResult]:
    """Applied refinements of this session (and its local harness) made after `since`, newest
    first, that are not rollbacks and were not rolled back already."""
    page = await opened.harness.history()
    records = list(page.records)
    undone = {r.rollback_of for r in records if r.rollback_of}
    session_id = opened.session.id
    return [
        r
        for r in records
        if r.created_at > since
        and r.applied
        and r.rollback_of is None
        and r.id not in undone
        and (r.session_id == session_id or r.scope == "local")
    ]


def _files_card(plan: RewindPlan, diff: str) -> JsonObject:
    shown = (
        diff
        if len(diff) <= DIFF_SHOWN
        else diff[:DIFF_SHOWN] + f"\n[... {len(diff) - DIFF_SHOWN} more characters ...]"
    )
    title = f"Rewind to before prompt {plan.checkpoint.turn} and revert these file changes?"
    content = [frames.tool_text(f"```diff\n{shown}\n```")]
    return frames.confirm_card(f"rewind-files-{uuid.uuid4().hex[:8]}", title, content, kind="edit")


def _refinements_card(records: list[RefinementResult]) -> JsonObject:
    lines = "\n".join(f"- `{r.id}` ({r.scope}): {r.summary or 'no summary'}" for r in records)
    title = f"Also roll back the {len(records)} refinement(s) made since that point?"
    content = [frames.tool_text(lines)]
    return frames.confirm_card(f"rewind-refinements-{uuid.uuid4().hex[:8]}", title, content)


# ---------------------------------------------------------------- the slash command


def _parse(argument: str) -> tuple[str, int | None, bool]:
    """`(action, n, files)`; raises ValueError with the usage."""
    words = argument.split()
    files = "--files" in words
    words = [w for w in words if w != "--files"]
    if words == ["list"]:
        return "list", None, False
    if not words:
        return "rewind", None, files
    if len(words) == 1 and words[0].isdigit() and int(words[0]) >= 1:
        return "rewind", int(words[0]), files
    raise ValueError(
        "Usage: `/rewind [n] [--files]` (back to before your n-th last prompt, default 1), or `/rewind list`."
    )


async def command(ctx: CommandContext, argument: str) -> None:
    from agent_core.history.rewind import RewindError, list_cut_parts

    try:
        action, turns, files = _parse(argument)
    except ValueError as exc:
        await ctx.reply(str(exc))
        return
    session = ctx.session
    if action == "list":
        parts = list_cut_parts(session.session_dir)
        entries = session.checkpoints.index.entries
        lines = [f"Prompts you can rewind to: {len(entries)} ({session.checkpoints.status_line()})."]
        if not parts:
            lines.append("No part of this session has been cut by a rewind yet.")
        for part in parts:
            prompts = "; ".join(part.prompts) or "(no prompt)"
            lines.append(f"- `{part.name}` ({part.size} bytes): {prompts}")
        await ctx.reply("\n".join(lines))
        return
    try:
        report = await rewind(ctx.opened, turns=turns, files=files)
    except RewindError as exc:
        await ctx.reply(f"Not rewound: {exc}.")
        return
    await ctx.reply(report.text())


async def fork_command(ctx: CommandContext, argument: str) -> None:
    """`/fork [n]`: a new session as this one is now, or as it was before your n-th last prompt."""
    from typing import cast

    from acp_server.protocol.errors import AcpError

    words = argument.split()
    if len(words) > 1 or (words and not (words[0].isdigit() and int(words[0]) >= 1)):
        await ctx.reply(
            "Usage: `/fork` (this session as it is now) or `/fork n` (as it was before your n-th last prompt)."
        )
        return
    turns = int(words[0]) if words else None
    host = cast("ForkHost", ctx.server)
    try:
        opened, note = await host.fork_into(ctx.opened, turns=turns)
    except AcpError as exc:
        await ctx.reply(f"Not forked: {exc.message.removeprefix('session/fork: ')}.")
        return
    when = "as it is now" if turns is None else f"as it was before your {turns}. last prompt"
    await ctx.reply(
        f"Forked this session {when} into `{opened.session.id}` ({note}). The two are independent from "
        "here on; open the fork from the session list (or `session/load` it)."
    )
