"""`agents`: delegate work to subagents -- other sessions of this server, each with its own kernel.

    handle = await agents.spawn("Run the test suite and summarize failures", name="tests")
    await agents.send("also check the linter", to="tests")   # to "parent", a child or a sibling
    messages = await agents.inbox(wait=True, timeout=60)     # includes each child's final answer
    agents.list()                                            # children with their state
    await agents.observe("tests")                            # bounded summary: state, last cells, messages
    await agents.cancel("tests")

`spawn` returns at admission (the child is `queued` or `running`), never when it finishes. When a
child's turn ends, its final answer (or its failure, or its cancellation) arrives in this agent's
inbox by itself, as a message with `final: True` -- a child does not have to `send` anything.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Generator
from typing import TYPE_CHECKING

from kernel_bridge import hostclient as bridge
from skills._awaitable import Answer

if TYPE_CHECKING:
    from skills._awaitable import JsonObject

__all__ = ["cancel", "inbox", "list", "observe", "send", "spawn"]

_WAIT_SLICE = 5.0  # seconds per host wait (the host caps each wait at the same)


class Messages(builtins.list[dict[str, object]]):
    """A list of inbox messages that may also be awaited (the call was already made)."""

    def __await__(self) -> Generator[None, None, Messages]:
        yield from ()
        return self


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f"{what} must be a non-empty string")
    return value


def spawn(
    task: str,
    name: str | None = None,
    spec: str | None = None,
    model: str | None = None,
    cwd: str | None = None,
) -> Answer:
    """Start a subagent on `task`; returns its handle (name, session_id, state) at admission.

    `spec` is the id of a harness `subagent` entry (its instructions, role and preferred model
    apply); `model` overrides the model; `cwd` (relative to this kernel's) is where it works.
    """
    return Answer(
        bridge.call("agents.spawn", task=_text(task, "task"), name=name, spec=spec, model=model, cwd=cwd)
    )


def send(message: str, to: str = "parent") -> Answer:
    """Send `message` to "parent", to one of your children, or to a sibling, by name."""
    return Answer(bridge.call("agents.send", message=_text(message, "message"), to=to))


def inbox(wait: bool = False, timeout: float | None = None) -> Messages:
    """Messages addressed to this agent (taken out of the inbox); `wait` blocks for the first one
    (at most `timeout` seconds; None: until one arrives)."""
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)):
        raise TypeError("timeout must be a number of seconds or None")
    if wait:
        deadline = None if timeout is None else time.monotonic() + max(0.0, float(timeout))
        while True:
            # Wait on the host without taking anything; take only once something is there, so an
            # interrupted wait never swallows a message.
            left = _WAIT_SLICE if deadline is None else min(_WAIT_SLICE, deadline - time.monotonic())
            if left <= 0 or bridge.call("agents.wait", timeout=left):
                break
    return Messages(bridge.call("agents.inbox"))


def list() -> builtins.list[JsonObject]:
    """Your children with their state (queued, running, needs-action: waiting for the user to answer
    its permission request, idle, finished, failed, cancelled, interrupted)."""
    return builtins.list(bridge.call("agents.list"))


def observe(name: str) -> Answer:
    """A bounded, read-only summary of child `name`: state, task, last cells and messages."""
    return Answer(bridge.call("agents.observe", name=_text(name, "name")))


def cancel(name: str) -> Answer:
    """Stop child `name` (and its own children); its cancellation arrives in your inbox."""
    return Answer(bridge.call("agents.cancel", name=_text(name, "name")))
