"""Slash commands: advertised with `available_commands_update`, answered as readable text.

Zed refuses to send a `/name` that is not advertised, so every command accepted here is listed; a
`/word` that is not a command goes to the model as ordinary text.
"""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SlashCommand:
    name: str
    description: str
    hint: str | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.hint:
            wire["input"] = {"hint": self.hint}
        return wire


COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand(
        "history", "Show recent harness refinements (newest first)", "number of entries (default 10)"
    ),
    SlashCommand(
        "harness", "Show the continual harness (notes, memories, skills, subagents)", "kind or search text"
    ),
    SlashCommand("rollback", "Roll back a harness refinement by id", "<refinement-id> [--force]"),
    SlashCommand("undo", "Roll back the most recent harness refinement"),
    SlashCommand("kernel", "Kernel status, interrupt or restart", "status | interrupt | restart"),
    SlashCommand(
        "compact", "Summarize older turns to free context (kernel variables survive)", "instructions"
    ),
    SlashCommand("autonomous", "Autonomous mode on or off (same as the mode picker)", "on | off | status"),
    SlashCommand("refine", "Refine the harness from this session", "[--global] [instructions]"),
    SlashCommand("review", "Review pending harness refinements"),
    SlashCommand("agents", "List this session's subagents, or cancel them", "cancel <name> | cancel --all"),  # issue 12
)
_BY_NAME = {command.name: command for command in COMMANDS}


SKILL_PREFIX = "skill:"


def skill_commands(session: Any) -> list[SlashCommand]:
    """`/skill:<name>` for each user skill of the session (Agent Skills folders)."""
    lister = getattr(getattr(session, "skills", None), "list_skills", None)
    if lister is None:
        return []
    try:
        found = lister(session.cwd)
    except Exception:
        log.exception("listing user skills failed")
        return []
    return [
        SlashCommand(f"{SKILL_PREFIX}{name}", " ".join(description.split())[:200], "what to use it for")
        for name, description in found
    ]


def available_commands_update(extra: Sequence[SlashCommand] = ()) -> dict[str, Any]:
    return {
        "sessionUpdate": "available_commands_update",
        "availableCommands": [c.to_wire() for c in (*COMMANDS, *extra)],
    }


def parse_command(prompt: list[dict[str, Any]]) -> tuple[str, str] | None:
    """`(name, argument text)` when the prompt starts with an advertised `/name`, else None."""
    if not prompt or prompt[0].get("type") != "text":
        return None
    match = _COMMAND_RE.match(str(prompt[0].get("text", "")))
    if match is None:
        return None
    name = match.group(1)
    if name not in _BY_NAME and not (name.startswith(SKILL_PREFIX) and len(name) > len(SKILL_PREFIX)):
        return None
    return name, (match.group(2) or "").strip()


_COMMAND_RE = re.compile(r"\s*/([A-Za-z][\w:-]*)(?:\s+(.*))?\s*$", re.DOTALL)


def skill_prompt(session: Any, name: str, argument: str) -> str | None:
    """The prompt a `/skill:<name> ...` turn runs with (the skill's instructions first), or None."""
    reader = getattr(getattr(session, "skills", None), "read_skill", None)
    if reader is None:
        return None
    try:
        text = reader(session.cwd, name)
    except KeyError:
        return None
    task = argument or "Apply this skill to the current work."
    return f"Use the skill `{name}`. Its instructions (SKILL.md):\n\n{text.strip()}\n\nTask: {task}"


Reply = Callable[[str], Awaitable[None]]


class CommandRunner:
    """Runs one command against an agent_core `Session` and replies with text."""

    def __init__(
        self,
        session: Any,
        reply: Reply,
        on_mode_change: Callable[[], Awaitable[None]] | None = None,
        *,
        server: Any = None,
        opened: Any = None,
    ) -> None:
        self._session = session
        self._reply = reply
        self._on_mode_change = on_mode_change
        # The server and the open session, for commands that ask the user (/refine, /review).
        self._server = server
        self._opened = opened

    async def run(self, name: str, argument: str) -> None:
        if name.startswith(SKILL_PREFIX):
            known = ", ".join(c.name for c in skill_commands(self._session)) or "none"
            await self._reply(f"No user skill named {name[len(SKILL_PREFIX) :]!r} (skills: {known}).")
            return
        handler = getattr(self, f"_cmd_{name}")
        try:
            await handler(argument)
        except Exception as exc:
            log.exception("/%s failed", name)
            await self._reply(f"/{name} failed: {type(exc).__name__}: {exc}")

    # ------------------------------------------------------------ harness

    def _stores(self) -> list[Any]:
        return [
            s
            for s in (
                getattr(self._session, "local_store", None),
                getattr(self._session, "global_store", None),
            )
            if s
        ]

    async def _cmd_history(self, argument: str) -> None:
        try:
            limit = int(argument) if argument else 10
        except ValueError:
            limit = 0
        if limit < 1:
            await self._reply(
                f"/history takes a positive number of entries, not {argument!r}. Usage: `/history [N]`, e.g. `/history 5`"
            )
            return
        limit = max(1, min(limit, 200))
        records: list[Any] = []
        for store in self._stores():
            records.extend(await anyio.to_thread.run_sync(store.history, limit))
        records.sort(key=lambda r: str(getattr(r, "created_at", "")), reverse=True)
        records = records[:limit]
        if not records:
            await self._reply(
                "No harness refinements yet. The agent refines its harness as you work; `/refine` asks for one."
            )
            return
        noun = "refinement" if len(records) == 1 else "refinements"
        lines = [f"Last {len(records)} harness {noun} (newest first):", ""]
        for record in records:
            lines.append(_describe(record))
        lines += ["", "Roll one back with `/rollback <id>`, or the latest with `/undo`."]
        await self._reply("\n".join(lines))

    async def _cmd_harness(self, argument: str) -> None:
        from agent_core import merge, render_overview

        local = getattr(self._session, "local_store", None)
        glob = getattr(self._session, "global_store", None)
        if local is None or glob is None:
            await self._reply("The harness store is not available in this session.")
            return
        state = merge(glob.state, local.state)
        query = " ".join(argument.split())
        if not query:
            text = render_overview(state)
            await self._reply(
                text.strip() or "The harness is empty: no notes, memories, skills or subagents yet."
            )
            return
        kind = _HARNESS_KINDS.get(query.lower())
        if kind is not None:
            entries = {kind: dict(state.entries.get(kind, {}))}
            what = f"no {kind} entries"
        else:
            words = query.lower().split()
            entries = {
                k: {key: e for key, e in items.items() if _matches(key, e, words)}
                for k, items in state.entries.items()
            }
            what = f"no entry matching {query!r}"
        text = render_overview(type(state).build(entries, list(state.tombstones))).strip()
        if not text:
            kinds = ", ".join(sorted(set(_HARNESS_KINDS.values())))
            await self._reply(
                f"The harness has {what}. `/harness` shows everything; `/harness <kind>` filters by "
                f"kind ({kinds}); any other text searches titles and contents."
            )
            return
        await self._reply(text)

    async def _find(self, refinement_id: str) -> Any | None:
        for store in self._stores():
            if await anyio.to_thread.run_sync(store.get_refinement, refinement_id) is not None:
                return store
        return None

    async def _rollback(self, refinement_id: str, force: bool) -> None:
        store = await self._find(refinement_id)
        if store is None:
            await self._reply(
                f"No refinement {refinement_id!r} in this session's or the global harness. See `/history`."
            )
            return
        later = await anyio.to_thread.run_sync(
            getattr(store, "rolled_back_by", lambda _id: None), refinement_id
        )
        if later is not None:  # answered before any write: no history record for a no-op
            await self._reply(f"Refinement {refinement_id} was already rolled back by {later}.")
            return
        coordinator = getattr(getattr(self._session, "refinement", None), "coordinator", None)
        if coordinator is not None:
            # Through the coordinator: the rollback is shown as a refinement card and counted in quiescence.
            result = await coordinator.rollback(refinement_id, force=force)
            await coordinator.flushed()
        else:

            def run() -> Any:
                return store.rollback(refinement_id, force=force, trigger="rollback")

            result = await anyio.to_thread.run_sync(run)
        errors = list(getattr(result, "errors", []) or [])
        if errors and not getattr(result, "applied", True):
            hint = "" if force else " Add `--force` to override."
            await self._reply(
                f"Rollback of {refinement_id} was refused:\n" + "\n".join(f"- {e}" for e in errors) + hint
            )
            return
        text = f"Rolled back {refinement_id}: new refinement {result.id} ({getattr(result, 'scope', '?')})."
        if errors:
            text += "\nSome edits were not rolled back:\n" + "\n".join(f"- {e}" for e in errors)
        await self._reply(text)

    async def _cmd_rollback(self, argument: str) -> None:
        try:
            words = shlex.split(argument)
        except ValueError:
            words = argument.split()
        force = "--force" in words
        ids = [w for w in words if w != "--force"]
        if len(ids) != 1:
            await self._reply("Usage: `/rollback <refinement-id> [--force]` (ids are listed by `/history`).")
            return
        await self._rollback(ids[0], force)

    async def _cmd_undo(self, argument: str) -> None:
        if argument:
            await self._reply(
                f"/undo takes no argument (got {argument!r}). Usage: `/undo` rolls back the latest "
                "refinement; `/rollback <id>` rolls back a given one."
            )
            return
        records: list[Any] = []
        for store in self._stores():
            records.extend(await anyio.to_thread.run_sync(store.history, None))
        rolled_back = {getattr(r, "rollback_of", None) for r in records}
        candidates = [
            r
            for r in records
            if getattr(r, "rollback_of", None) is None
            and r.id not in rolled_back
            and getattr(r, "applied", True)
        ]
        if not candidates:
            await self._reply(
                "Nothing to undo: no applied harness refinement that is not already rolled back."
            )
            return
        latest = max(candidates, key=lambda r: str(getattr(r, "created_at", "")))
        await self._rollback(latest.id, force=False)

    # ------------------------------------------------------------ kernel, context

    async def _cmd_kernel(self, argument: str) -> None:
        action = (argument.split() or ["status"])[0]
        if action == "status":
            await self._reply(f"Kernel: {await self._session.kernel_status()}")
        elif action == "interrupt":
            await self._reply(await self._session.interrupt_kernel())
        elif action == "restart":
            if getattr(self._session, "busy", False):
                await self._reply(
                    "Not restarted: a turn is running. Stop it first (cancel the prompt), or use "
                    "`/kernel interrupt` to stop just the running cell; then `/kernel restart`."
                )
                return
            report = str(await self._session.restart_kernel()).strip()
            # kernel_bridge's report already starts "The kernel was restarted: ...": say it once.
            if not report.lower().startswith("the kernel was restarted"):
                report = f"Kernel restarted. {report}".strip()
            await self._reply(report)
        else:
            await self._reply(
                f"Unknown /kernel action {action!r}. Use `/kernel status`, `/kernel interrupt` or `/kernel restart`."
            )

    async def _cmd_compact(self, argument: str) -> None:
        summary = await self._session.compact(argument or None)
        if summary.startswith("Nothing to compact"):
            await self._reply(summary)  # nothing was compacted: do not claim it was
            return
        await self._reply(f"Context compacted.\n\n{summary}".strip())

    async def _cmd_autonomous(self, argument: str) -> None:
        action = (argument.split() or ["status"])[0]
        if action == "status":
            state = "on" if self._session.mode == "autonomous" else f"off (mode: {self._session.mode})"
            await self._reply(f"Autonomous mode is {state}.")
            return
        if action not in ("on", "off"):
            await self._reply(f"Unknown /autonomous action {action!r}. Use `on`, `off` or `status`.")
            return
        self._session.set_mode("autonomous" if action == "on" else "auto")
        if self._on_mode_change is not None:
            await self._on_mode_change()
        await self._reply(f"Autonomous mode {action}; the session mode is now `{self._session.mode}`.")

    async def _cmd_refine(self, argument: str) -> None:
        from acp_server.refinement_review import refine_command

        await refine_command(self._server, self._opened, argument, self._reply)

    async def _cmd_review(self, argument: str) -> None:
        from acp_server.refinement_review import review_command

        await review_command(self._server, self._opened, argument, self._reply)

    async def _cmd_agents(self, argument: str) -> None:  # issue 12: the logic lives in agent_core.subagents
        from agent_core.subagents.commands import agents_command

        hub = getattr(self._session, "subagents", None)
        await self._reply(await agents_command(hub, self._session.id, argument))


# `/harness <kind>`: the store's kinds, their plurals and the words the overview headings use.
_HARNESS_KINDS = {
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


def _matches(key: str, entry: Any, words: list[str]) -> bool:
    """Every word of the `/harness` query occurs in the entry's id, title, content or path."""
    haystack = " ".join(
        str(part)
        for part in (
            key,
            getattr(entry, "title", ""),
            getattr(entry, "content", ""),
            getattr(entry, "path", ""),
        )
    ).lower()
    return all(word in haystack for word in words)


def _describe(record: Any) -> str:
    status = "applied" if getattr(record, "applied", True) else "refused"
    extra = f", rollback of {record.rollback_of}" if getattr(record, "rollback_of", None) else ""
    when = str(getattr(record, "created_at", ""))[:19].replace("T", " ")
    summary = getattr(record, "summary", "") or "(no summary)"
    return f"- `{record.id}` {when} [{getattr(record, 'scope', '?')}, {getattr(record, 'trigger', '?')}, {status}{extra}] {summary}"
