"""The harness slash commands: `/history`, `/harness`, `/rollback`, `/undo`, `/refine`, `/review`, `/why`,
`/promote`, `/curate`.

Each asks the session's `HarnessSurface` and answers as readable text; the changes go through the
coordinator, so they are shown as refinement cards and counted in quiescence.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from acp_server.harness.review import ask_pending_reviews, ask_review

if TYPE_CHECKING:
    from acp_server.ports import CommandContext
    from agent_core.refinement.records import Scope
    from agent_core.refinement.surface import HarnessEntry, HarnessState, ProjectConflict, RefinementResult

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
    if record.tombstone_change:  # a rejection before apply or a lift: it changed no entry
        status = "tombstoned" if record.tombstoned else "tombstone lifted"
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


def neutralized_section(state: HarnessState) -> str:
    """The entries of `state` the prompt shows altered, each with its flag ("" when none)."""
    from agent_core.refinement.surface import KINDS, neutralized_flag

    lines = []
    for kind in KINDS:  # visible entries in `visible_entries` order; only the flagged ones sorted
        flagged = [
            (key, flag)
            for key, entry in state.entries.get(kind, {}).items()
            if entry.trust != "rejected" and (flag := neutralized_flag(entry))
        ]
        lines += [f"- {kind} `{key}`:{flag}" for key, flag in sorted(flagged)]
    if not lines:
        return ""
    return "\n\n### Neutralized in the prompt (shown as quoted data, not instructions)\n" + "\n".join(lines)


async def _usage_section(ctx: CommandContext, overview: str, state: HarnessState) -> str:
    """Per entry shown: turns in the prompt, last use, how those turns went, review marks."""
    import anyio

    from agent_core.trust.entry_usage import usage_section

    entries = {key: entry for by_key in state.entries.values() for key, entry in by_key.items()}
    home = ctx.session.agent_config.home
    section = await anyio.to_thread.run_sync(usage_section, overview, entries, home)
    return f"\n\n{section}" if section else ""


async def harness(ctx: CommandContext, argument: str) -> None:
    from agent_core.refinement.surface import HarnessState, render_overview

    query = " ".join(argument.split())
    if query == "ui":
        await harness_ui(ctx)
        return
    if not query:
        state = await ctx.harness.state("merged")
        text = render_overview(state).strip()
        if text:
            text += await _usage_section(ctx, text, state) + neutralized_section(state)
        await ctx.reply(text or "The harness is empty: no notes, memories, skills or subagents yet.")
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
    if text:
        text += await _usage_section(ctx, text, shown) + neutralized_section(shown)
    if not text:
        kinds = ", ".join(sorted(set(HARNESS_KINDS.values())))
        await ctx.reply(
            f"The harness has {what}. `/harness` shows everything; `/harness <kind>` filters by "
            f"kind ({kinds}); any other text searches titles and contents."
        )
        return
    await ctx.reply(text)


async def harness_ui(ctx: CommandContext) -> None:
    """`/harness ui`: the review panel's URL, starting the panel in this process if needed."""
    import asyncio
    from functools import partial

    import anyio

    from acp_server.panel.link import ServerLink
    from acp_server.panel.run import ensure_panel

    home = ctx.session.agent_config.home
    # The panel's actions go through this server's open sessions (their cards, their quiescence).
    server = ctx.server
    link = ServerLink(lambda: server.sessions, asyncio.get_running_loop())
    try:
        # Blocks until the panel listens: a worker thread, never the event loop.
        url = await anyio.to_thread.run_sync(
            partial(ensure_panel, home, link=link, session_id=ctx.session.id)
        )
    except OSError as exc:
        await ctx.reply(f"The harness review panel could not start: {exc}")
        return
    said = (
        "Harness review panel: {url}\n\nOpen it in a browser on this machine; only this URL (with its "
        "token) is accepted, and the panel runs until the agent exits."
    )
    # The token approves reviews: shown to the editor once, never written to the transcript (a cell
    # can read the data dir on the local backend, and would approve its own review with it).
    base = url.split("?", 1)[0]
    kept = said.format(url=f"{base} (its token is not kept in the history: run /harness ui again)")
    if ctx.reply_once is not None:
        await ctx.reply_once(said.format(url=url), kept)
    else:
        await ctx.reply(kept)


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


def describe_conflicts(conflicts: list[ProjectConflict]) -> str:
    """The `/review` list of the project store's git-merge conflicts, each side numbered."""
    lines = ["Project harness merge conflicts (the same entry changed on both sides of a git merge):"]
    for conflict in conflicts:
        lines.append(f"- {conflict.kind} `{conflict.entry_id}`: {conflict.reason}")
        for side, entry in enumerate(conflict.candidates, start=1):
            if entry is None:
                lines.append(f"  {side}. (deleted)")
            else:
                content = " ".join(entry.content.split())
                lines.append(f"  {side}. {entry.title}: {content[:120]}")
    lines.append("Keep one side with `/review resolve <kind>/<id> <side>`.")
    return "\n".join(lines)


async def resolve(ctx: CommandContext, words: list[str]) -> None:
    """`/review resolve <kind>/<id> <side>`: end a project merge conflict with one side."""
    usage = "Usage: `/review resolve <kind>/<id> <side>` (sides are numbered by `/review`)."
    if len(words) != 2 or "/" not in words[0] or not words[1].isdigit() or int(words[1]) < 1:
        await ctx.reply(usage)
        return
    kind, _, entry_id = words[0].partition("/")
    try:
        result = await ctx.harness.resolve_conflict(kind, entry_id, int(words[1]) - 1)
    except KeyError:
        await ctx.reply(f"{kind} `{entry_id}` is not in conflict in the project harness. See `/review`.")
        return
    except IndexError:
        await ctx.reply(f"{kind} `{entry_id}` has no side {words[1]}. See `/review`.")
        return
    if not result.applied:
        await ctx.reply(f"Not resolved: {'; '.join(result.errors) or 'nothing was applied'}.")
        return
    await ctx.reply(f"Resolved {kind} `{entry_id}` with side {words[1]}: refinement {result.id} (project).")


async def review(ctx: CommandContext, argument: str) -> None:
    import anyio

    words = _words(argument)
    if words and words[0] == "resolve":
        await resolve(ctx, words[1:])
        return
    conflicts = await anyio.to_thread.run_sync(ctx.harness.conflicts)
    if conflicts:
        await ctx.reply(describe_conflicts(conflicts) + "\n")
    waiting = ctx.harness.pending_reviews()
    if not waiting:
        if not conflicts:
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


async def why(ctx: CommandContext, argument: str) -> None:
    """`/why <entry-id>`: the refinements that wrote the entry and the messages they cite."""
    import anyio

    from agent_core.trust.commands import why_reply

    # Reads histories and transcripts from disk: off the event loop.
    await ctx.reply(await anyio.to_thread.run_sync(why_reply, ctx.session, argument))


PROMOTE_USAGE = "Usage: `/promote <entry-id> [project|global]` (e.g. `/promote test_command global`)."


async def promote(ctx: CommandContext, argument: str) -> None:
    """`/promote <entry-id> [project|global]`: move a local entry up (project by default when the
    session is in a repository, else global)."""
    from agent_core.refinement.surface import PromotionError

    words = _words(argument)
    if not words or len(words) > 2:
        await ctx.reply(PROMOTE_USAGE)
        return
    scopes = ctx.harness.scopes()
    wanted = words[1] if len(words) == 2 else ("project" if "project" in scopes else "global")
    if wanted != "project" and wanted != "global":
        await ctx.reply(f"Promote to project or global, not {wanted!r}. {PROMOTE_USAGE}")
        return
    target: Scope = "project" if wanted == "project" else "global"
    kind, _, entry_id = words[0].rpartition("/")
    try:
        done = await ctx.harness.promote(entry_id, target, kind=kind or None)
    except PromotionError as exc:
        await ctx.reply(f"Not promoted: {exc}.")
        return
    entry = done.entry
    if done.proposal_id is not None:
        await _promote_reviewed(ctx, done.proposal_id, entry.kind, entry.id, target)
        return
    if done.created is None or not done.created.applied:
        errors = ("; ".join(done.created.errors) if done.created else "") or "nothing was applied"
        await ctx.reply(
            f"Could not promote {entry.kind} `{entry.id}` to {target}: {errors}. The local entry is unchanged."
        )
        return
    lines = [f"Promoted {entry.kind} `{entry.id}` to the {target} harness ({done.created.id})."]
    if done.removed is not None and done.removed.applied:
        lines.append(f"The local copy was removed ({done.removed.id}).")
    else:
        errors = "; ".join(done.removed.errors) if done.removed is not None else "not attempted"
        lines.append(f"The local copy is still there ({errors}).")
    lines.append(
        f"Undo it with `/undo` (or `/rollback {done.created.id}`): the entry goes back to this session only."
    )
    await ctx.reply("\n".join(lines))


async def _promote_reviewed(
    ctx: CommandContext, proposal_id: str, kind: str, entry_id: str, target: str
) -> None:
    """A promotion that waits for review (to project, like every project edit): ask it now."""
    pending = ctx.harness.pending_review(proposal_id)
    decided = await ask_review(ctx.opened, pending) if pending is not None else None
    if decided is None:
        await ctx.reply(
            f"Promoting {kind} `{entry_id}` to the {target} harness waits for your review: "
            f"proposal `{proposal_id}` (`/review`). The local entry stays until it is approved."
        )
        return
    if decided.status != "applied":
        why = decided.error or decided.status
        await ctx.reply(f"Not promoted: {why}. The local entry is unchanged.")
        return
    lines = [f"Promoted {kind} `{entry_id}` to the {target} harness ({decided.refinement_id}), as reviewed."]
    lines.append(
        f"Undo it with `/undo` (or `/rollback {decided.refinement_id}`): the entry goes back to this session only."
    )
    await ctx.reply("\n".join(lines))


CURATE_USAGE = (
    "Usage: `/curate [apply] [--global|--project]` (a dry run unless `apply`), or "
    "`/curate restore <kind>/<id> [--global|--project]` to bring an archived entry back."
)


async def curate(ctx: CommandContext, argument: str) -> None:
    """`/curate`: the curator's deterministic pass over one store (local by default): a dry-run
    report, or with `apply` the pass as one refinement (`/undo` or `/rollback <id>` undoes it)."""
    words = _words(argument)
    scope: Scope = "global" if "--global" in words else "project" if "--project" in words else "local"
    rest = [w for w in words if w not in ("--global", "--project")]
    if scope == "project" and not ctx.harness.has_project:
        await ctx.reply("This session has no project harness (its cwd is not in a git repository).")
        return
    if rest[:1] == ["restore"] and len(rest) == 2 and "/" in rest[1]:
        kind, _, entry_id = rest[1].partition("/")
        restored = await ctx.harness.restore_archived(scope, kind, entry_id)
        if restored is None or not restored.applied:
            why = "; ".join(restored.errors) if restored is not None else "it is not archived"
            await ctx.reply(f"Nothing restored: {scope} {kind}/{entry_id}: {why}.")
        else:
            await ctx.reply(f"Restored {scope} {kind}/{entry_id} (refinement {restored.id}).")
        return
    if rest not in ([], ["apply"]):
        await ctx.reply(CURATE_USAGE)
        return
    done = await ctx.harness.curate(scope, home=ctx.session.agent_config.home, apply=rest == ["apply"])
    report = done.plan.report()
    if done.result is None:
        flag = {"local": "", "global": " --global", "project": " --project"}[scope]
        hint = f"\n\nApply it with `/curate apply{flag}`." if done.plan.actions else ""
        await ctx.reply(f"Dry run ({scope} harness). {report}{hint}")
        return
    applied = sum(e.applied for e in done.result.applied_edits)
    text = (
        f"Applied the curator pass to the {scope} harness as refinement {done.result.id} "
        f"({applied} of {len(done.result.applied_edits)} changes). {report}\n\n"
        f"Undo the whole pass with `/undo` (or `/rollback {done.result.id}`)."
    )
    if done.result.errors:
        text += "\nRefused:\n" + "\n".join(f"- {e}" for e in done.result.errors)
    await ctx.reply(text)
