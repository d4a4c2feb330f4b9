"""Subagents: child sessions started from a cell, their limits, mailboxes, persistence and host ops.

See README.md in this folder for the modules. Entry point: `SubagentHub.install(agent)` (the
composition root calls it); `agent.subagents` is the hub.
"""

from __future__ import annotations

from agent_core.subagents.hub import SubagentHub
from agent_core.subagents.limits import Limits
from agent_core.subagents.records import ChildChanged, ChildRecord, Message, SubagentError

__all__ = ["ChildChanged", "ChildRecord", "Limits", "Message", "SubagentError", "SubagentHub"]
