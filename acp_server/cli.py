"""The `continual-acp` console script.

This module is the composition root: it is the one place allowed to import every package
(see tests/test_import_boundaries.py), so each subcommand's implementation can live in the
package that owns it. Heavy imports stay inside the subcommand so `serve` starts fast.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

    from agent_core.session import Session


def _build_parser() -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(
        prog="continual-acp",
        description="ACP agent server: one persistent IPython kernel per session and a continual harness.",
    )
    from acp_server import __version__

    parser.add_argument("--version", action="version", version=f"continual-acp {__version__}")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="speak ACP over stdio (the default when no subcommand is given)")
    # An editor's terminal sign-in appends the method's args (`setup`) to the launch line (`serve`).
    serve.add_argument("then", nargs="?", choices=["setup"], help=argparse.SUPPRESS)
    serve.description = (
        "Speak the Agent Client Protocol over stdin/stdout: what an editor launches. Nothing but "
        "JSON-RPC goes to stdout; logs go to stderr."
    )
    for name, line, description in (
        (
            "setup",
            "ask for the model endpoint, key and model, check them, write config.toml",
            "Ask for the model endpoint, its key and the model, check them against the endpoint, "
            "and write config.toml (editors' terminal sign-in runs this too).",
        ),
        (
            "demo",
            "run a scripted end-to-end session offline and print the transcript",
            "Run one scripted session through the real server, kernel and harness, offline (a "
            "scripted model on loopback), and print what the editor would show.",
        ),
        (
            "doctor",
            "check kernel start, data dir and model endpoint",
            "Check that a kernel starts, the data dir is usable and the model endpoint answers; "
            "each line says OK or what to do.",
        ),
        (
            "sessions",
            "list saved sessions (the ids for --session)",
            "List saved sessions, newest first, with their ids (for `harness --session`).",
        ),
    ):
        sub.add_parser(name, help=line, description=description)
    harness = sub.add_parser("harness", help="inspect and roll back the continual harness")
    harness.add_argument(
        "harness_argv", nargs=argparse.REMAINDER, help="list|show|history|rollback|tombstones|ui ..."
    )
    evaluation = sub.add_parser(
        "eval", help="measure the harness: a task suite over sessions, learning vs frozen"
    )
    evaluation.add_argument(
        "eval_argv", nargs=argparse.REMAINDER, help="[SUITE] [--scripted] ... | report DIR ..."
    )
    return parser


class _KernelSkills:
    """agent_core's `SkillsPort` over `skills.loader` (only this composition root may import both)."""

    def setup_code(self, cwd: str) -> str | None:
        from skills.loader import session_skills, setup_code

        roots, _index = session_skills(cwd)
        return setup_code(roots)

    def index_text(self, cwd: str) -> str:
        from harness_store.safe_read import warn_once
        from skills.loader import session_skills
        from skills.user_skills import render_index

        _roots, index = session_skills(cwd)
        for problem in index.problems:  # "<path>: <reason>"; each path once per process, not per prompt
            path, _, reason = problem.partition(": ")
            warn_once(path, reason)
        return render_index(index.skills)

    def list_skills(self, cwd: str) -> list[tuple[str, str]]:
        from skills.loader import session_skills

        _roots, index = session_skills(cwd)
        return [(skill.name, skill.description) for skill in index.skills]

    def read_skill(self, cwd: str, name: str) -> str:
        from skills.loader import session_skills
        from skills.user_skills import read_skill_text

        _roots, index = session_skills(cwd)
        return read_skill_text(index, name)


def _preload() -> None:
    """Imports the agent factory and what the first session/new answer needs (run in the server's
    import thread). Not refinement or autonomous mode: a new session's `on_session` runs right after
    its answer (`Agent.new_session(defer_setup=True)`), and their imports (harness_store, pydantic:
    ~0.1 s on 2 slow cores) with it."""
    for module in ("agent_core.agent", "skills.loader"):
        importlib.import_module(module)


def _attach_refinement(session: Session) -> None:
    """The agent's `on_session` seam: the continual harness (host ops, after-turn review) and goals +
    autonomous mode, per session. Refinement takes autonomous checkpoints as natural points for an
    automatic review (attach.py)."""
    from agent_core.autonomy.controller import SessionAutonomy
    from agent_core.refinement.attach import SessionRefinement

    SessionRefinement.attach(session)
    SessionAutonomy.attach(session)


def _build_agent(config: Any) -> Any:
    """The server's Agent: agent_core wired to the kernel-side skills and to refinement (built off the
    startup path)."""
    from agent_core import Agent
    from kernel_bridge.environment import drop_secret_environment

    # The key now lives in `config`: take it (and every other credential-like variable) out of
    # the server's own environment so nothing started later inherits it.
    drop_secret_environment()
    from agent_core.subagents import SubagentHub

    agent = Agent(config, skills=_KernelSkills(), on_session=_attach_refinement)
    SubagentHub.install(agent)  # children spawned from cells (`agents.*`), /agents
    return agent


def _harden() -> None:
    """Before any kernel exists: same-user kernels must not read /proc/<server>/environ (the model
    key) or open /proc/<server>/fd/<n> (the editor's protocol pipes)."""
    from kernel_bridge.hardening import make_undumpable

    make_undumpable()


def _kill_children() -> None:
    """Before a forced exit (acp_server/process/watchdog.py): SIGKILL every kernel's process group the server
    tracks (gates and MCP servers run under `group_watch`, which ends them when their parent dies)."""
    from kernel_bridge.reaper import kill_all

    kill_all()


def _install_harness_methods(server: Any) -> None:
    """The `_harness/*` extension methods (imported after the early `initialize` answer)."""
    from acp_server.harness.methods import install

    install(server)


def _install_session_methods(server: Any) -> None:
    """The `_session/*` extension methods (rewind)."""
    from acp_server.sessions.extensions import install

    install(server)


def _install_subagent_cards(server: Any) -> None:
    """Subagent cards and `/agents`."""
    from acp_server.turn.subagent_cards import install

    install(server)


def _install_quiescence_file(server: Any) -> None:
    """`sessions/<id>/quiescence.json` for panels in other processes."""
    from acp_server.sessions.quiescence_publisher import install

    install(server)


# What `serve` installs on the server before the first message (the method table's extensions); the
# crafted-session-id sweep reads the same list, so a method added here is swept too.
EXTENSIONS = (
    _install_harness_methods,
    _install_session_methods,
    _install_subagent_cards,
    _install_quiescence_file,
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    argv_list = list(sys.argv[1:] if argv is None else argv)
    if argv_list[:1] in ([], ["serve"]):  # the editor's launch: what it starts for every connection
        from acp_server.process.bytecode_cache import use_private_bytecode_cache

        use_private_bytecode_cache()  # first: everything imported after it is read from (or written to) there
    from acp_server.process.import_costs import skip_unused_heavy_imports

    skip_unused_heavy_imports()  # before any subcommand imports jsonschema (via jsonrpcserver, mcp)
    # `harness` owns its whole argv (`continual-acp harness --json list` must work), so route it
    # before the top-level parser can reject options it does not know.
    if argv_list[:2] == ["harness", "ui"]:  # the review panel (acp_server/panel; imports aiohttp)
        from acp_server.panel.run import main as panel_main

        return panel_main(argv_list[2:])
    if argv_list[:1] == ["sessions"] or argv_list[:2] == ["harness", "sessions"]:  # clients
        from acp_server.console.sessions_cli import main as sessions_main

        return sessions_main(argv_list[2 if argv_list[0] == "harness" else 1 :])
    if argv_list[:1] == ["eval"]:  # the eval drives this server as a client; it owns its argv
        from continual_eval.cli import main as eval_main

        return eval_main(argv_list[1:])
    if argv_list[:1] == ["harness"]:
        from agent_core.refinement.curation import standing_factory
        from agent_core.trust.skill_check import cli_verifier_factory  # trust: imports are checked
        from harness_store.cli import main as harness_main

        return harness_main(
            argv_list[1:], verifier_factory=cli_verifier_factory(), standing_factory=standing_factory
        )
    # No arguments (how editors launch it): serve without importing argparse (startup path).
    if not argv_list and sys.stdin.isatty():
        # A person typed it: the server would wait silently for JSON-RPC on the terminal.
        sys.stderr.write(
            "continual-acp: speaking ACP on stdin/stdout for an editor (Ctrl-D to end). Try "
            "`continual-acp demo`, `continual-acp setup` or `continual-acp --help`.\n"
        )
    args = _build_parser().parse_args(argv_list) if argv_list else None
    command = (args.command if args is not None else None) or "serve"
    if command == "setup" or (command == "serve" and getattr(args, "then", None) == "setup"):
        from acp_server.console.setup import run_setup

        return run_setup()
    if command == "serve":
        # Light imports only: the first `initialize` is answered before the rest is imported.
        from acp_server.harness.names import HARNESS_METHODS, HARNESS_NOTIFICATIONS
        from acp_server.server import serve_stdio
        from acp_server.sessions.extensions import SESSION_METHODS

        return serve_stdio(
            agent_factory=_build_agent,
            agent_prepare=_preload,
            extensions=list(EXTENSIONS),
            advertised=((*HARNESS_METHODS, *SESSION_METHODS), HARNESS_NOTIFICATIONS),
            harden=_harden,
            kill_children=_kill_children,
        )
    if command == "demo":
        from acp_server.console.demo import run_demo

        return run_demo()
    if command == "doctor":
        from acp_server.console.doctor import run_doctor

        return run_doctor()
    raise AssertionError(command)


if __name__ == "__main__":
    raise SystemExit(main())
