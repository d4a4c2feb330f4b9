"""The text of `/goal` and `/autonomous` replies (acp_server's command table only forwards to these).

/goal <objective> [--budget TOKENS]     set or replace the goal
/goal status | pause | resume | clear
/autonomous on | off | status
/autonomous gate add <command> | remove <command> | list
"""

from __future__ import annotations

import os
import re
import shlex

from agent_core.autonomy.controller import AutonomySession, SessionAutonomy

__all__ = ["AUTONOMOUS_USAGE", "GOAL_USAGE", "autonomous_command", "goal_command"]

GOAL_USAGE = "Usage: `/goal <objective> [--budget TOKENS]` or `/goal status|pause|resume|clear`."
AUTONOMOUS_USAGE = (
    "Usage: `/autonomous on|off|status` or `/autonomous gate add <command>|remove <command>|list`."
)
_BUDGET = re.compile(r"(?:^|\s)--budget(?:=|\s+)(\S+)\s*$")


def goal_command(autonomy: SessionAutonomy, argument: str) -> str:
    """Run `/goal ...` and return the reply."""
    text = argument.strip()
    word = text.split(maxsplit=1)[0].lower() if text else ""
    try:
        if not text or word == "status":
            return autonomy.goal_status()
        if word in ("pause", "resume", "clear") and len(text.split()) == 1:
            if word == "clear":
                previous = autonomy.clear()
                return (
                    f"Cleared the goal: {previous.objective}" if previous else "There was no goal to clear."
                )
            goal = autonomy.pause() if word == "pause" else autonomy.resume()
            return f"Goal {goal.state}: {goal.objective}"
        budget: int | None = None
        match = _BUDGET.search(text)
        if match:
            raw = match.group(1).replace(",", "").replace("_", "")
            multiplier = 1
            if raw[-1:].lower() in ("k", "m"):
                multiplier = 1_000 if raw[-1].lower() == "k" else 1_000_000
                raw = raw[:-1]
            if not raw.isdigit() or int(raw) * multiplier < 1:
                return f"The budget must be a positive number of tokens (e.g. `--budget 200000` or `200k`), got {match.group(1)!r}."
            budget = int(raw) * multiplier
            text = text[: match.start()].strip()
        goal = autonomy.set_goal(text, budget)
    except ValueError as exc:
        return f"{exc}\n{GOAL_USAGE}"
    limit = f" with a budget of {goal.token_budget:,} tokens" if goal.token_budget else ""
    return (
        f"Goal set{limit}: {goal.objective}\n"
        "It is shown to the model every turn; in autonomous mode the gates decide when it is done."
    )


async def autonomous_command(session: AutonomySession, autonomy: SessionAutonomy, argument: str) -> str:
    """Run `/autonomous ...` and return the reply (may ask the editor to confirm detected gates)."""
    parts = argument.strip().split(maxsplit=2)
    action = parts[0].lower() if parts else "status"
    if action == "status":
        return _status(session, autonomy)
    if action == "off":
        if session.mode != "autonomous":
            return f"Autonomous mode is already off (mode: {session.mode})."
        session.set_mode("auto")
        return "Autonomous mode is off (mode: auto)."
    if action == "on":
        if autonomy.gates():
            session.set_mode("autonomous")
            return "Autonomous mode is on. " + _gate_lines(autonomy)
        confirmed, detected = await autonomy.confirm_detected_gates(f"gates-{os.urandom(6).hex()}")
        if not detected:
            return (
                "Autonomous mode needs at least one gate — a command whose exit code 0 means the work is done "
                "— and this project declares none I could detect. Add one with `/autonomous gate add <command>` "
                "(or in .continual-acp/gates.toml), then `/autonomous on`."
            )
        if not confirmed:
            return "Autonomous mode stays off: the proposed gates were not confirmed. " + AUTONOMOUS_USAGE
        session.set_mode("autonomous")
        return "Autonomous mode is on. " + _gate_lines(autonomy)
    if action == "gate":
        return _gate_command(autonomy, parts[1:] if len(parts) > 1 else [])
    return f"Unknown /autonomous action {action!r}. {AUTONOMOUS_USAGE}"


def _gate_command(autonomy: SessionAutonomy, parts: list[str]) -> str:
    verb = parts[0].lower() if parts else "list"
    rest = parts[1].strip() if len(parts) > 1 else ""
    if verb == "list":
        return _gate_lines(autonomy)
    if verb == "add":
        if not rest:
            return "Usage: `/autonomous gate add <command>` (for example `/autonomous gate add pytest -q`)."
        try:
            shlex.split(rest)
        except ValueError as exc:
            return f"That is not a usable shell command ({exc}): {rest}"
        try:
            gate = autonomy.add_gate(rest)
        except ValueError as exc:
            return str(exc)
        return f"Added gate `{gate.command}` for this session. " + _gate_lines(autonomy)
    if verb == "remove":
        if autonomy.remove_gate(rest):
            return f"Removed gate `{rest}`. " + _gate_lines(autonomy)
        sources = {g.command: g.source for g in autonomy.gates()}
        if rest in sources:
            where = ".continual-acp/gates.toml" if sources[rest] == "project" else "your config.toml"
            return f"`{rest}` is a {sources[rest]} gate: remove it in {where}."
        return f"No gate `{rest}`. " + _gate_lines(autonomy)
    return f"Unknown /autonomous gate action {verb!r}. {AUTONOMOUS_USAGE}"


def _gate_lines(autonomy: SessionAutonomy) -> str:
    gates = autonomy.gates()
    if not gates:
        return "No gates configured."
    lines = ["Gates (all must exit 0):"]
    for gate in gates:
        failed = " — last run failed" if autonomy.state.failed_fingerprint(gate.command) else ""
        lines.append(f"- `{gate.command}` ({gate.source}, timeout {gate.timeout:.0f} s){failed}")
    return "\n".join(lines)


def _status(session: AutonomySession, autonomy: SessionAutonomy) -> str:
    limits = autonomy.settings.limits
    state = "on" if session.mode == "autonomous" else f"off (mode: {session.mode})"
    lines = [
        f"Autonomous mode: {state}" + (" — a loop is running" if autonomy.loop_running else ""),
        f"Limits: {limits.max_continuations} continuations"
        + (f", {limits.max_tokens:,} tokens" if limits.max_tokens else "")
        + (f", {limits.max_seconds:.0f} s" if limits.max_seconds else ""),
        _gate_lines(autonomy),
    ]
    if autonomy.settings.error:
        lines.append(f"Config problem (defaults used): {autonomy.settings.error}")
    if autonomy.goal is not None:
        lines.append(autonomy.goal_status())
    return "\n".join(lines)
