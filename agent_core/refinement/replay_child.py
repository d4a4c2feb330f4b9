"""One replay turn: a one-shot child session of the same agent, in a scratch checkout.

The child is an ordinary session of the agent (its own kernel from the pool, its own transcript and
local harness; the global harness shared), made in the checkout's directory, in `auto` mode (its cells
run without asking: nobody answers a replay) with an editor that refuses anything it would ask. Its
local harness starts empty; the replay "with the edit" writes the proposal's created and updated
entries into it first, so the child's harness prompt holds them. The child's first and only prompt is
the task the user gave before the failed step. Afterwards the child is closed and removed from disk
(its local harness first: a scratch store, not entries a person wrote).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import anyio

from agent_core import events as ev
from agent_core.ports import PermissionDecision, PermissionRequest
from harness_store import Edit, HarnessStore, Proposal
from harness_store.validation import resolve_id

log = logging.getLogger(__name__)

TURN_SECONDS = 600.0  # a replay turn that runs longer is stopped and counts as "could not run"
REPLAY_NOTE = (
    "(This is a replay in a scratch checkout of the repository, to check a harness edit. "
    "Do the task as you would; nothing you change here is kept.)"
)


class ReplayChildError(RuntimeError):
    """The child could not be made or its turn could not run; the message says why."""


@dataclass(frozen=True)
class ChildCost:
    requests: int
    tokens: int


class ReplaySession(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def local_store(self) -> HarnessStore: ...

    @property
    def model_name(self) -> str | None: ...

    def set_mode(self, mode: str) -> None: ...

    def set_config(self, key: str, value: Any) -> None: ...

    def run_turn(self, parts: Sequence[ev.PromptPart]) -> AsyncIterator[ev.TurnEvent]: ...


class ReplayAgent(Protocol):
    """What a replay uses of the agent (`Agent` is one)."""

    async def new_session(self, cwd: str, editor: Any) -> Any: ...

    async def close_session(self, session_id: str) -> None: ...

    async def delete_session(self, session_id: str) -> object: ...


class ReplayEditor:
    """Nobody is at a replay: every permission request is refused, no file is read or written."""

    can_read_files = False
    can_write_files = False

    async def request_permission(self, request: PermissionRequest) -> PermissionDecision:
        return "reject"

    async def read_text_file(self, path: str) -> str:
        raise NotImplementedError("a replay has no editor")

    async def write_text_file(self, path: str, content: str) -> None:
        raise NotImplementedError("a replay has no editor")


def as_local_entries(proposal: Proposal) -> Proposal:
    """The proposal's created and updated entries as creates in a fresh local store (whatever the
    proposal's scope: the replay's harness is the child's own). Deletes have nothing to write."""
    edits = [
        Edit.model_validate(
            {
                "action": "create",
                "kind": edit.kind,
                "id": resolve_id(edit),
                "title": edit.title,
                "content": edit.content,
                "path": edit.path,
                "reference": edit.reference,
                "arguments": edit.arguments,
            }
        )
        for edit in proposal.edits
        if edit.action in ("create", "update") and edit.content
    ]
    return Proposal(summary=f"replay of: {proposal.summary}", edits=edits)


def _write_entries(store: HarnessStore, entries: Proposal, session_id: str) -> None:
    result = store.apply(entries, scope="local", trigger="user", session_id=session_id, source="user")
    if not result.applied:
        raise ReplayChildError(
            "the edit could not be written into the replay's harness: " + "; ".join(result.errors)
        )


class ChildTurns:
    """Runs replay turns as one-shot children of `agent` (`home`: the data dir, for the cleanup;
    `model`: the model the session uses now, which the child uses too)."""

    def __init__(self, agent: ReplayAgent, home: Path, model: str | None = None) -> None:
        self.agent = agent
        self.home = home
        self.model = model

    async def __call__(self, cwd: str, task: str, edits: Proposal | None) -> ChildCost:
        try:
            child: ReplaySession = await self.agent.new_session(cwd, ReplayEditor())
        except (ValueError, OSError) as exc:
            raise ReplayChildError(f"the replay's session could not start: {exc}") from None
        try:
            child.set_mode("auto")
            if self.model and self.model != child.model_name:
                child.set_config("model", self.model)
            if edits is not None:
                entries = as_local_entries(edits)
                if not entries.edits:
                    raise ReplayChildError("the proposal creates or updates no entry to replay with")
                await anyio.to_thread.run_sync(partial(_write_entries, child.local_store, entries, child.id))
            return await self._turn(child, task)
        finally:
            await self._discard(child.id)

    async def _turn(self, child: ReplaySession, task: str) -> ChildCost:
        requests = 0
        usage: ev.UsageReport | None = None
        try:
            with anyio.fail_after(TURN_SECONDS):
                async for event in child.run_turn([ev.TextPart(f"{task}\n\n{REPLAY_NOTE}")]):
                    if isinstance(event, ev.UsageReport):
                        requests += 1
                        usage = event  # the child's totals so far
        except TimeoutError:
            raise ReplayChildError(f"the replay's turn ran past {TURN_SECONDS:.0f} s") from None
        except Exception as exc:  # a model or kernel failure is this run's result, not the job's
            raise ReplayChildError(f"the replay's turn failed: {type(exc).__name__}: {exc}") from None
        tokens = 0
        if usage is not None:
            tokens = (
                usage.input_tokens + usage.output_tokens + usage.cache_read_tokens + usage.cache_write_tokens
            )
        return ChildCost(requests, tokens)

    async def _discard(self, session_id: str) -> None:
        from harness_store import local_root

        with anyio.CancelScope(shield=True):
            try:
                await self.agent.close_session(session_id)
                # The scratch local harness is not kept as "a deleted session's entries".
                await anyio.to_thread.run_sync(
                    partial(shutil.rmtree, local_root(self.home, session_id), ignore_errors=True)
                )
                await self.agent.delete_session(session_id)
            except Exception:
                log.exception("could not remove the replay session %s", session_id)
