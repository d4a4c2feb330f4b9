"""harness_store: the continual harness (entries, proposals, apply, rollback, persistence).

The public names below are a contract with agent_core, acp_server and the CLI; see README.md.
"""

from __future__ import annotations

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
from harness_store.store import HarnessStore, RefinementNotFound
from harness_store.tombstones import normalize_content
from harness_store.validation import BASE_PROMPT_ID
from harness_store.views import render_view

__all__ = [
    "ACTIONS",
    "BASE_PROMPT_ID",
    "DEFAULT_BUDGET",
    "KINDS",
    "TRIGGERS",
    "AppliedEdit",
    "Edit",
    "HarnessEntry",
    "HarnessState",
    "HarnessStore",
    "HarnessStoreError",
    "OverviewBudget",
    "Proposal",
    "RefinementNotFound",
    "RefinementResult",
    "Tombstone",
    "data_home",
    "global_root",
    "local_root",
    "merge",
    "normalize_content",
    "render_overview",
    "render_view",
]
