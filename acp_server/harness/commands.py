"""The harness slash commands: `/history`, `/harness`, `/rollback`, `/undo`, `/refine`, `/review`.

Each asks the session's `HarnessSurface` and answers as readable text; the changes go through the
coordinator, so they are shown as refinement cards and counted in quiescence.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from acp_server.harness.review import ask_pending_reviews, ask_review

if TYPE_CHECKING:
    from acp_server.context import CommandContext
    from agent_core.refinement.records import Scope
    from agent_core.refinement.surface import HarnessEntry, RefinementResult

# `/harness <kind>`: the store's kinds, their plurals and the words the overview headings use.
HARNESS_KINDS = {
    "prompt": "prompt",
    "prompts": "prompt",
    "note": "prompt",
    "notes": "prompt",
    "memory": "memory",
    "memories": "memory",
    "skill": "skill",
    "skills": "skill",
    "subagent": "subagent",
    "subagents": "subagent",
}
MAX_HISTORY = 200


def _words(argument: str) -> list[str]:
    try:
        return shlex.split(argument)
    except ValueError:
        return argument.split()


def describe(record: RefinementResult) -> str:
    """One `/history` line."""
    status = "applied" if record.applied else "refused"
    extra = f", rollback of {record.rollback_of}" if record.rollback_of else ""
    when = record.created_at[:19].replace("T", " ")
    summary = record.summary or "(no summary)"
    return f"- `{record.id}` {when} [{record.scope}, {record.trigger}, {status}{extra}] {summary}"


async def history(ctx: CommandContext, argument: str) -> None:
    try:
        limit = int(argument) if argument else 10
    except ValueError:
        limit = 0
    if limit < 1:
        await ctx.reply(
            f"/history takes a positive number of entries, not {argument!r}. Usage: `/history [N]`, e.g. `/history 5`"
        )
        return
    page = await ctx.harness.history(min(limit, MAX_HISTORY))
    if not page.records:
        await ctx.reply(
            "No harness refinements yet. The agent refines its harness as you work; `/refine` asks for one."
        )
        return
    noun = "refinement" if len(page.records) == 1 else "refinements"
    lines = [f"Last {len(page.records)} harness {noun} (newest first):", ""]
    lines += [describe(record) for record in page.records]
    lines += ["", "Roll one back with `/rollback <id>`, or the latest with `/undo`."]
    await ctx.reply("\n".join(lines))


async def harness(ctx: CommandContext, argument: str) -> None:
    from agent_core.refinement.surface import HarnessState, render_overview

    query = " ".join(argument.split())
    if not query:
        text = render_overview(await ctx.harness.state("merged"))
        await ctx.reply(text.strip() or "The harness is empty: no notes, memories, skills or subagents yet.")
        return
    kind = HARNESS_KINDS.get(query.lower())
    if kind is not None:
        state = await ctx.harness.state("merged")
        shown = HarnessState.build({kind: dict(state.entries.get(kind, {}))}, list(state.tombstones))
        what = f"no {kind} entries"
    else:
        # The same search as the kernel's `harness.search()`: entries sharing words with the query.
        entries: dict[str, dict[str, HarnessEntry]] = {}
        for hit in await ctx.harness.search(query):
            entries.setdefault(hit.entry.kind, {})[hit.key] = hit.entry
        shown = HarnessState.build(entries)
        what = f"no entry matching {query!r}"
    text = render_overview(shown).strip()
    if not text:
        kinds = ", ".join(sorted(set(HARNESS_KINDS.values())))
        await ctx.reply(
            f"The harness has {what}. `/harness` shows everything; `/harness <kind>` filters by "
            f"kind ({kinds}); any other text searches titles and contents."
        )
        return
    await ctx.reply(text)


async def _rollback(ctx: CommandContext, refinement_id: str, force: bool) -> None:
    from agent_core.refinement.surface import RefinementNotFound

    try:
        outcome = await ctx.harness.rollback(refinement_id, force=force)
    except RefinementNotFound:
        await ctx.reply(
            f"No refinement {refinement_id!r} in this session's or the global harness. See `/history`."
        )
        return
    if outcome.rolled_back_by is not None:
        await ctx.reply(f"Refinement {refinement_id} was already rolled back by {outcome.rolled_back_by}.")
        return
    result = outcome.result
    assert result is not None
    errors = result.errors
    if outcome.refused:
        hint = "" if force else " Add `--force` to override."
        await ctx.reply(
            f"Rollback of {refinement_id} was refused:\n" + "\n".join(f"- {e}" for e in errors) + hint
        )
        return
    text = f"Rolled back {refinement_id}: new refinement {result.id} ({result.scope})."
    if errors:
        text += "\nSome edits were not rolled back:\n" + "\n".join(f"- {e}" for e in errors)
    await ctx.reply(text)


async def rollback(ctx: CommandContext, argument: str) -> None:
    words = _words(argument)
    force = "--force" in words
    ids = [w for w in words if w != "--force"]
    if len(ids) != 1:
        await ctx.reply("Usage: `/rollback <refinement-id> [--force]` (ids are listed by `/history`).")
        return
    await _rollback(ctx, ids[0], force)


async def undo(ctx: CommandContext, argument: str) -> None:
    if argument:
        await ctx.reply(
            f"/undo takes no argument (got {argument!r}). Usage: `/undo` rolls back the latest "
            "refinement; `/rollback <id>` rolls back a given one."
        )
        return
    latest = await ctx.harness.latest_undoable()
    if latest is None:
        await ctx.reply("Nothing to undo: no applied harness refinement that is not already rolled back.")
        return
    await _rollback(ctx, latest.id, force=False)


async def refine(ctx: CommandContext, argument: str) -> None:
    words = _words(argument)
    scope: Scope = "global" if "--global" in words else "local"
    instructions = " ".join(w for w in words if w != "--global") or None
    outcome = await ctx.harness.refine_now(instructions=instructions, scope=scope)
    if outcome.status == "pending_review":
        pending = ctx.harness.pending_review(outcome.proposal_id or "")
        if pending is not None:
            decided = await ask_review(ctx.opened, pending)
            if decided is None:
                await ctx.reply(f"The proposal `{outcome.proposal_id}` waits for your review (`/review`).")
        return
    if outcome.status == "empty":
        await ctx.reply(f"Nothing to refine: {outcome.summary}.")
    # "failed": the refinement's card and message (delivered before `refine_now` returns) already
    # say why; a reply would only repeat it.


async def review(ctx: CommandContext, argument: str) -> None:
    waiting = ctx.harness.pending_reviews()
    if not waiting:
        await ctx.reply("Nothing is waiting for review.")
        return
    count = len(waiting)
    listed = "\n".join(
        f"- `{p.proposal_id}` ({p.scope}): {p.proposal.summary or 'proposed edits'}" for p in waiting
    )
    await ctx.reply(f"Waiting for review:\n{listed}\n")
    await ask_pending_reviews(ctx.opened)
    left = len(ctx.harness.pending_reviews())
    await ctx.reply(
        f"Reviewed {count - left} of {count} waiting proposals." + (" The rest still wait." if left else "")
    )
