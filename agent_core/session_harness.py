"""A session's harness: its three stores (local, global, the project's) and the harness section
of its system prompt, entries ordered by their counters (trust/entry_counters.py).

The stores are opened lazily: a session that never reads its harness imports no harness_store.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_core.trust.entry_usage import TurnUsage
    from harness_store import HarnessState, HarnessStore, ProjectStore, Scopes

log = logging.getLogger(__name__)


class SessionHarness:
    def __init__(self, *, home: Path, local_dir: Path, cwd: str, global_store: HarnessStore | None) -> None:
        self._home = home  # the agent's home: the global store and the entry counters live there
        self._local_dir = local_dir
        self._cwd = cwd
        self._global_store = global_store
        self._project_store: ProjectStore | None = None
        self._project_checked = False
        self._local_store: HarnessStore | None = None

    @property
    def global_store(self) -> HarnessStore:
        if self._global_store is None:
            from harness_store import HarnessStore

            self._global_store = HarnessStore(self._home / "harness")
        return self._global_store

    @property
    def local_store(self) -> HarnessStore:
        if self._local_store is None:
            from harness_store import HarnessStore

            self._local_store = HarnessStore(self._local_dir)
        return self._local_store

    @property
    def project_store(self) -> ProjectStore | None:
        """The `ProjectStore` of the git repository around the cwd, or None outside one."""
        if not self._project_checked:
            from agent_core.trust.project_scope import session_project_store

            self._project_store = session_project_store(self._cwd)
            self._project_checked = True
        return self._project_store

    @property
    def scopes(self) -> Scopes:
        """The session's stores: local, global and the project's (None outside a git repository)."""
        from harness_store import Scopes

        return Scopes(self.local_store, self.global_store, self.project_store)

    def overview(self, query: str | None, usage: TurnUsage | None) -> str:
        """The harness section of the prompt; `usage` (the running turn's) learns what it showed."""
        from harness_store import render_overview

        view = self.scopes.states().prompt_view()
        overview = str(render_overview(view, query=query, order=self._prompt_order()))
        if usage is not None:
            usage.expect(_predictions(view))
            usage.saw(overview)  # which entries this turn's prompt showed (entry_usage.py)
        return overview

    def _prompt_order(self) -> dict[str, int]:
        """Helpful entries first, harmful ones last (entry_counters.py); none when unreadable."""
        from agent_core.trust.entry_counters import home_counters, prompt_order

        try:
            return prompt_order(home_counters(self._home))
        except Exception:  # the counters order the prompt; they must never stop it
            log.exception("could not read the harness entry counters")
            return {}


_PREDICTIONS: dict[int, tuple[object, dict[str, str]]] = {}


def _predictions(view: HarnessState) -> dict[str, str]:
    """The prompt view's predictions (entry_counters.predictions), once per view: the view object
    is reused while no store changed, so 10,000 entries are scanned once per harness change."""
    from agent_core.trust.entry_counters import predictions

    hit = _PREDICTIONS.get(id(view))
    if hit is not None and hit[0] is view:
        return hit[1]
    found = predictions(view.entries)
    _PREDICTIONS.clear()
    _PREDICTIONS[id(view)] = (view, found)
    return found
