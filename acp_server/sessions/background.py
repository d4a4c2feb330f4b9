"""What still runs in the background of a session, in the shape ACP v2's idle state will carry.

ACP v2 (draft) reports an idle session with the list of work still running; an empty list means
settled. Our quiescence report is the v1 form of that: the `session_info_update` mirror carries
`_meta["continual-acp"].quiescence.background`, one entry per queued or running refinement job, so
moving to v2 maps this list onto its field rather than redesigning the report.

This is the one mapping of the settled rule (`Quiescence`, from `HarnessService.quiescence()` or a
published transition) to the wire: the notification, the mirror, `_harness/status` and the
quiescence file's state all come from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from acp_server.protocol import frames
from acp_server.protocol.frames import Frame

if TYPE_CHECKING:
    from agent_core.refinement.quiescence import Quiescence


def background_items(pending: int, in_flight: int) -> list[Frame]:
    """The refinement work behind a quiescence transition: running jobs first, then queued ones."""
    items = [
        frames.background_item("refinement", f"running-{n}", "Refining the harness")
        for n in range(1, in_flight + 1)
    ]
    items += [
        frames.background_item("refinement", f"queued-{n}", "Harness refinement queued")
        for n in range(1, pending + 1)
    ]
    return items


def quiescence_params(session_id: str, now: Quiescence) -> Frame:
    """The `_harness/quiescence` params: quiescent only when refinement has settled and no child of
    the session is still queued or running (`Quiescence.quiescent`, the one rule)."""
    return frames.quiescence_notification(session_id, now.quiescent, now.pending, now.last_refinement_id)


def quiescence_update(now: Quiescence, children: Sequence[Frame] = ()) -> Frame:
    """The one quiescence mirror (`session_info_update`): its counts, last id and the background
    list -- refinement jobs, then the session's children still queued or running (`children`)."""
    items = [*background_items(now.pending, now.in_flight), *children]
    return frames.quiescence_mirror_update(now.quiescent, now.pending, now.last_refinement_id, items)


def status_fields(now: Quiescence) -> dict[str, Any]:
    """What `_harness/status` says of quiescence: `quiescent` by the one rule, and how many
    children still run (only when any)."""
    fields: dict[str, Any] = {"quiescent": now.quiescent}
    if now.children:
        fields["runningSubagents"] = now.children
    return fields


def snapshot_state(now: Quiescence, children: Sequence[Frame] = ()) -> dict[str, Any]:
    """`{quiescent, pending, in_flight, background}`: the quiescence file's and the panel's state."""
    return {
        "quiescent": now.quiescent,
        "pending": now.pending,
        "in_flight": now.in_flight,
        "background": [*background_items(now.pending, now.in_flight), *children],
    }
