"""What still runs in the background of a session, in the shape ACP v2's idle state will carry.

ACP v2 (draft) reports an idle session with the list of work still running; an empty list means
settled. Our quiescence report is the v1 form of that: the `session_info_update` mirror carries
`_meta["continual-acp"].quiescence.background`, one entry per queued or running refinement job, so
moving to v2 maps this list onto its field rather than redesigning the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from acp_server import frames
from acp_server.frames import Frame


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


def quiescence_notification(session_id: str, event: Any, children: Sequence[Frame] = ()) -> Frame:
    """The `_harness/quiescence` params for a `QuiescenceChanged` (or harness status): quiescent only
    when refinement has settled and no child of the session is still queued or running."""
    return frames.quiescence_notification(
        session_id, event.quiescent and not children, event.pending, event.last_refinement_id
    )


def quiescence_mirror(event: Any, children: Sequence[Frame] = ()) -> Frame:
    """The one quiescence mirror (`session_info_update`) for a `QuiescenceChanged`: its counts, last id
    and the background list — refinement jobs, then the session's children still queued or running."""
    items = [*background_items(event.pending, getattr(event, "in_flight", 0)), *children]
    return frames.quiescence_mirror_update(event.quiescent, event.pending, event.last_refinement_id, items)
