"""What confines one workspace command on a sandbox tier: the argv prefix, and whether it runs in a
pid namespace of its own.

Its own module, below both: the sandbox builds it and the backend seam names it in a signature, so
neither has to import the other (`backend` is the sandbox's base class).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Confinement"]


@dataclass(frozen=True, slots=True)
class Confinement:
    """The argv prefix that confines one workspace command (a gate, a check) as the tier confines a
    kernel: the same read-only `.git`, `.continual-acp/`, data dir and protected paths."""

    tier: str
    prefix: tuple[str, ...]
    # bubblewrap: the command runs in a pid namespace of its own, where the server is not visible
    # and `--die-with-parent` (not a watch of the parent pid) ends it with the server.
    pid_namespace: bool
