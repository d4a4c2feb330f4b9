"""The names of the `_harness/*` extension surface, for `initialize` to advertise at spawn.

The early `initialize` answer (early_initialize.py) goes out before methods.py is imported, so
the names it advertises are declared here; `methods.install` refuses to register a different set.
"""

from __future__ import annotations

from acp_server.protocol.frames import QUIESCENCE

HARNESS_METHODS: tuple[str, ...] = (
    "_harness/await_quiescence",
    "_harness/history",
    "_harness/review",
    "_harness/rollback",
    "_harness/show",
    "_harness/state",
    "_harness/status",
    "_harness/why",
)
HARNESS_NOTIFICATIONS: tuple[str, ...] = (QUIESCENCE,)
