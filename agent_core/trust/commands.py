"""`/why` for one session: the stores it sees and the replies.

The command layer (acp_server) calls these with a `Session`; they assemble the session's stores —
local, the project store of the repository around its cwd (when there is one), global — and the
session's transcripts, and return the reply text (or the `_harness/why` payload). `/promote` is
the harness surface's (`HarnessSurface.promote`: a project promotion is reviewed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_core.trust.why import WhyAnswer, render_why, why
from harness_store import Scopes, Store

if TYPE_CHECKING:
    from agent_core.session import Session


def session_stores(session: Session) -> list[tuple[str, Store]]:
    """(scope, store) a session sees, narrowest first: local, project (if any), global."""
    scopes: Scopes = session.scopes
    return list(scopes.each())


def why_answer(session: Session, entry_id: str, *, kind: str | None = None) -> WhyAnswer:
    """`why` over the session's stores and the data home's transcripts."""
    return why(entry_id, stores=session_stores(session), sessions=session.store, kind=kind)


def why_reply(session: Session, argument: str) -> str:
    """The reply to `/why <entry-id>` (or `/why <kind>/<entry-id>`)."""
    words = argument.split()
    if len(words) != 1:
        return "Usage: /why <entry-id>  (e.g. /why test_command, or /why memory/test_command)"
    kind, _, entry_id = words[0].rpartition("/")
    answer = why_answer(session, entry_id, kind=kind or None)
    text = render_why(answer)
    if not answer.current:
        return text
    from agent_core.trust.entry_counters import home_counters, lookup
    from agent_core.trust.entry_usage import describe, home_usage

    home = session.agent_config.home
    usage = home_usage(home)
    counters = home_counters(home)
    lines: list[str] = []
    for scope, entry in answer.current:
        lines.append(
            f"Use in prompts ({scope} `{entry.id}`): "
            + describe(usage.get(entry.id) or usage.get(f"{scope}:{entry.id}"), created_at=entry.created_at)
        )
        counted = lookup(counters, entry.id, scope)
        lines.append(f"Counters ({scope} `{entry.id}`): " + counted.describe())
        prediction = entry.metadata.get("prediction")
        if isinstance(prediction, dict) and prediction.get("command"):
            expect = f": {prediction['expect']}" if prediction.get("expect") else ""
            lines.append(
                f"Prediction ({scope} `{entry.id}`): when `{prediction['command']}` runs{expect} — "
                f"{counted.hits} hit(s), {counted.misses} miss(es)"
            )
    return text + "\n\n" + "\n".join(lines)
