"""Slash commands: advertised with `available_commands_update`, answered as readable text.

Zed refuses to send a `/name` that is not advertised, so every command accepted here is listed; a
`/word` that is not a command goes to the model as ordinary text.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from acp_server.commands.rewind_commands import command as rewind_command
from acp_server.commands.rewind_commands import fork_command
from acp_server.harness import commands as harness_commands
from acp_server.protocol import frames

if TYPE_CHECKING:
    from acp_server.ports import CommandContext
    from agent_core.session import Session

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SlashCommand:
    """One advertised slash command: its name, what it does, the argument hint."""

    name: str
    description: str
    hint: str | None = None


COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand(
        "history", "Show recent harness refinements (newest first)", "number of entries (default 10)"
    ),
    SlashCommand(
        "harness",
        "Show the continual harness (notes, memories, skills, subagents)",
        "ui | kind | search text",
    ),
    SlashCommand("rollback", "Roll back a harness refinement by id", "<refinement-id> [--force]"),
    SlashCommand("undo", "Roll back the most recent harness refinement"),
    SlashCommand(
        "kernel",
        "Kernel status, interrupt, restart, or keep (never hibernate)",
        "status | interrupt | restart | keep [off]",
    ),
    SlashCommand(
        "compact", "Summarize older turns to free context (kernel variables survive)", "instructions"
    ),
    SlashCommand(
        "autonomous",
        "Autonomous mode: keep going until the gates pass (same as the mode picker)",
        "on | off | status | gate add <command> | gate remove <command> | gate list",
    ),
    SlashCommand(
        "goal",
        "The session's goal: set it (with an optional token budget), or status, pause, resume, clear",
        "<objective> [--budget TOKENS] | status | pause | resume | clear",
    ),
    SlashCommand("refine", "Refine the harness from this session", "[--global] [instructions]"),
    SlashCommand(
        "review",
        "Review pending harness refinements (and project merge conflicts)",
        "resolve <kind>/<id> <side>",
    ),
    SlashCommand(
        "promote",
        "Move a local harness entry up to the project or global harness (undo with /undo)",
        "<entry-id> [project|global]",
    ),
    SlashCommand("why", "Why the harness holds an entry: its writers and their evidence", "<entry-id>"),
    SlashCommand(
        "curate",
        "Curate the harness: archive unused, harmful, empty and duplicate entries (dry run unless apply)",
        "[apply] [--global|--project] | restore <kind>/<id>",
    ),
    SlashCommand("mcp", "MCP servers: states and last errors, or restart one", "restart <name>"),
    SlashCommand("agents", "List this session's subagents, or cancel them", "cancel <name> | cancel --all"),
    SlashCommand(
        "rewind",
        "Go back to before your n-th last prompt: conversation and kernel variables (files with --files)",
        "[n] [--files] | list",
    ),
    SlashCommand(
        "fork",
        "Start a new session from this one (conversation, local harness, kernel variables), now or before your n-th last prompt",
        "[n]",
    ),
)
_BY_NAME = {command.name: command for command in COMMANDS}


SKILL_PREFIX = "skill:"


def skill_commands(session: Session) -> list[SlashCommand]:
    """`/skill:<name>` for each user skill of the session (Agent Skills folders)."""
    try:
        found = session.skills.list_skills(str(session.cwd))
    except Exception:
        log.exception("listing user skills failed")
        return []
    return [
        SlashCommand(f"{SKILL_PREFIX}{name}", " ".join(description.split())[:200], "what to use it for")
        for name, description in found
    ]


def available_commands_update(extra: Sequence[SlashCommand] = ()) -> dict[str, object]:
    """The `available_commands_update` advertising every command, then `extra` (user skills)."""
    return frames.available_commands_update((*COMMANDS, *extra))


def parse_command(prompt: Sequence[dict[str, object]]) -> tuple[str, str] | None:
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


def skill_prompt(session: Session, name: str, argument: str) -> str | None:
    """The prompt a `/skill:<name> ...` turn runs with (the skill's instructions first), or None."""
    try:
        text = session.skills.read_skill(str(session.cwd), name)
    except KeyError:
        return None
    except OSError as exc:  # not a regular file, or over the cap (harness_store/safe_read.py)
        log.warning("the skill %r cannot be used: %s", name, exc)
        return None
    task = argument or "Apply this skill to the current work."
    return f"Use the skill `{name}`. Its instructions (SKILL.md):\n\n{text.strip()}\n\nTask: {task}"


Handler = Callable[["CommandContext", str], Awaitable[None]]


class CommandRunner:
    """Runs one command in its `CommandContext` and replies with text."""

    def __init__(self, ctx: CommandContext) -> None:
        self._ctx = ctx
        self._handlers: dict[str, Handler] = {
            "history": harness_commands.history,
            "harness": harness_commands.harness,
            "rollback": harness_commands.rollback,
            "undo": harness_commands.undo,
            "refine": harness_commands.refine,
            "review": harness_commands.review,
            "why": harness_commands.why,
            "promote": harness_commands.promote,
            "curate": harness_commands.curate,
            "kernel": kernel,
            "compact": compact,
            "autonomous": autonomous,
            "goal": goal,
            "mcp": mcp,
            "agents": agents,
            "rewind": rewind_command,
            "fork": fork_command,
        }

    async def run(self, name: str, argument: str) -> None:
        ctx = self._ctx
        if name.startswith(SKILL_PREFIX):
            listed = await anyio.to_thread.run_sync(skill_commands, ctx.session)  # reads the skill folders
            known = ", ".join(c.name for c in listed) or "none"
            await ctx.reply(f"No user skill named {name[len(SKILL_PREFIX) :]!r} (skills: {known}).")
            return
        handler = self._handlers[name]
        try:
            await handler(ctx, argument)
        except Exception as exc:
            log.exception("/%s failed", name)
            await ctx.reply(f"/{name} failed: {type(exc).__name__}: {exc}")


# ---------------------------------------------------------------- kernel, context, mode


async def kernel(ctx: CommandContext, argument: str) -> None:
    session = ctx.session
    action = (argument.split() or ["status"])[0]
    if action == "status":
        from acp_server.process.watchdog import current

        watchdog = current()
        loop_line = f"\n\nServer {watchdog.status_line()}." if watchdog is not None else ""
        await ctx.reply(f"Kernel: {await session.kernel_status()}{loop_line}")
    elif action == "interrupt":
        await ctx.reply(await session.interrupt_kernel())
    elif action == "restart":
        if session.busy:
            await ctx.reply(
                "Not restarted: a turn is running. Stop it first (cancel the prompt), or use "
                "`/kernel interrupt` to stop just the running cell; then `/kernel restart`."
            )
            return
        report = str(await session.restart_kernel()).strip()
        # kernel_bridge's report already starts "The kernel was restarted: ...": say it once.
        if not report.lower().startswith("the kernel was restarted"):
            report = f"Kernel restarted. {report}".strip()
        await ctx.reply(report)
    elif action == "keep":
        rest = argument.split()[1:]
        if rest not in ([], ["off"]):
            await ctx.reply("Usage: `/kernel keep` (never hibernate this kernel) or `/kernel keep off`.")
            return
        await ctx.reply(session.keep_kernel(keep=not rest))
    else:
        await ctx.reply(
            f"Unknown /kernel action {action!r}. Use `/kernel status`, `/kernel interrupt`, "
            "`/kernel restart` or `/kernel keep`."
        )


async def compact(ctx: CommandContext, argument: str) -> None:
    summary = await ctx.session.compact(argument or None)
    if summary.startswith("Nothing to compact"):
        await ctx.reply(summary)  # nothing was compacted: do not claim it was
        return
    await ctx.reply(f"Context compacted.\n\n{summary}".strip())


async def autonomous(ctx: CommandContext, argument: str) -> None:
    from agent_core.autonomy.commands import autonomous_command  # the logic lives with autonomy

    session = ctx.session
    if session.autonomy is None:
        await ctx.reply("Autonomous mode is not available in this session.")
        return
    mode_before = session.mode
    reply = await autonomous_command(session, session.autonomy, argument)
    if session.mode != mode_before and ctx.on_mode_change is not None:
        await ctx.on_mode_change()
    await ctx.reply(reply)


async def goal(ctx: CommandContext, argument: str) -> None:
    from agent_core import events as ev
    from agent_core.autonomy.commands import goal_command

    autonomy = ctx.session.autonomy
    if autonomy is None:
        await ctx.reply("Goals are not available in this session.")
        return
    before = autonomy.goal
    reply = goal_command(autonomy, argument)
    after = autonomy.goal
    if after != before:
        # The goal changed outside a turn: show it (session info `_meta` + the plan). The
        # controller already recorded the change for replays.
        await ctx.opened.presenter.present(
            ev.GoalChanged(
                after.objective if after else None,
                after.state if after else None,
                after.status_line() if after else "",
            )
        )
        await ctx.opened.presenter.present(ev.PlanChanged(autonomy.plan_entries()))
    await ctx.reply(reply)


async def mcp(ctx: CommandContext, argument: str) -> None:
    from agent_core.mcp import command_text  # the logic lives with the MCP package

    await ctx.reply(await command_text(ctx.session.mcp, argument))


async def agents(ctx: CommandContext, argument: str) -> None:
    from agent_core.subagents.commands import agents_command  # the logic lives with the subagents

    await ctx.reply(await agents_command(ctx.session.subagents, ctx.session.id, argument))
