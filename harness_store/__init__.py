"""harness_store: the continual harness (entries, proposals, apply, rollback, persistence).

The public names below are a contract with agent_core, acp_server and the CLI; see README.md.
"""

from __future__ import annotations

from harness_store.backend import Backend, Snapshot
from harness_store.errors import HarnessStoreError
from harness_store.models import (
    ACTIONS,
    KINDS,
    TRIGGERS,
    AppliedEdit,
    Edit,
    HarnessEntry,
    HarnessState,
    Proposal,
    RefinementResult,
    Tombstone,
)
from harness_store.overview import DEFAULT_BUDGET, OverviewBudget, merge, render_overview
from harness_store.paths import data_home, global_root, local_root
from harness_store.project import ProjectStore
from harness_store.scopes import ScopeName, Scopes, ScopeStates
from harness_store.store import HarnessStore, RefinementNotFound, Store
from harness_store.tombstones import normalize_content
from harness_store.validation import BASE_PROMPT_ID, empty_lesson
from harness_store.views import render_view

__all__ = [
    "ACTIONS",
    "BASE_PROMPT_ID",
    "DEFAULT_BUDGET",
    "KINDS",
    "TRIGGERS",
    "AppliedEdit",
    "Backend",
    "Edit",
    "HarnessEntry",
    "HarnessState",
    "HarnessStore",
    "HarnessStoreError",
    "OverviewBudget",
    "ProjectStore",
    "Proposal",
    "RefinementNotFound",
    "RefinementResult",
    "ScopeName",
    "ScopeStates",
    "Scopes",
    "Snapshot",
    "Store",
    "Tombstone",
    "data_home",
    "empty_lesson",
    "global_root",
    "local_root",
    "merge",
    "normalize_content",
    "render_overview",
    "render_view",
]
