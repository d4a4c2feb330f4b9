"""The editor seen from agent_core: what a turn may ask of the client.

acp_server implements `EditorPort` over JSON-RPC; tests use a recording fake. agent_core never
imports acp_server, so this Protocol is the whole seam.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

PermissionDecision = Literal["allow_once", "allow_always", "reject", "cancelled"]


@dataclass(frozen=True)
class PermissionRequest:
    """Ask before running a cell (ask mode). `cell_id`/`title`/`code` match the CellStarted to follow."""

    cell_id: str
    title: str
    code: str
    # "cell": run this cell? "gates": use these gate commands (one per line in `code`) for autonomous mode?
    purpose: Literal["cell", "gates"] = "cell"
    # Asked by a subagent (its name and session id): the request goes to its parent's editor, which
    # names the child and keeps the card open across the parent's turns (the child runs on its own).
    subagent: str | None = None
    subagent_session: str | None = None


class EditorPort(Protocol):
    @property
    def can_read_files(self) -> bool: ...

    @property
    def can_write_files(self) -> bool: ...

    async def request_permission(self, request: PermissionRequest) -> PermissionDecision: ...

    async def read_text_file(self, path: str) -> str: ...

    async def write_text_file(self, path: str, content: str) -> None: ...


class NoEditor:
    """An editor that supports nothing and allows every cell (scripts, CLI, tests)."""

    can_read_files = False
    can_write_files = False

    async def request_permission(self, request: PermissionRequest) -> PermissionDecision:
        return "allow_once"

    async def read_text_file(self, path: str) -> str:
        raise NotImplementedError("client has no fs/read_text_file")

    async def write_text_file(self, path: str, content: str) -> None:
        raise NotImplementedError("client has no fs/write_text_file")


class SkillsPort(Protocol):
    """Kernel-side skills as the agent needs them (agent_core may not import `skills`).

    The composition root (`acp_server/cli.py`) passes an implementation built on `skills.loader`:
    `setup_code(cwd)` is run in each new kernel (binds `refine`, `harness`, `editor`, `skills`, ...),
    `index_text(cwd)` is the system prompt's skill index (name + one line per skill).
    """

    def setup_code(self, cwd: str) -> str | None: ...

    def index_text(self, cwd: str) -> str: ...

    def list_skills(self, cwd: str) -> list[tuple[str, str]]:
        """(name, description) of each user skill, for `/skill:<name>` commands."""
        ...

    def read_skill(self, cwd: str, name: str) -> str:
        """The full SKILL.md of `name`; KeyError naming the known skills when there is none."""
        ...


class NoSkills:
    """No kernel-side skills: kernels start bare and the prompt lists no user skills."""

    def setup_code(self, cwd: str) -> str | None:
        return None

    def index_text(self, cwd: str) -> str:
        return ""

    def list_skills(self, cwd: str) -> list[tuple[str, str]]:
        return []

    def read_skill(self, cwd: str, name: str) -> str:
        raise KeyError(f"no skill named {name!r} (no user skills are loaded)")
